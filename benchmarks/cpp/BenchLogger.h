// An ActivityLogger that keeps activity pointers the way kineto's MemoryTraceLogger does (one
// vector push per activity) and counts them by type; everything else is ignored.
#pragma once

#include <vector>

#include <output_base.h>

#include <torch_mspti_torch_features.h>  // the kineto logger's signatures for this torch (TorchCompat.h)

// kineto does not ship ActivityBuffers' definition; finalizeTrace() below must still destroy its
// by-value unique_ptr argument, so it gets an empty stand-in here. It is never called.
// (output_base.h declares it in a namespace literally named KINETO_NAMESPACE.)
namespace KINETO_NAMESPACE {
struct ActivityBuffers {};
}  // namespace KINETO_NAMESPACE

namespace bench {

class CollectingLogger : public libkineto::ActivityLogger {
 public:
  void handleDeviceInfo(const libkineto::DeviceInfo&, TORCH_MSPTI_KINETO_DEVICE_INFO_TIME) override {}
  void handleResourceInfo(const libkineto::ResourceInfo&, int64_t) override {}
  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  void handleActivity(const libkineto::ITraceActivity& a) override {
    activities.push_back(&a);
    if (a.type() == libkineto::ActivityType::CONCURRENT_KERNEL) ++kernels;
  }
  void handleGenericActivity(const libkineto::GenericTraceActivity& a) override { handleActivity(a); }
  void handleTraceStart(const std::unordered_map<std::string, std::string>&, const std::string&) override {}
#if TORCH_MSPTI_KINETO_LOGGER_MEMORY_TRACE
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
#endif
  void finalizeTrace(const libkineto::Config&, std::unique_ptr<KINETO_NAMESPACE::ActivityBuffers>, int64_t,
                     std::unordered_map<std::string, std::vector<std::string>>&) override {}

  std::vector<const libkineto::ITraceActivity*> activities;
  uint64_t kernels = 0;
};

}  // namespace bench
