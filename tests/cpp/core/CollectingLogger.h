// A kineto ActivityLogger that keeps a summary of every activity processTrace hands it (type,
// name, times, lane, the op it is linked to, its "link" argument), for tests to assert on.
// Thread-safety: none (processTrace runs on one thread).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <GenericTraceActivity.h>
#include <output_base.h>

#include <torch_mspti_torch_features.h>  // the kineto logger's signatures for this torch (TorchCompat.h)

namespace torch_mspti::test {

struct LoggedActivity {
  libkineto::ActivityType type = libkineto::ActivityType::CPU_OP;
  std::string name;
  int64_t start = 0, end = 0;
  int64_t device = 0, resource = 0;
  int64_t correlation = 0;
  int64_t linkedOp = -1;  // correlation id of the linked op (-1: none)
  int flowType = 0;
  int64_t flowId = 0;
  bool flowStart = false;
  std::string link;  // the "link" argument without quotes ("" when absent)
  std::string metadata;
};

class CollectingLogger : public libkineto::ActivityLogger {
 public:
  void handleDeviceInfo(const libkineto::DeviceInfo& info, TORCH_MSPTI_KINETO_DEVICE_INFO_TIME) override {
    devices.push_back(info.id);
  }
  void handleResourceInfo(const libkineto::ResourceInfo&, int64_t) override {}
  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  void handleActivity(const libkineto::ITraceActivity& a) override {
    LoggedActivity l;
    l.type = a.type();
    l.name = a.name();
    l.start = a.timestamp();
    l.end = a.timestamp() + a.duration();
    l.device = a.deviceId();
    l.resource = a.resourceId();
    l.correlation = a.correlationId();
    l.linkedOp = a.linkedActivity() ? a.linkedActivity()->correlationId() : -1;
    l.flowType = a.flowType();
    l.flowId = a.flowId();
    l.flowStart = a.flowStart();
    l.link = a.getMetadataValue("link");
    if (l.link.size() >= 2 && l.link.front() == '"') l.link = l.link.substr(1, l.link.size() - 2);
    l.metadata = a.metadataJson();
    activities.push_back(std::move(l));
  }
  void handleGenericActivity(const libkineto::GenericTraceActivity& a) override { handleActivity(a); }
  void handleTraceStart(const std::unordered_map<std::string, std::string>&, const std::string&) override {}
#if TORCH_MSPTI_KINETO_LOGGER_MEMORY_TRACE
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
#endif
  void finalizeTrace(const libkineto::Config&, std::unique_ptr<libkineto::ActivityBuffers>, int64_t,
                     std::unordered_map<std::string, std::vector<std::string>>&) override {}

  std::vector<const LoggedActivity*> of(libkineto::ActivityType type) const {
    std::vector<const LoggedActivity*> out;
    for (const auto& a : activities)
      if (a.type == type) out.push_back(&a);
    return out;
  }
  std::vector<const LoggedActivity*> kernels() const { return of(libkineto::ActivityType::CONCURRENT_KERNEL); }
  std::vector<const LoggedActivity*> launches() const { return of(libkineto::ActivityType::PRIVATEUSE1_RUNTIME); }

  std::vector<LoggedActivity> activities;
  std::vector<int64_t> devices;
};

}  // namespace torch_mspti::test
