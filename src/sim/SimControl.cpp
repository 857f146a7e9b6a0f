// The msptiSim* control API (src/sim/include/mspti_sim.h): host code playing the CANN runtime
// and the device. Not part of MSPTI; the plugin core never calls it.
#include <climits>
#include <cstdio>

#include "Export.h"
#include "Generation.h"
#include "SimClock.h"
#include "Simulator.h"
#include "mspti_sim.h"

namespace sim = torch_mspti::sim;

namespace {

// Build the simulator while the library is being loaded, so the environment (LD_PRELOAD,
// ASCEND_RT_VISIBLE_DEVICES) is read "at load" as the real library and runtime do. No thread
// is started here: dlopen must stay cheap and never wait on anything.
[[maybe_unused]] const bool kBuiltAtLoad = (sim::Simulator::instance(), true);

// The control API is C: nothing may throw across it (an allocation failure answers 0).
template <typename Fn>
uint64_t noThrow(Fn&& fn) {
  try {
    return fn();
  } catch (...) {
    return 0;
  }
}

}  // namespace

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimLaunchKernel(const char* name, const char* type, uint32_t device,
                                                     uint32_t stream, uint64_t duration_ns) {
  return noThrow(
      [&] { return sim::Simulator::instance().runtime().launchKernels(name, type, device, stream, duration_ns, 1); });
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimLaunchKernels(const char* name, const char* type, uint32_t device,
                                                      uint32_t stream, uint64_t duration_ns, uint32_t count) {
  return noThrow([&] {
    return sim::Simulator::instance().runtime().launchKernels(name, type, device, stream, duration_ns, count);
  });
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimLaunchCommunication(const char* name, const char* algType, const char* commName,
                                                            uint32_t dataType, uint64_t count, uint32_t device,
                                                            uint32_t stream, uint64_t duration_ns,
                                                            const char* api_name) {
  return noThrow([&] {
    return sim::Simulator::instance().runtime().launchCommunication(name, algType, commName, dataType, count, device,
                                                                    stream, duration_ns, api_name);
  });
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimMemcpy(uint32_t copyKind, uint64_t bytes, uint32_t device, uint32_t stream,
                                               uint64_t duration_ns, uint8_t isAsync) {
  return noThrow([&] {
    return sim::Simulator::instance().runtime().memcpy(copyKind, bytes, device, stream, duration_ns, isAsync != 0);
  });
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimMemset(uint32_t value, uint64_t bytes, uint32_t device, uint32_t stream,
                                               uint64_t duration_ns, uint8_t isAsync) {
  return noThrow([&] {
    return sim::Simulator::instance().runtime().memset(value, bytes, device, stream, duration_ns, isAsync != 0);
  });
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimMemory(uint32_t operation, uint64_t address, uint64_t bytes, uint32_t device) {
  return noThrow([&] {
    if (operation > MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
      std::fprintf(stderr,
                   "libmspti_sim: msptiSimMemory: operation %u is not a msptiActivityMemoryOperationType (0 "
                   "ALLOCATION, 1 RELEASE); nothing was recorded\n",
                   operation);
      return uint64_t{MSPTI_INVALID_CORRELATION_ID};
    }
    sim::Simulator& s = sim::Simulator::instance();
    return s.memoryHooks().call(operation, address, bytes, s.environment().physicalDevice(device));
  });
}

TORCH_MSPTI_SIM_EXPORT void msptiSimRuntimeCall(const char* name, uint64_t host_ns) {
  noThrow([&] {
    sim::Simulator::instance().runtime().runtimeCall(name, host_ns);
    return uint64_t{0};
  });
}

TORCH_MSPTI_SIM_EXPORT int msptiSimCompleteForeignBuffer(uint32_t kernels, int on_new_thread) {
  try {
    return sim::Simulator::instance().completeForeignBuffer(kernels, on_new_thread != 0);
  } catch (...) {
    return -1;
  }
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimGetCounter(const char* name) {
  return sim::Simulator::instance().counter(name);
}

TORCH_MSPTI_SIM_EXPORT int msptiSimSynchronize(int32_t device) {
  const uint64_t tail = sim::Simulator::instance().timeline().deviceTail(device);
  if (tail > sim::realtimeNs()) {
    sim::sleepUntilRealtimeNs(tail);
  }
  return 0;
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimDeviceTail(int32_t device) {
  return sim::Simulator::instance().timeline().deviceTail(device);
}

TORCH_MSPTI_SIM_EXPORT uint64_t msptiSimStreamTail(uint32_t device, uint32_t stream) {
  return sim::Simulator::instance().timeline().streamTail(device, stream);
}

TORCH_MSPTI_SIM_EXPORT void* msptiSimStreamHandle(uint32_t device, uint32_t stream) {
  return sim::streamHandle(device, stream);
}

TORCH_MSPTI_SIM_EXPORT int msptiSimSetOption(const char* key, int64_t value) {
  return sim::Simulator::instance().options().set(key, value);
}

TORCH_MSPTI_SIM_EXPORT int64_t msptiSimGetOption(const char* key) {
  return sim::Simulator::instance().options().get(key);
}

TORCH_MSPTI_SIM_EXPORT void msptiSimGetStats(msptiSimStats* out) { sim::Simulator::instance().fillStats(out); }

TORCH_MSPTI_SIM_EXPORT int msptiSimReloadEnvironment(void) {
  sim::Simulator::instance().environment().reload();
  return 0;
}

TORCH_MSPTI_SIM_EXPORT int msptiSimResetOptions(void) {
  sim::Simulator::instance().options().resetDefaults();
  return 0;
}

TORCH_MSPTI_SIM_EXPORT int msptiSimGeneration(void) { return sim::kGeneration; }
