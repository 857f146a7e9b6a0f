#include "SessionHarness.h"

#include <unistd.h>

namespace torch_mspti::test {

CorrelationForwarder& sharedForwarder() {
  static CorrelationForwarder* forwarder = new CorrelationForwarder();  // outlives every thread's use
  return *forwarder;
}

bool anyContains(const std::vector<std::string>& list, const std::string& part) {
  for (const auto& s : list)
    if (s.find(part) != std::string::npos) return true;
  return false;
}

SessionHarness::SessionHarness(FakeMspti* fake) : fake_(fake) {
  config = Config::defaults();
  config.bufferSizeBytes = 64 << 10;
  config.drainPollIntervalMs = 1;
  config.drainTimeoutMs = 200;
  if (fake_) table_ = fake_->functions();
}

SessionDeps SessionHarness::deps() {
  SessionDeps d;
  d.config = config;
  d.loadLibrary = [this](const ConfigSnapshot&) -> const MsptiFunctions* { return fake_ ? &table_ : nullptr; };
  d.libraryReport = [this] {
    LibraryReport r;
    r.attempted = true;
    r.available = fake_ != nullptr;
    if (fake_) {
      r.path = "/fake/libmspti.so";
      r.foundBy = "explicit";
      r.version = "fake";
    } else {
      r.reason = "libmspti.so not found";
      r.fix = "set TORCH_MSPTI_LIBRARY";
    }
    return r;
  };
  d.pool = &pool;
  d.forwarder = &sharedForwarder();
  d.stats = &stats;
  d.ids = &ids;
  d.staleBelow = &staleBelow;
  d.synchronizeDevices = [this](const std::vector<int32_t>& devices) {
    std::lock_guard<std::mutex> lock(mutex_);
    synchronized_.push_back(devices);
    return true;
  };
  d.warn = [this](const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    warnings_.push_back(message);
  };
  d.processId = static_cast<int32_t>(getpid());
  d.collectedFlag = &collected;
  return d;
}

std::unique_ptr<MsptiActivityProfilerSession> SessionHarness::session(std::set<libkineto::ActivityType> types) {
  return std::make_unique<MsptiActivityProfilerSession>(deps(), std::move(types));
}

std::vector<std::string> SessionHarness::warnings() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return warnings_;
}

bool SessionHarness::warned(const std::string& part) const { return anyContains(warnings(), part); }

std::vector<std::vector<int32_t>> SessionHarness::synchronized() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return synchronized_;
}

}  // namespace torch_mspti::test
