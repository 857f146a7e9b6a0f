// Other MSPTI consumers in the process that kineto drives as child profilers: torch_npu's built-in
// MSPTI backend (MsptiActivityProfilerPoc, profiler name "mspti"), shipped by every current
// torch_npu release and registered straight with kineto from a static initialiser of
// libtorch_npu.so.
//
// Detection does not import torch_npu and loads nothing: it looks for a loaded libtorch_npu.so
// (dl_iterate_phdr) exporting a symbol of that backend, and reads torch_npu's version from the
// version.py file next to the library's package (torch_npu/lib/libtorch_npu.so ->
// torch_npu/version.py).
// Thread-safety: thread-safe (reads the loader's list).
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

}  // namespace torch_mspti
