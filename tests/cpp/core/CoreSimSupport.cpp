#include "CoreSimSupport.h"

#include <mutex>
#include <stdexcept>
#include <string>

namespace torch_mspti::test {
namespace {

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
    return mspti_sim::resolveSimControl(MSPTI_SIM_PATH);
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
