#include "CoreSimSupport.h"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace torch_mspti::test {
namespace {

template <typename Fn>
void resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!out) throw std::runtime_error(std::string("simulator does not export ") + name);
}

std::mutex gWarningsMutex;
std::vector<std::string> gWarnings;

}  // namespace

PluginContext& simContext() { return PluginContext::process(); }

const MsptiFunctions* loadSimulator() {
  PluginContext& ctx = simContext();
  if (!ctx.library.loaded()) {
    EXPECT_EQ(ctx.config.setText("library_path", MSPTI_SIM_PATH), "");
    if (!ctx.loadLibrary(ctx.config.snapshot())) {
      ADD_FAILURE() << "cannot load the simulator: " << ctx.library.report().reason;
      return nullptr;
    }
    sessionTable() = ctx.library.functions();
  }
  EXPECT_EQ(ctx.library.loadedPath(), MSPTI_SIM_PATH);
  return &ctx.library.functions();
}

MsptiFunctions& sessionTable() {
  static MsptiFunctions table;
  return table;
}

const SimControl& simControl() {
  static const SimControl control = [] {
    if (!loadSimulator()) throw std::runtime_error("simulator not loaded");
    // RTLD_NOLOAD: the very copy MsptiLibrary loaded, never a second one.
    void* h = dlopen(MSPTI_SIM_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (!h) throw std::runtime_error("simulator not loaded by MsptiLibrary");
    SimControl c;
    resolve(h, "msptiSimLaunchKernel", c.launchKernel);
    resolve(h, "msptiSimLaunchKernels", c.launchKernels);
    resolve(h, "msptiSimSynchronize", c.synchronize);
    resolve(h, "msptiSimSetOption", c.setOption);
    resolve(h, "msptiSimGetStats", c.getStats);
    resolve(h, "msptiSimResetOptions", c.resetOptions);
    return c;
  }();
  return control;
}

SessionDeps simSessionDeps(const ConfigSnapshot& config) {
  PluginContext& ctx = simContext();
  SessionDeps d = ctx.sessionDeps();
  d.config = config;
  d.loadLibrary = [&ctx](const ConfigSnapshot& c) -> const MsptiFunctions* {
    return ctx.loadLibrary(c) ? &sessionTable() : nullptr;
  };
  d.warn = [](const std::string& message) {
    std::lock_guard<std::mutex> lock(gWarningsMutex);
    gWarnings.push_back(message);
  };
  return d;
}

std::vector<std::string> simWarnings() {
  std::lock_guard<std::mutex> lock(gWarningsMutex);
  return gWarnings;
}

void drainExternalStacks() {
  const MsptiFunctions* f = loadSimulator();
  if (!f) return;
  for (auto kind : {MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1,
                    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2}) {
    uint64_t id = 0;
    while (f->popExternalCorrelationId(kind, &id) == MSPTI_SUCCESS) {}
  }
}

}  // namespace torch_mspti::test
