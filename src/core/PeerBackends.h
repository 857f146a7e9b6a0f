// Other MSPTI consumers in the process that kineto drives as child profilers: torch_npu's built-in
// MSPTI backend (MsptiActivityProfilerPoc, profiler name "mspti"), shipped by every current
// torch_npu release and registered straight with kineto from a static initialiser of
// libtorch_npu.so.
//
// Detection does not import torch_npu and loads nothing: it looks for a loaded libtorch_npu.so
// (dl_iterate_phdr) whose read-only segments hold the backend's RTTI class name (the released
// binary exports no symbol of it: tests/torch_npu_peer/FINDINGS.md), and reads torch_npu's version
// from the version.py next to the library's package (torch_npu/lib/libtorch_npu.so ->
// torch_npu/version.py). The scan (about 1-2 ms over a 15 MB library) is repeated only when the
// loader's list of objects changed.
//
// What that backend does next to torch-mspti (same source), and what the plugin does about it:
//  * its session subscribes in start(): ours already holds the subscriber from configure();
//  * it registers its own buffer callbacks in start() even when its Subscribe failed, and the
//    last registration gets the records: ours registers again in start(), at the session's first
//    op after start, and before the drain; a buffer it requested and MSPTI completes into ours is
//    walked and counted as foreign, never freed;
//  * it pushes fn.handle() as CUSTOM0 around every op: a hint MSPTI may then give, which the link
//    rule never trusts alone;
//  * its stop() (before ours when it was registered first) disables MSPTI's kinds: on libraries
//    that do not pull device data on Disable (before 26.1) records still on their way are lost;
//    ours enables its kinds again at once and counts what still went missing;
//  * its DeviceInfo {0, 0x1000000, "NPU", "Ascend NPU"} is written into every trace and cannot be
//    suppressed: our device lanes then use the same names and sort indexes, so each device has one
//    consistent description.
// Thread-safety: thread-safe.
#pragma once

#include <string>

namespace torch_mspti {

struct PeerBackend {
  bool present = false;
  std::string library;      // path of the loaded libtorch_npu.so
  std::string version;      // torch_npu's version, "" when unknown
  std::string description;  // "torch_npu's built-in MSPTI backend (torch_npu 2.13.0)"
};

PeerBackend detectPeerBackend();
// For the fork guard (and its test): hold detectPeerBackend's lock across fork().
void lockPeerBackendsForFork();
void unlockPeerBackendsAfterFork();

}  // namespace torch_mspti
