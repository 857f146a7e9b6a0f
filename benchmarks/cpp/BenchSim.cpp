// The simulator for the benchmarks: loaded once through the process context's MsptiLibrary, the
// way a session loads MSPTI, and its msptiSim* control API resolved from that very copy.
#include <stdexcept>
#include <string>

#include "BenchCommon.h"

namespace bench {

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
    return mspti_sim::resolveSimControl(MSPTI_SIM_PATH);
  }();
  return sim;
}

}  // namespace bench
