// Builds MsptiActivityProfilerSession from SessionDeps the way PluginContext does, but from test
// parts: a FakeMspti function table (or none: "MSPTI unavailable"), the test's own buffer pool,
// stats registry, id counter and stale-id watermark, and sinks that record the warnings shown
// and the devices synchronised. The forwarder is the process's one (sharedForwarder(): its
// per-thread state is thread_local, CorrelationForwarder.h).
// Thread-safety: like the session (push/pop from any thread, the rest from the test's thread).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "Config.h"
#include "CorrelationForwarder.h"
#include "CorrelationIds.h"
#include "FakeMspti.h"
#include "MsptiActivityProfilerSession.h"
#include "MsptiBufferPool.h"
#include "SessionStats.h"

namespace torch_mspti::test {

// The one forwarder of the test process (never destroyed).
CorrelationForwarder& sharedForwarder();

class SessionHarness {
 public:
  // `fake` null: loadLibrary answers "no library" with a reason and a fix.
  explicit SessionHarness(FakeMspti* fake);

  // Settings for the next session: defaults, with 64 KiB buffers, a 1 ms poll interval and a
  // 200 ms drain bound (tests never wait the production second).
  ConfigSnapshot config;
  SessionDeps deps();
  std::unique_ptr<MsptiActivityProfilerSession> session(std::set<libkineto::ActivityType> types = {
                                                            libkineto::ActivityType::CONCURRENT_KERNEL,
                                                            libkineto::ActivityType::PRIVATEUSE1_RUNTIME});

  std::vector<std::string> warnings() const;
  // True when some warning contains `part`.
  bool warned(const std::string& part) const;
  std::vector<std::vector<int32_t>> synchronized() const;

  MsptiBufferPool pool;
  StatsRegistry stats;
  CorrelationIds ids;
  std::atomic<uint64_t> staleBelow{0};
  std::atomic<int> collected{-1};

 private:
  FakeMspti* fake_;
  MsptiFunctions table_;
  mutable std::mutex mutex_;
  std::vector<std::string> warnings_;
  std::vector<std::vector<int32_t>> synchronized_;
};

// True when some string of `list` contains `part`.
bool anyContains(const std::vector<std::string>& list, const std::string& part);

}  // namespace torch_mspti::test
