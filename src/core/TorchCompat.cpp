#include "TorchCompat.h"

#include <libkineto.h>

#if TORCH_MSPTI_HAS_PRIVATEUSE1_PROFILER_REGISTRY
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#endif

namespace torch_mspti::compat {

bool privateUse1RegistryHasFactory() {
#if TORCH_MSPTI_HAS_PRIVATEUSE1_PROFILER_REGISTRY
  return torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().hasFactory();
#else
  return false;
#endif
}

bool takePrivateUse1RegistrySlot(std::function<std::unique_ptr<libkineto::IActivityProfiler>()> factory) {
#if TORCH_MSPTI_HAS_PRIVATEUSE1_PROFILER_REGISTRY
  torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(std::move(factory));
  return true;
#else
  (void)factory;
  return false;
#endif
}

void addTraceMetadata(const std::string& key, const std::string& value) {
  if (libkineto::api().isProfilerInitialized()) libkineto::api().activityProfiler().addMetadata(key, value);
}

}  // namespace torch_mspti::compat
