// The simulator's control API (mspti_sim.h) as C++ code that drives an already loaded
// libmspti_sim.so sees it: the msptiSim* functions resolved from that very copy. Used by the C++
// tests and benchmarks, which load the simulator through the plugin's MsptiLibrary (as a session
// loads MSPTI) and then need its control functions. Header-only; the plugin core never includes it.
// Errors: std::runtime_error. Thread-safety: resolveSimControl as dlopen/dlsym; the functions as
// mspti_sim.h says.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "mspti_sim.h"

namespace mspti_sim {

struct Control {
  decltype(&msptiSimLaunchKernel) launchKernel = nullptr;
  decltype(&msptiSimLaunchKernels) launchKernels = nullptr;
  decltype(&msptiSimSynchronize) synchronize = nullptr;
  decltype(&msptiSimSetOption) setOption = nullptr;
  decltype(&msptiSimGetStats) getStats = nullptr;
  decltype(&msptiSimResetOptions) resetOptions = nullptr;

  msptiSimStats stats() const {
    msptiSimStats s{};
    getStats(&s);
    return s;
  }
  // setOption, throwing when the simulator refuses `key` or `value`.
  void set(const char* key, int64_t value) const {
    if (setOption(key, value) != 0) throw std::runtime_error(std::string("msptiSimSetOption failed: ") + key);
  }
};

namespace detail {
template <typename Fn>
void resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!out) throw std::runtime_error(std::string("the simulator does not export ") + name);
}
}  // namespace detail

// The control functions of the simulator at `path`, which this process must have loaded already
// (RTLD_NOLOAD: the very copy MsptiLibrary loaded, never a second one).
inline Control resolveSimControl(const char* path) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) throw std::runtime_error(std::string("the simulator is not loaded: ") + path);
  Control c;
  detail::resolve(handle, "msptiSimLaunchKernel", c.launchKernel);
  detail::resolve(handle, "msptiSimLaunchKernels", c.launchKernels);
  detail::resolve(handle, "msptiSimSynchronize", c.synchronize);
  detail::resolve(handle, "msptiSimSetOption", c.setOption);
  detail::resolve(handle, "msptiSimGetStats", c.getStats);
  detail::resolve(handle, "msptiSimResetOptions", c.resetOptions);
  return c;
}

}  // namespace mspti_sim
