#include "MsptiActivityProfiler.h"

#include <chrono>

#include "Config.h"
#include "MsptiActivityProfilerSession.h"

namespace torch_mspti {

using libkineto::ActivityType;

PluginStatus& PluginStatus::instance() {
  static PluginStatus* s = new PluginStatus();
  return *s;
}

MsptiActivityProfiler::MsptiActivityProfiler()
    : available_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
                 ActivityType::GPU_USER_ANNOTATION, ActivityType::PRIVATEUSE1_RUNTIME} {
  PluginStatus::instance().factoryCalled = true;
}

bool MsptiActivityProfiler::wantsDevice(const std::set<ActivityType>& types) {
  for (auto t : {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
                 ActivityType::GPU_USER_ANNOTATION})
    if (types.count(t)) return true;
  return false;
}

std::unique_ptr<libkineto::IActivityProfilerSession> MsptiActivityProfiler::configure(
    const std::set<ActivityType>& types, const libkineto::Config& /*config*/) {
  try {
    PluginStatus& s = PluginStatus::instance();
    s.configureCalls.fetch_add(1);
    s.lastConfigureNs =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    if (!wantsDevice(types)) return nullptr;  // CPU-only trace: no MSPTI call, no device event
    s.deviceSessions.fetch_add(1);
    return std::make_unique<MsptiActivityProfilerSession>(Config::instance().snapshot(), types);
  } catch (...) {
    return nullptr;
  }
}

std::unique_ptr<libkineto::IActivityProfilerSession> MsptiActivityProfiler::configure(
    int64_t /*tsMs*/, int64_t /*durationMs*/, const std::set<ActivityType>& types, const libkineto::Config& config) {
  return configure(types, config);
}

}  // namespace torch_mspti
