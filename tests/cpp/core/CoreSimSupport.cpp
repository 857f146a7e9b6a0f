#include "CoreSimSupport.h"

#include <dlfcn.h>

#include <stdexcept>
#include <string>

#include "Config.h"

namespace torch_mspti::test {
namespace {

template <typename Fn>
void resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (!out) throw std::runtime_error(std::string("simulator does not export ") + name);
}

}  // namespace

const MsptiFunctions* loadSimulator() {
  MsptiLibrary& lib = MsptiLibrary::instance();
  if (!lib.loaded()) {
    const std::string err = Config::instance().setString("library_path", MSPTI_SIM_PATH);
    EXPECT_EQ(err, "");
    if (!lib.ensureLoaded()) {
      ADD_FAILURE() << "cannot load the simulator: " << lib.report().reason;
      return nullptr;
    }
  }
  EXPECT_EQ(lib.loadedPath(), MSPTI_SIM_PATH);
  return &lib.functions();
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
