// One kineto profiling session backed by MSPTI: lifecycle only. The work is done by the parts it
// is built from (SessionDeps: the test seam; PluginContext builds the real ones):
//   arm:     MsptiLibrary (function table) -> MsptiActivityApi (subscribe, callbacks, enable)
//            -> MsptiBufferPool (buffers) -> RecordStore (records + CorrelationLedger);
//            CorrelationForwarder (op ids: MSPTI hint + per-thread op log)
//   stop:    device synchronisation -> DrainPolicy -> HostClock -> LaunchTable (window, drops,
//            repairs) -> health report (getMetadata)
//   process: OpTimeline (op log + getLinkedActivity) -> LinkResolver -> ActivityBuilder
//            -> DeviceLanes, getTraceBuffer
//
// kineto calls, in order (kineto.md 1.3): constructor (configure) -> push/pop on op threads ->
// start() -> ... -> stop() -> getDeviceProperties()/getMetadata() -> processTrace() ->
// getDeviceInfo()/getResourceInfos()/getTraceBuffer() -> destructor (before torch reads the trace).
// The session takes MSPTI's only subscriber when it is constructed, i.e. when kineto configures
// it: kineto configures every child profiler before it starts any (GenericActivityProfiler::
// configure -> configureChildProfilers, kineto ce13b132), so a peer backend that subscribes in
// its start() (torch_npu's built-in one) cannot take the subscriber first, whatever the order of
// the child profilers.
// Every override catches everything: nothing is thrown into kineto or torch; failures go to
// errors() and to the session report (diagnostics, trace metadata).
// Thread-safety: push/pop run on op threads concurrently with everything else (lock-free); all
// other methods run on the profiler's thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <IActivityProfiler.h>
#include <libkineto.h>

#include "CollectiveJoin.h"
#include "Communicators.h"
#include "Config.h"
#include "CorrelationForwarder.h"
#include "CorrelationIds.h"
#include "DeviceLanes.h"
#include "HostClock.h"
#include "LaunchTable.h"
#include "MarkerTable.h"
#include "MemoryEvents.h"
#include "MsptiBufferPool.h"
#include "MsptiLibrary.h"
#include "PeerBackends.h"
#include "RecordStore.h"
#include "SessionFindings.h"
#include "SessionStats.h"
#include "SubscriptionRelease.h"
#include "TorchCompat.h"

namespace torch_mspti {

// What a session is built from. PluginContext::sessionDeps() gives the process's real parts;
// tests give fakes (a fake MSPTI function table, their own pool, forwarder, stats...).
struct SessionDeps {
  ConfigSnapshot config;
  // Loads MSPTI if needed; returns its function table, or nullptr (then `libraryReport` says why).
  std::function<const MsptiFunctions*(const ConfigSnapshot&)> loadLibrary;
  std::function<LibraryReport()> libraryReport;
  MsptiBufferPool* pool = nullptr;
  CorrelationForwarder* forwarder = nullptr;
  StatsRegistry* stats = nullptr;
  CorrelationIds* ids = nullptr;
  // Unsubscribes a stopped session's subscriber off stop() and holds the next Subscribe until it is
  // done (SubscriptionRelease.h); null: the session unsubscribes itself, at once (tests).
  SubscriptionRelease* release = nullptr;
  // Highest MSPTI correlation id seen by finished sessions (records at or below belong to them).
  std::atomic<uint64_t>* staleBelow = nullptr;
  // Waits until the given PrivateUse1 devices (logical indices; the ones the session saw records
  // from, possibly none) and any others the backend has already initialised are idle (may be empty).
  // Returns true when every device that may hold the session's work is idle now.
  std::function<bool(const std::vector<int32_t>&)> synchronizeDevices;
  // JSON objects (comma-joined) describing the logical devices given, for "deviceProperties"
  // (may be empty).
  std::function<std::string(const std::vector<int32_t>&)> deviceProperties;
  // This process's HCCL communicators and their process groups (Communicators.h), asked at start
  // and at stop on the thread that starts or stops the session (may be empty).
  CommunicatorsProvider communicators;
  // Shows one warning to the user (TORCH_WARN in production; may be empty).
  std::function<void(const std::string&)> warn;
  // Process id of the host lanes (libkineto::processId() in production).
  int32_t processId = 0;
  // Set to 1 when this session collected its trace's device data, 0 when it could not (may be null).
  std::atomic<int>* collectedFlag = nullptr;
  // Another MSPTI consumer kineto drives beside us (torch_npu's built-in backend), if loaded.
  PeerBackend peer;
};

class MsptiActivityProfilerSession : public libkineto::IActivityProfilerSession {
 public:
  MsptiActivityProfilerSession(SessionDeps deps, std::set<libkineto::ActivityType> types);
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
  std::string getDeviceProperties() override;
  // The health report as kineto's trace metadata ({"torch_mspti": json}); final from here on.
  // An override where kineto has IActivityProfilerSession::getMetadata (TorchCompat.h); on older
  // kineto getDeviceProperties() hands the same report to kineto instead.
  std::unordered_map<std::string, std::string> getMetadata() TORCH_MSPTI_SESSION_METADATA_OVERRIDE;

  // Hot path: every op, on the op's thread. The first op after start() also takes MSPTI's buffer
  // callbacks back: a peer that kineto started after us registered its own (PeerBackends.h). One
  // relaxed load otherwise.
  void pushCorrelationId(uint64_t id) override {
    if (reclaimCallbacks_.load(std::memory_order_relaxed)) reclaimCallbacks();
    forwarder_->push(CorrelationForwarder::kOps, id);
  }
  void popCorrelationId() override { forwarder_->pop(CorrelationForwarder::kOps); }
  void pushUserCorrelationId(uint64_t id) override { forwarder_->push(CorrelationForwarder::kUser, id); }
  void popUserCorrelationId() override { forwarder_->pop(CorrelationForwarder::kUser); }

