// The "real MSPTI" backend of the simulated NPU (torch_mspti.sim.enable(cann_root=...)): kernel
// launches are also reported to a fake CANN layer, under which Huawei's real libmspti.so runs.
//
// The fake layer is one shared object (libfakecann.so) installed in a CANN root under the names
// MSPTI dlopens from $ASCEND_HOME_PATH/lib64 (libascend_hal, libprofapi, libascendalog,
// libascendcl: symlinks, so glibc maps them to one object and this library drives the very copy
// MSPTI reads). It has one device (0) and models kernel launches and mstx markers only: copies,
// memsets, collectives, memory and other runtime calls still run on the simulator's timeline but
// reach no MSPTI in this mode.
//
// The simulator (libmspti_sim.so) stays bound for the timeline (stream tails, synchronize,
// events); nobody subscribes to it then, so it mints no ids and writes no records.
#pragma once

#include <cstdint>
#include <string>

namespace torch_mspti::sim {

// Binds the fake CANN layer of `root` (a directory laid out by make_root.sh): dlopens
// <root>/lib64/libprofapi.so (RTLD_NOW|RTLD_GLOBAL, never closed), resolves fakecann_open_device
// and fakecann_launch_kernel, and opens device 0 (fakecann_open_device(0): the runtime opening it;
// the fake layer tells a profiler that subscribes later). Once per process: again with the same
// root does nothing, with another root c10::Error, as is a root whose library cannot be loaded or
// lacks a symbol (the message names the file and make_root.sh). Thread-safe.
void bind_cann(const std::string& root);
// The bound root, "" when none.
std::string cann_root();
bool cann_bound();

// Reports `count` kernels named `name` on (device, stream) to the fake CANN layer, on the calling
// thread (the op's thread in direct mode, the task-queue worker in queued mode, the housekeeping
// thread): one fakecann_launch_kernel each, back to back, each lasting duration_ns / count (ns).
// Each gets the next 16-bit task id of (device, stream), wrapping at 65536, so (stream, task id)
// is unique among kernels in flight. The fake layer writes the host records (task track, the
// runtime API "KernelLaunch", the node API of `name`) through MSPTI's callbacks on this thread,
// and the device's begin/end records into its profiling channel. No-op when not bound.
// Thread-safe (the task-id counters are atomic).
void cann_launch(const char* name, int device, int64_t stream, uint64_t duration_ns, uint32_t count);

}  // namespace torch_mspti::sim
