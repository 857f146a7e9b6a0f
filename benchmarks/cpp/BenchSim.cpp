// The simulator for the benchmarks: loaded once through the process context's MsptiLibrary, the
// way a session loads MSPTI, and its msptiSim* control API resolved from that very copy.
#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "BenchCommon.h"

namespace bench {
namespace {

template <typename Fn>
void resolve(void* h, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(h, name));
  if (!out) throw std::runtime_error(std::string("simulator lacks ") + name);
}

}  // namespace

torch_mspti::PluginContext& context() { return torch_mspti::PluginContext::process(); }

const Sim& loadSim() {
  static const Sim sim = [] {
    torch_mspti::PluginContext& ctx = context();
    if (!ctx.library.loaded()) {
      const std::string err = ctx.config.setText("library_path", MSPTI_SIM_PATH);
      if (!err.empty()) throw std::runtime_error(err);
      if (!ctx.loadLibrary(ctx.config.snapshot()))
        throw std::runtime_error("cannot load the simulator: " + ctx.library.report().reason);
    }
    // RTLD_NOLOAD: the copy MsptiLibrary loaded, never a second one.
    void* h = dlopen(MSPTI_SIM_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (!h) throw std::runtime_error("simulator not loaded by MsptiLibrary");
    Sim s;
    resolve(h, "msptiSimLaunchKernel", s.launchKernel);
    resolve(h, "msptiSimLaunchKernels", s.launchKernels);
    resolve(h, "msptiSimSynchronize", s.synchronize);
    resolve(h, "msptiSimSetOption", s.setOption);
    resolve(h, "msptiSimGetStats", s.getStats);
    resolve(h, "msptiSimResetOptions", s.resetOptions);
    return s;
  }();
  return sim;
}

}  // namespace bench
