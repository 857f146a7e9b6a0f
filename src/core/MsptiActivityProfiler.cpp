#include "MsptiActivityProfiler.h"

#include <chrono>

#include "Registration.h"

namespace torch_mspti {

using libkineto::ActivityType;

MsptiActivityProfiler::MsptiActivityProfiler(PluginContext& context)
    : context_(context),
      available_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
                 ActivityType::GPU_USER_ANNOTATION, ActivityType::PRIVATEUSE1_RUNTIME} {
  context_.status.factoryCalled = true;
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
    PluginStatus& s = context_.status;
    s.configureCalls.fetch_add(1);
    s.lastConfigureNs =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    // With the PrivateUse1 backend unnamed, torch drops ProfilerActivity.PrivateUse1 before kineto
    // sees it (kineto.md 1.1): every trace then looks CPU-only here, so the reason is only kept for
    // diagnostics(). The user is warned in Python, where the activities asked for are known and a
    // CPU-only profile can be told apart (torch_mspti/_profile_request.py).
    const bool unnamed = privateUse1BackendName() == "privateuseone";
    s.lastTraceUnnamedBackend.store(unnamed);
    if (!wantsDevice(types)) return nullptr;  // CPU-only trace: no MSPTI call, no device event
    s.deviceSessions.fetch_add(1);
    return std::make_unique<MsptiActivityProfilerSession>(context_.sessionDeps(), types);
  } catch (...) {
    return nullptr;
  }
}

std::unique_ptr<libkineto::IActivityProfilerSession> MsptiActivityProfiler::configure(
    int64_t /*tsMs*/, int64_t /*durationMs*/, const std::set<ActivityType>& types, const libkineto::Config& config) {
  return configure(types, config);
}

}  // namespace torch_mspti