  // The session's report as it stands (tests; diagnostics get it through StatsRegistry).
  SessionReport report() const;
  // The health report kineto puts into the trace (the "torch_mspti" metadata value).
  std::string healthJson() const;

 private:
  // The loaded library's path ("" when none is reported), and whether LD_PRELOAD names it.
  std::string libraryPath() const;
  bool libraryIsPreloaded() const;
  // The library to name in an LD_PRELOAD fix: the loaded one, else CANN's usual place.
  std::string preloadHint() const;
  bool subscribe();                  // constructor's body
  void releaseSubscriber();          // hands the subscriber to SubscriptionRelease (or unsubscribes)
  void reclaimCallbacks() noexcept;  // registers our buffer callbacks again (once per request)
  bool arm();                        // start()'s body; false when collection could not start
  // stop()'s body and its stages, in the order collect() runs them.
  void collect();
  struct DeviceSync {
    bool idle = false;  // every device that may hold the session's work is idle
    double ms = 0;      // time spent waiting
  };
  bool stopInForkedChild();             // true: stopped without calling MSPTI (a forked child)
  void retakeFromPeer();                // a peer backend's stop() disabled our kinds: enable them again
  DeviceSync synchronizeDevicesSeen();  // synchronize_devices: wait for the devices first
  void disarmForwarder();               // no op pushes ids from here; the op log is taken
  void applyMarkerDomains();
  void restoreMarkerDomains();
  int64_t drainLibrary(const DeviceSync& sync);  // DrainPolicy; returns when MSPTI was disabled (ns)
  void takeCounters();                           // this session's share of the pool's and forwarder's counters
  HostClock decideHostClock() const;
  void buildLaunches(int64_t disabledAt);  // HostClock, LaunchTable; the stale watermark moves up
  // What the findings table reads (SessionFindings.h), from the stages above; and the warnings it
  // gives, decided at stop so that the health report kineto embeds before processTrace has them.
  SessionFacts facts() const;
  void reportFindings();
  // Ends the report: state processed (unless failed), status READY. Called by getMetadata, which
  // kineto calls before processTrace and whose report the trace keeps as read.
  void finish();
  void process(libkineto::ActivityLogger& logger, const libkineto::getLinkedActivityCallback* linked);
  bool enable(msptiActivityKind kind, bool report);
  void fail(const std::string& message, const std::string& cause);
  void warnOnce(const std::string& key, const std::string& message, bool print = true);
  void publish(bool final);

  SessionDeps deps_;
  const std::set<libkineto::ActivityType> types_;
  CorrelationForwarder* const forwarder_;
  const MsptiFunctions* fns_ = nullptr;
  SessionState state_ = SessionState::kConfigured;
  std::vector<std::string> errors_;
  std::vector<std::pair<std::string, std::string>> findings_;  // (name, message) of each finding given
  std::string failureCause_;               // why the session could not collect ("" when it did not fail)
  bool kernelsNotEnabled_ = false;         // msptiActivityEnable(KERNEL) failed at start
  std::string copiesNote_;                 // why MEMCPY/MEMSET cannot deliver ("" when they can)
  bool predates26_ = false;                // Enable(RUNTIME_API) said the kind is unknown: a library before 26.0
  std::string lastEnableNote_;             // the note of the latest enable() ("" when fine)
  std::vector<std::string> notCollected_;  // SessionReport::notCollected
  MarkerDomainsOutcome markerDomains_;     // how the marker_domains setting was applied
  std::vector<std::string> domainsOff_;    // domains this session disabled (enabled again at stop)
  bool subscribed_ = false;
  bool armed_ = false;
  bool metadataHandedOver_ = false;  // the report went to kineto through addTraceMetadata (older kineto)
  bool published_ = false;
  std::atomic<bool> reclaimCallbacks_{false};
  msptiSubscriberHandle subscriber_ = nullptr;
  std::vector<msptiActivityKind> enabledKinds_;
  std::shared_ptr<RecordStore> store_;
  PoolCounters poolAtStart_;
  SessionCounters forwarderAtStart_;
  uint32_t generation_ = 0;
  uint64_t highestId_ = 0;  // the session's highest correlation id (CorrelationLedger watermark)
  std::vector<ThreadOps> opLog_;
  SessionCounters counters_;
  std::optional<DrainStats> drain_;
  double stopMs_ = -1;          // wall time of stop(), ms (SessionReport::stopMs)
  double processTraceMs_ = -1;  // of processTrace
  double releaseWaitMs_ = 0;    // waited at configure for an earlier session's Unsubscribe
  ClockSample clockAtStart_;
  std::optional<HostClock> hostClock_;
  int64_t startNs_ = 0, stopNs_ = 0;
  // kineto's capture window end (processTrace's endTime; 0 when kineto gave none): the session's
  // Trace span ends no later, as kineto's "Record Window End" closes every span of the trace.
  int64_t windowEndNs_ = 0;
  // The thread that started the session (torch.profiler's): torch records it whatever the settings.
  uint32_t startThread_ = 0;
  LaunchTable launches_;
  MemoryTimeline memory_;
  MarkerTable markers_;
  CommunicatorMap communicatorsAtStart_;  // the provider's answer at start
  bool communicatorsSampled_ = false;     // whether a provider was asked at start
  CollectiveTable collectives_;
  DeviceLanes lanes_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
};

}  // namespace torch_mspti
