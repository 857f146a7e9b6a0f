// One kineto profiling session backed by MSPTI: lifecycle only; the work is delegated to
// MsptiLibrary (loading), MsptiBufferPool (buffers), CorrelationForwarder (op ids),
// DrainPolicy (stop) and ActivityBuilder (processTrace).
//
// kineto calls, in order (kineto.md 1.3): constructor (configure) -> push/pop on op threads ->
// start() -> ... -> stop() -> getMetadata() -> processTrace() -> getDeviceInfo() /
// getResourceInfos() / getTraceBuffer() -> destructor (before torch reads the trace).
// Every override catches everything: nothing is thrown into kineto or torch; failures go to
// errors() and to the session report (diagnostics, trace metadata).
// Thread-safety: push/pop run on op threads concurrently with everything else (lock-free); all
// other methods run on the profiler's thread.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <IActivityProfiler.h>
#include <libkineto.h>

#include "Config.h"
#include "CorrelationForwarder.h"
#include "DeviceLanes.h"
#include "MsptiBufferPool.h"
#include "RecordStore.h"
#include "SessionStats.h"

namespace torch_mspti {

class MsptiActivityProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  MsptiActivityProfilerSession(ConfigSnapshot config, std::set<libkineto::ActivityType> types);
  ~MsptiActivityProfilerSession() override;
  MsptiActivityProfilerSession(const MsptiActivityProfilerSession&) = delete;
  MsptiActivityProfilerSession& operator=(const MsptiActivityProfilerSession&) = delete;

  void start() override;
  void stop() override;
  std::vector<std::string> errors() override;
  void processTrace(libkineto::ActivityLogger& logger) override;
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback getLinkedActivity,
                    int64_t startTime, int64_t endTime) override;
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override;
  std::vector<libkineto::ResourceInfo> getResourceInfos() override;
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override;
  std::unordered_map<std::string, std::string> getMetadata() override;

  // Hot path: every op, on the op's thread.
  void pushCorrelationId(uint64_t id) override { forwarder_.push(CorrelationForwarder::kOps, id); }
  void popCorrelationId() override { forwarder_.pop(CorrelationForwarder::kOps); }
  void pushUserCorrelationId(uint64_t id) override { forwarder_.push(CorrelationForwarder::kUser, id); }
  void popUserCorrelationId() override { forwarder_.pop(CorrelationForwarder::kUser); }

 private:
  bool arm();      // start()'s body; false when collection could not start
  void collect();  // stop()'s body
  void process(libkineto::ActivityLogger& logger, const libkineto::getLinkedActivityCallback* linked, int64_t startTime,
               int64_t endTime);
  void fail(const std::string& message, const std::string& cause);
  void warnOnce(const std::string& cause);
  void publish(bool final);
  std::string healthJson() const;

  const ConfigSnapshot config_;
  const std::set<libkineto::ActivityType> types_;
  CorrelationForwarder& forwarder_;
  std::string state_ = "configured";
  std::vector<std::string> errors_;
  bool warned_ = false;
  bool armed_ = false;
  bool published_ = false;
  msptiSubscriberHandle subscriber_ = nullptr;
  std::vector<msptiActivityKind> enabledKinds_;
  std::shared_ptr<RecordStore> store_;
  PoolCounters poolAtStart_;
  uint64_t forwarderErrorsAtStart_ = 0, forwarderOverflowsAtStart_ = 0, forwarderInterleavedAtStart_ = 0;
  // Interval mode (library without external correlation): the forwarder's generation, and the
  // op intervals taken from it at stop (CorrelationForwarder.h).
  uint32_t intervalGen_ = 0;
  std::vector<OpInterval> intervals_;
  SessionCounters counters_;
  std::optional<DrainStats> drain_;
  int64_t startNs_ = 0, stopNs_ = 0;
  DeviceLanes lanes_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

}  // namespace torch_mspti
