#include "MsptiActivityProfilerSession.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <unordered_set>

#include <fmt/format.h>
#include <output_base.h>

#include "ActivityBuilder.h"
#include "ActivityKinds.h"
#include "DrainPolicy.h"
#include "ExitGuard.h"
#include "ForkGuard.h"
#include "JsonWriter.h"
#include "KindHandlers.h"
#include "MarkerActivities.h"
#include "MemoryEvents.h"
#include "MsptiActivityApi.h"
#include "OpTimeline.h"

namespace torch_mspti {
namespace {

using libkineto::ActivityType;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename Fn>
void guard(std::vector<std::string>& errors, const char* where, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    try {
      errors.push_back(fmt::format("{}: {}", where, e.what()));
    } catch (...) {}
  } catch (...) {
    try {
      errors.push_back(fmt::format("{}: unknown exception", where));
    } catch (...) {}
  }
}

// Whether torch asked for what a kind becomes: the kineto activity type of its device rows; for
// memory records, device activity at all (the PrivateUse1 activities enable CONCURRENT_KERNEL).
bool requested(const std::set<ActivityType>& types, const KindHandler& k) {
  if (k.keptAs == KeptAs::kMemoryEvent) return types.count(ActivityType::CONCURRENT_KERNEL) > 0;
  switch (k.row) {
    case TraceRow::kKernel: return types.count(ActivityType::CONCURRENT_KERNEL) > 0;
    case TraceRow::kMemcpy: return types.count(ActivityType::GPU_MEMCPY) > 0;
    case TraceRow::kMemset: return types.count(ActivityType::GPU_MEMSET) > 0;
    case TraceRow::kNone: return false;
  }
  return false;
}

uint32_t waitBit(LaunchClass c) { return 1u << static_cast<int>(c); }

// The launch classes whose answers a collected kind brings: the drain waits for them and the cap
// holds room for them (DrainPolicy.h, CapRoom.h). KERNEL also answers the launches known only from
// an external record (their call unseen or unrecognised).
uint32_t waitBitsOf(msptiActivityKind kind) {
  uint32_t bits = 0;
  const LaunchClass c = kindHandler(kind).answers;
  if (c != LaunchClass::kNone) bits |= waitBit(c);
  if (kind == MSPTI_ACTIVITY_KIND_KERNEL) bits |= waitBit(LaunchClass::kNone);
  return bits;
}

}  // namespace

MsptiActivityProfilerSession::MsptiActivityProfilerSession(SessionDeps deps, std::set<ActivityType> types)
    : deps_(std::move(deps)), types_(std::move(types)), forwarder_(deps_.forwarder) {
  if (deps_.collectedFlag) deps_.collectedFlag->store(0);
  buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  buffer_->gpuOpCount = 0;
  guard(errors_, "configure", [&] { subscribe(); });
}

MsptiActivityProfilerSession::~MsptiActivityProfilerSession() {
  if (processExiting()) {
    // MSPTI and torch may already be torn down: no call into either (ExitGuard.h).
    if (armed_) forwarder_->abandon();
    return;
  }
  guard(errors_, "teardown", [&] {
    if (armed_) collect();
    if (subscribed_) releaseSubscriber();
    if (!published_) publish(true);
  });
}

void MsptiActivityProfilerSession::warnOnce(const std::string& key, const std::string& message, bool print) {
  for (const auto& given : findings_)
    if (given.first == key) return;
  findings_.emplace_back(key, message);
  if (!print) return;
  try {
    // Point at what can answer: this process's diagnostics, or the health report in the trace.
    if (deps_.warn)
      deps_.warn(message +
                 ". Details: torch_mspti.diagnostics() in this process, or `torch-mspti doctor TRACE.json` for the "
                 "saved trace");
  } catch (...) {}
}

void MsptiActivityProfilerSession::fail(const std::string& message, const std::string& cause) {
  errors_.push_back(message);
  state_ = SessionState::kFailed;
  status_ = libkineto::TraceStatus::ERROR;
  failureCause_ = cause;
  // Only what the message needs: no library call (fail() also runs in a forked child, where a
  // lock taken at the fork may never be released).
  SessionFacts f;
  f.failureCause = cause;
  f.peerPresent = deps_.peer.present;
  f.peerDescription = deps_.peer.description;
  // In a forked child every failure has the fork as its cause: the child hears it once.
  warnOnce("failed", findingMessage("failed", f), !forkedFromMsptiParent() || claimForkedChildWarning());
}

bool MsptiActivityProfilerSession::subscribe() {
  fns_ = deps_.loadLibrary ? deps_.loadLibrary(deps_.config) : nullptr;
  if (!fns_) {
    const LibraryReport r = deps_.libraryReport ? deps_.libraryReport() : LibraryReport{};
    fail(fmt::format("MSPTI unavailable: {} ({})", r.reason, r.fix), r.reason.empty() ? "no MSPTI library" : r.reason);
    return false;
  }
  // An earlier session's Unsubscribe may still be running; MSPTI refuses a second subscriber.
  if (deps_.release) {
    releaseWaitMs_ = deps_.release->waitIdle();
    const std::string failed = deps_.release->takeError();
    if (!failed.empty()) errors_.push_back("the previous session's release of the subscriber failed: " + failed);
  }
  const msptiResult r = MsptiActivityApi(*fns_).subscribe(&subscriber_);
  if (r != MSPTI_SUCCESS) {
    const std::string call = describeCall("msptiSubscribe", "NULL, NULL", r);
    if (r == MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      fail(call + ": another tool (msprof, msmonitor, a profiler started earlier) holds the MSPTI subscriber",
           "the MSPTI subscriber is held by another profiling tool");
    else fail(call, "msptiSubscribe failed");
    return false;
  }
  subscribed_ = true;
  return true;
}

void MsptiActivityProfilerSession::releaseSubscriber() {
  subscribed_ = false;
  if (deps_.release && !deps_.config.unsubscribeAtStop) {
    deps_.release->begin(fns_, subscriber_);
    return;
  }
  MsptiActivityApi api(*fns_);
  const msptiResult r = api.unsubscribe(subscriber_);
  if (r != MSPTI_SUCCESS) errors_.push_back(describeCall("msptiUnsubscribe", "subscriber", r));
  api.flushAll();
}

bool MsptiActivityProfilerSession::enable(msptiActivityKind kind, bool report) {
  const msptiResult res = MsptiActivityApi(*fns_).enable(kind);
  std::string note;
  const bool copies = kind == MSPTI_ACTIVITY_KIND_MEMCPY || kind == MSPTI_ACTIVITY_KIND_MEMSET;
  // Copies, memsets and memory records come from the interposed ACL calls, there only with the
  // preload (mspti.md 5.5); libraries before 26.0 accept Enable anyway.
  const bool aclHooks = copies || kind == MSPTI_ACTIVITY_KIND_MEMORY;
  if (res == MSPTI_ERROR_WITHOUT_LD_PRELOAD || (res == MSPTI_SUCCESS && aclHooks && !libraryIsPreloaded()))
    note = fmt::format(
        "{} records need libmspti.so in LD_PRELOAD from process start (MSPTI 26.x intercepts memory calls "
        "only then): run with LD_PRELOAD={}",
        kindName(kind), preloadHint());
  else if (res == MSPTI_ERROR_INVALID_PARAMETER)
    note = fmt::format("this MSPTI does not know {} (added in a later generation)", kindName(kind));
  else if (res != MSPTI_SUCCESS) note = describeCall("msptiActivityEnable", kindName(kind), res);
  if (deps_.stats) deps_.stats->noteEnable(kind, static_cast<int>(res), note);
  if (kind == MSPTI_ACTIVITY_KIND_RUNTIME_API && res == MSPTI_ERROR_INVALID_PARAMETER) predates26_ = true;
  lastEnableNote_ = note;
  if (res == MSPTI_SUCCESS) {
    enabledKinds_.push_back(kind);
    // Before the kind's first record: the cap holds room only for what the session waits for.
    if (store_)
      store_->waitFor(waitBitsOf(kind), kind == MSPTI_ACTIVITY_KIND_RUNTIME_API || kind == MSPTI_ACTIVITY_KIND_API);
  } else if (report) errors_.push_back(describeCall("msptiActivityEnable", kindName(kind), res));
  if (!note.empty() && copies) copiesNote_ = note;
  return res == MSPTI_SUCCESS;
}

void MsptiActivityProfilerSession::reclaimCallbacks() noexcept {
  if (!reclaimCallbacks_.exchange(false)) return;
  try {
    MsptiActivityApi(*fns_).registerCallbacks(&MsptiBufferPool::onRequest, &MsptiBufferPool::onComplete);
  } catch (...) {}
}

void MsptiActivityProfilerSession::start() {
  guard(errors_, "start", [&] {
    startNs_ = nowNs();
    startThread_ = static_cast<uint32_t>(::syscall(SYS_gettid));
    clockAtStart_ = ClockSample::now();
    // Seq counts each group's calls from here (CollectiveJoin.h).
    communicatorsSampled_ = static_cast<bool>(deps_.communicators);
    communicatorsAtStart_ = sampleCommunicators(deps_.communicators);
    if (arm()) {
      state_ = SessionState::kStarted;
      status_ = libkineto::TraceStatus::RECORDING;
    }
  });
  publish(false);
}

bool MsptiActivityProfilerSession::arm() {
  if (!subscribed_) return false;  // the constructor said why
  MsptiActivityApi api(*fns_);
  store_ = std::make_shared<RecordStore>(deps_.staleBelow ? deps_.staleBelow->load() : 0,
                                         static_cast<uint64_t>(std::max<int64_t>(deps_.config.maxSessionRecords, 1)));
  deps_.pool->configure(static_cast<size_t>(deps_.config.bufferSizeBytes),
                        static_cast<size_t>(deps_.config.bufferPoolCap));
  poolAtStart_ = deps_.pool->counters();
  forwarderAtStart_ = forwarder_->counters();
  deps_.pool->bindCallbacks();
  deps_.pool->setSink(store_);
  // Order: Subscribe (at configure) -> RegisterCallbacks -> Enable (mspti.md 5.6). Registering here,
  // after every child profiler's configure, also takes the callbacks back from a peer backend that
  // registered its own in its start() before ours.
  const msptiResult r = api.registerCallbacks(&MsptiBufferPool::onRequest, &MsptiBufferPool::onComplete);
  if (r != MSPTI_SUCCESS) {
    deps_.pool->setSink(nullptr);
    fail(describeCall("msptiActivityRegisterCallbacks", "request, complete", r),
         "msptiActivityRegisterCallbacks failed");
    return false;
  }
  // Device kinds first (the ones requested and switched on), then the kinds that describe launches.
  bool anyDevice = false;
  for (const ActivityKindInfo& info : kActivityKinds) {
    const KindHandler& k = kindHandler(info.kind);
    const bool deviceSide = k.row != TraceRow::kNone || k.keptAs == KeptAs::kMemoryEvent;
    if (!deviceSide || !k.enabledBy || !(deps_.config.*k.enabledBy)) continue;
    if (!requested(types_, k)) continue;
    const bool ok = enable(k.kind, /*report=*/k.kind == MSPTI_ACTIVITY_KIND_KERNEL);
    if (k.kind == MSPTI_ACTIVITY_KIND_KERNEL && !ok) {
      kernelsNotEnabled_ = true;
      warnOnce("kernels", findingMessage("kernels", facts()));
    }
    if (k.kind == MSPTI_ACTIVITY_KIND_COMMUNICATION && !ok)
      // The host side of a collective (c10d ranges, ProcessGroup calls) is in the trace anyway;
      // without this the trace looks complete. Copies have their own note (copiesNote_).
      notCollected_.push_back(fmt::format(
          "COMMUNICATION: HCCL/LCCL collectives are not collected, so the trace has their host-side ranges but no "
          "collective rows: {} (MSPTI 8.2 and newer record them)",
          lastEnableNote_.empty() ? "msptiActivityEnable(COMMUNICATION) failed" : lastEnableNote_));
    anyDevice |= ok;
  }
  // mstx markers (MARKER records, mspti.md 5.9) are kept for their own sake, whatever device kinds
  // came on: a marker describes the program, not a launch.
  for (const ActivityKindInfo& info : kActivityKinds) {
    const KindHandler& k = kindHandler(info.kind);
    if (k.keptAs != KeptAs::kMarker || !k.enabledBy || !(deps_.config.*k.enabledBy)) continue;
    if (enable(k.kind, /*report=*/false)) applyMarkerDomains();
    else
      notCollected_.push_back(
          fmt::format("MARKER: mstx marks and ranges are not collected: {}",
                      lastEnableNote_.empty() ? "msptiActivityEnable(MARKER) failed" : lastEnableNote_));
  }
  const bool forwarding = anyDevice && deps_.config.enableExternalCorrelation && api.hasExternalCorrelation() &&
                          enable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, true);
  // RUNTIME_API from MSPTI 26.0 carries the launch calls; older libraries only know API
  // (mspti.md 3.2, 8). Both give the calling thread, its host time and the launch's id.
  if (anyDevice && deps_.config.enableApiRecords && !enable(MSPTI_ACTIVITY_KIND_RUNTIME_API, false))
    enable(MSPTI_ACTIVITY_KIND_API, true);
  generation_ = forwarder_->arm(forwarding ? fns_ : nullptr);
  armed_ = true;
  // Any other MSPTI consumer started by kineto after us registered its own callbacks in its start()
  // (torch_npu's built-in backend does, even after its Subscribe failed): the first op after all
  // sessions started takes them back (one MSPTI call per session).
  reclaimCallbacks_.store(true);
  lanes_.usePeerNames(deps_.peer.present);
  lanes_.keepNameOf(static_cast<int32_t>(startThread_));
  return true;
}

// marker_domains (mspti.md 5.9): an exclude list switches those domains off in MSPTI for the
// session (on again at stop: the switches are process-wide); an include list switches its domains
// on, and since MSPTI has no switch for "every other domain", the other domains' markers are
// dropped at stop and counted (markers.not_included). A library without the domain functions
// cannot apply the setting: every domain is collected and the report says so.
void MsptiActivityProfilerSession::applyMarkerDomains() {
  const MarkerDomainFilter& f = deps_.config.markerDomains;
  markerDomains_ = {f.text(), f.mode == MarkerDomainFilter::Mode::kAll, ""};
  if (f.mode == MarkerDomainFilter::Mode::kAll) return;
  if (!fns_->enableMarkerDomain || !fns_->disableMarkerDomain) {
    markerDomains_.note = fmt::format(
        "marker_domains={} cannot be applied: this MSPTI library has no msptiActivityEnableMarkerDomain/"
        "msptiActivityDisableMarkerDomain (CANN 8.3.RC1 and newer have them); markers of every domain are collected",
        f.text());
    return;
  }
  const bool exclude = f.mode == MarkerDomainFilter::Mode::kExclude;
  std::string failed;
  for (const std::string& name : f.names) {
    msptiResult res = MSPTI_ERROR_INNER;
    guard(errors_, "marker_domains",
          [&] { res = exclude ? fns_->disableMarkerDomain(name.c_str()) : fns_->enableMarkerDomain(name.c_str()); });
    if (res != MSPTI_SUCCESS)
      failed += fmt::format("{}{} ({})", failed.empty() ? "" : ", ", name, static_cast<int>(res));
    else if (exclude) domainsOff_.push_back(name);
  }
  markerDomains_.applied = failed.empty();
  if (!failed.empty())
    markerDomains_.note =
        fmt::format("msptiActivity{}MarkerDomain failed for {}", exclude ? "Disable" : "Enable", failed);
  else if (!exclude)
    markerDomains_.note = "markers of other domains are dropped by torch-mspti (counted in markers.not_included)";
}

void MsptiActivityProfilerSession::restoreMarkerDomains() {
  for (const std::string& name : domainsOff_)
    guard(errors_, "marker_domains", [&] { fns_->enableMarkerDomain(name.c_str()); });
  domainsOff_.clear();
}

void MsptiActivityProfilerSession::stop() {
  const auto t0 = std::chrono::steady_clock::now();
  guard(errors_, "stop", [&] {
    if (armed_) collect();
  });
  stopMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  publish(false);
}

// stop()'s body, as named stages in the order they must run. Each stage says why it comes where it does.
void MsptiActivityProfilerSession::collect() {
  armed_ = false;
  stopNs_ = nowNs();
  if (stopInForkedChild()) return;
  retakeFromPeer();                                  // before the drain's first FlushAll
  const DeviceSync sync = synchronizeDevicesSeen();  // before Disable: MSPTI 26.1 discards unfinished work
  disarmForwarder();                                 // the op log is complete once no op can push
  const int64_t disabledAt = drainLibrary(sync);     // seals the store, then hands off the Unsubscribe
  restoreMarkerDomains();                            // MARKER is off: the switches go back for later sessions
  takeCounters();                                    // every record is in: the counters are final
  buildLaunches(disabledAt);                         // the window ends at Disable
  reportFindings();                                  // last: reads everything above
}

bool MsptiActivityProfilerSession::stopInForkedChild() {
  if (!forkedFromMsptiParent()) return false;
  // Started in the parent, stopped in a forked child: MSPTI's threads and buffers are the
  // parent's; draining here could hang on a lock held at the fork. Stop without calling MSPTI.
  store_.reset();
  subscribed_ = false;
  fail(fmt::format("session inherited across fork() and stopped in the child without draining: {}", kForkedChildReason),
       fmt::format("{} (this session was started before fork() and is stopped in the child)", kForkedChildReason));
  return true;
}

void MsptiActivityProfilerSession::retakeFromPeer() {
  if (!deps_.peer.present) return;
  // The peer may have stopped first: its stop() disables MSPTI's kinds (ours), which on
  // libraries that do not pull device data on Disable loses what is still on its way; enable
  // ours again at once, and take the callbacks back before the drain's first FlushAll.
  reclaimCallbacks_.store(true);
  reclaimCallbacks();
  MsptiActivityApi api(*fns_);
  for (auto kind : enabledKinds_) api.enable(kind);
}

MsptiActivityProfilerSession::DeviceSync MsptiActivityProfilerSession::synchronizeDevicesSeen() {
  DeviceSync sync;
  if (!deps_.config.synchronizeDevices || !deps_.synchronizeDevices) return sync;
  // torch.profiler synchronises the current device only; kernels launched in the window on the
  // others may still be running, and MSPTI 26.1 discards what has not ended when it is disabled.
  // The devices this session has seen records from are named here; synchronizeDevices adds the
  // ones the backend has initialised (device records arrive ~200 ms late, so a device whose
  // kernels are still running has usually delivered none yet) and never touches an idle one.
  std::vector<int32_t> devices;
  for (uint32_t physical : store_->devicesSeen())
    devices.push_back(logicalDevice(physical, deps_.config.visibleDevices));
  const auto t0 = std::chrono::steady_clock::now();
  guard(errors_, "synchronize devices", [&] { sync.idle = deps_.synchronizeDevices(devices); });
  sync.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return sync;
}

void MsptiActivityProfilerSession::disarmForwarder() {
  counters_.unbalancedAtStop += forwarder_->disarm();
  opLog_ = forwarder_->takeLog(generation_);
  for (const ThreadOps& t : opLog_) counters_.opsLogged += t.ids.size();
}

int64_t MsptiActivityProfilerSession::drainLibrary(const DeviceSync& sync) {
  MsptiActivityApi api(*fns_);
  DrainInput in{&api, store_.get(), enabledKinds_, deps_.config, 0};
  auto collected = [&](msptiActivityKind kind) {
    return std::find(enabledKinds_.begin(), enabledKinds_.end(), kind) != enabledKinds_.end();
  };
  for (auto kind : enabledKinds_) in.waitFor |= waitBitsOf(kind);
  // Ids are minted per kernel launch (KERNEL enabled), per communication node launch
  // (COMMUNICATION enabled) and per interposed ACL memory call, which needs the preload (mspti.md
  // 4, 5.5): an id whose class no API record told may then be a copy that makes no row here.
  in.unclassifiedMayBeRowless =
      libraryIsPreloaded() && !(collected(MSPTI_ACTIVITY_KIND_MEMCPY) && collected(MSPTI_ACTIVITY_KIND_MEMSET));
  // Before 26.0 a device is known only through the preloaded library's aclrtSetDevice (mspti.md 5.5).
  in.kernelsNeedPreload = predates26_ && !libraryIsPreloaded();
  // (only when a device kind is collected: without one there is no row to wait for)
  in.launchesMayBeUnseen = !collected(MSPTI_ACTIVITY_KIND_RUNTIME_API) && !collected(MSPTI_ACTIVITY_KIND_API) &&
                           (collected(MSPTI_ACTIVITY_KIND_KERNEL) || collected(MSPTI_ACTIVITY_KIND_COMMUNICATION) ||
                            collected(MSPTI_ACTIVITY_KIND_MEMCPY) || collected(MSPTI_ACTIVITY_KIND_MEMSET));
  in.devicesSynchronized = sync.idle;
  std::vector<std::string> drainErrors;
  int64_t disabledAt = 0;
  DrainStats drain = torch_mspti::drain(in, drainErrors, disabledAt);
  drain.synchronizeMs = sync.ms;
  drain_ = drain;
  // The pool is unbound before the store is sealed: a completion after this point is counted as
  // late by the pool, never written into a sealed store.
  deps_.pool->setSink(nullptr);
  store_->seal();
  // Every kind is off and every buffer delivered: MSPTI's Unsubscribe (up to 1 s on the real
  // library) runs off stop() (SubscriptionRelease.h).
  releaseSubscriber();
  for (auto& e : drainErrors) errors_.push_back(std::move(e));
  return disabledAt;
}

void MsptiActivityProfilerSession::takeCounters() {
  const PoolCounters pool = deps_.pool->counters();
  counters_.buffersRequested = pool.requested - poolAtStart_.requested;
  counters_.buffersCompleted = pool.completed - poolAtStart_.completed;
  counters_.buffersDeclined = pool.declined - poolAtStart_.declined;
  counters_.nullCompletions = pool.nullCompletions - poolAtStart_.nullCompletions;
  counters_.foreignBuffers = pool.foreign - poolAtStart_.foreign;
  counters_.orphanRecords = pool.orphanRecords - poolAtStart_.orphanRecords;
  counters_.failedCompletions = pool.failedCompletions - poolAtStart_.failedCompletions;
  counters_.add(forwarder_->counters().since(forwarderAtStart_));
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) counters_.recordsByKind[i] = store_->recordsByKind()[i];
  counters_.abandonedBuffers = store_->abandonedBuffers();
  counters_.abandonedBytes = store_->abandonedBytes();
  counters_.afterCollection = store_->afterCollection();
  const CorrelationLedger::Watermark watermark = store_->ledger().watermark();  // O(n log n): once
  counters_.junkCorrelationIds = store_->ledger().junkIds() + watermark.outliers;
  highestId_ = watermark.id;
  counters_.overCap = store_->overCap();
  const std::vector<uint64_t> overCapByKind = store_->overCapByKind();
  for (size_t k = 0; k < overCapByKind.size(); ++k) counters_.droppedByKind[kDropOverCap][k] = overCapByKind[k];
}

// From the API records; without any, from the session's other host-clock records (HostClock.h),
// so that memory events, host markers and copies on a raw-clock library are still put on the
// realtime clock when API records are off.
HostClock MsptiActivityProfilerSession::decideHostClock() const {
  const ClockSample stop = ClockSample::now();
  if (!store_->apis().empty()) return HostClock::decide(store_->apis(), clockAtStart_, stop);
  std::vector<int64_t> times;
  for (const MemoryRecord& m : store_->memory()) times.push_back(m.start);
  for (const MarkerRecord& m : store_->markers())
    if (m.sourceKind != MSPTI_ACTIVITY_SOURCE_KIND_DEVICE) times.push_back(m.timestamp);
  for (const DeviceRecord& d : store_->devices())
    if (kindHandler(d.kind).admit.time == TimeBase::kHost) times.push_back(d.start);
  return HostClock::decide(times, clockAtStart_, stop);
}

void MsptiActivityProfilerSession::buildLaunches(int64_t disabledAt) {
  hostClock_ = decideHostClock();
  const Window window{startNs_, stopNs_, std::max(stopNs_, disabledAt ? disabledAt : nowNs())};
  // One admission for every kind: the window, the host clock's conversion and the stale rule.
  Admission admission(*hostClock_, window, store_->ledger(), counters_);
  launches_ = LaunchTable::build(*store_, admission, deps_.config.visibleDevices, counters_);
  memory_ = MemoryTimeline::build(*store_, admission, deps_.config.visibleDevices, counters_);
  const bool dropOthers =
      markerDomains_.applied && deps_.config.markerDomains.mode == MarkerDomainFilter::Mode::kInclude;
  markers_ = MarkerTable::build(store_->markers(), admission, deps_.config.visibleDevices,
                                dropOthers ? &deps_.config.markerDomains : nullptr, counters_);
  store_->releaseConsumed();  // the launch table holds the kept rows and their launches from here on
  // After the markers (the join reads their "communication" ranges); the communicators are asked
  // now, when every launch of the window has been made (the drain waited for them).
  collectives_ = CollectiveTable::build(launches_, markers_, communicatorsAtStart_, communicatorsSampled_,
                                        sampleCommunicators(deps_.communicators), counters_);
  // Records at or below this session's highest id belong to it: a later session drops them as stale.
  if (deps_.staleBelow) {
    const uint64_t maxId = highestId_;
    uint64_t prev = deps_.staleBelow->load();
    while (maxId > prev && !deps_.staleBelow->compare_exchange_weak(prev, maxId)) {}
  }
  state_ = SessionState::kStopped;
  status_ = libkineto::TraceStatus::PROCESSING;
}

SessionFacts MsptiActivityProfilerSession::facts() const {
  SessionFacts f;
  f.bufferPoolCap = deps_.config.bufferPoolCap;
  f.drainTimeoutMs = deps_.config.drainTimeoutMs;
  f.maxSessionRecords = deps_.config.maxSessionRecords;
  f.libraryPreloaded = libraryIsPreloaded();
  f.preloadHint = preloadHint();
  f.peerPresent = deps_.peer.present;
  f.peerDescription = deps_.peer.description;
  f.failureCause = failureCause_;
  f.kernelsNotEnabled = kernelsNotEnabled_;
  f.buffersDeclined = counters_.buffersDeclined;
  if (drain_) {
    f.drainExitReason = drain_->exitReason;
    f.drainEvidence = drain_->evidence;
    f.drainOrder = drain_->order;
    f.pendingLaunches = drain_->pendingLaunches;
  }
  f.outOfWindow = counters_.outOfWindow;
  f.overCap = counters_.overCap;
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k)
    if (const uint64_t n = counters_.droppedByKind[kDropOverCap][k])
      f.overCapKinds +=
          fmt::format("{}{} {}", f.overCapKinds.empty() ? "" : ", ", kindName(static_cast<uint32_t>(k)), n);
  f.staleRecords = counters_.staleRecords;
  f.copiesNote = copiesNote_;
  for (auto kind : enabledKinds_) f.apiRecordsCollected |= kindHandler(kind).keptAs == KeptAs::kApiCall;
  f.clockUntrusted = hostClock_ && hostClock_->kind() == HostClock::Kind::kUntrusted;
  if (store_) {
    f.kernelRecords = store_->recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL];
    const CorrelationLedger& ledger = store_->ledger();
    const uint64_t copyCalls = ledger.apiCalls(LaunchClass::kMemcpy) + ledger.apiCalls(LaunchClass::kMemset);
    const uint64_t copyRecords =
        store_->recordsByKind()[MSPTI_ACTIVITY_KIND_MEMCPY] + store_->recordsByKind()[MSPTI_ACTIVITY_KIND_MEMSET];
    if (!copiesNote_.empty() && copyCalls > 0 && copyRecords == 0) f.copyCallsWithoutRows = copyCalls;
  }
  // Links are decided here, from the launches and the op log, because kineto reads the health
  // report (getMetadata) before processTrace resolves each row's link (kineto.md 1.3 step 4b).
  std::unordered_set<uint32_t> opThreads;
  for (const ThreadOps& t : opLog_)
    if (!t.ids.empty()) opThreads.insert(t.threadId);
  f.opThreads = opThreads.size();
  f.opsLogged = counters_.opsLogged;
  f.cpuOpsRequested = types_.count(ActivityType::CPU_OP) > 0;
  for (const Launch& l : launches_.launches) {
    f.deviceRows += l.rowCount;
    if (l.call && l.callTrusted && opThreads.count(l.call->threadId) == 0) f.rowsFromOpLessThreads += l.rowCount;
    if (l.call && l.call->threadId == startThread_) f.rowsFromSessionThread += l.rowCount;
    if (!l.call && (l.opHint || l.userHint)) f.rowsWithoutApiRecord += l.rowCount;
    if (!l.call && !l.opHint && !l.userHint) f.rowsWithoutLinkEvidence += l.rowCount;
  }
  return f;
}

void MsptiActivityProfilerSession::reportFindings() {
  SessionFacts f = facts();
  // The copies note is said once per process, not once per session.
  if (f.copyCallsWithoutRows > 0 && !(deps_.stats && deps_.stats->firstTime("copies"))) f.copyCallsWithoutRows = 0;
  for (const FindingHit& hit : findingsFor(f)) warnOnce(hit.info->name, hit.message);
}

std::vector<std::string> MsptiActivityProfilerSession::errors() { return errors_; }

void MsptiActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  guard(errors_, "processTrace", [&] { process(logger, nullptr); });
}

void MsptiActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger,
                                                libkineto::getLinkedActivityCallback getLinkedActivity,
                                                int64_t /*startTime*/, int64_t endTime) {
  // The window was applied at stop (LaunchTable: by launch time, on the session's own start and
  // stop). kineto takes its window's end before it stops the session, so the session's stop lies
  // after it: the Trace span is cut to kineto's end (getTraceBuffer).
  windowEndNs_ = endTime > 0 ? endTime : 0;
  guard(errors_, "processTrace", [&] { process(logger, &getLinkedActivity); });
}

void MsptiActivityProfilerSession::process(libkineto::ActivityLogger& logger,
                                           const libkineto::getLinkedActivityCallback* linked) {
  if (armed_) collect();  // kineto always stops first; be safe if it did not
  const auto t0 = std::chrono::steady_clock::now();
  if (store_) {
    {  // the op timeline is freed before kineto's logger grows its own array of the activities
      const OpTimeline ops(opLog_, linked, counters_);
      BuildContext in{&launches_, &ops, deps_.ids, deps_.processId, &collectives_};
      buildActivities(in, *buffer_, lanes_, counters_);
      buildMemoryActivities(memory_, ops, *buffer_, lanes_, counters_);
      buildMarkerActivities(markers_, ops, *deps_.ids, *buffer_, lanes_, counters_);
    }
    for (const auto& act : buffer_->activities) logger.handleActivity(*act);
    // getDeviceInfo() names the first device; the others are named here (kineto.md 6, step 6).
    const auto devices = lanes_.devices();
    for (size_t i = 1; i < devices.size(); ++i) logger.handleDeviceInfo(lanes_.deviceInfo(devices[i]), startNs_);
  }
  finish();
  processTraceMs_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (deps_.collectedFlag) deps_.collectedFlag->store(state_ == SessionState::kProcessed && store_ ? 1 : 0);
  publish(true);
}

std::unique_ptr<libkineto::DeviceInfo> MsptiActivityProfilerSession::getDeviceInfo() {
  try {
    const auto devices = lanes_.devices();
    if (devices.empty()) return nullptr;
    return std::make_unique<libkineto::DeviceInfo>(lanes_.deviceInfo(devices.front()));
  } catch (...) {
    return nullptr;
  }
}

std::vector<libkineto::ResourceInfo> MsptiActivityProfilerSession::getResourceInfos() {
  try {
    return lanes_.resourceInfos();
  } catch (...) {
    return {};
  }
}

std::unique_ptr<libkineto::CpuTraceBuffer> MsptiActivityProfilerSession::getTraceBuffer() {
  try {
    if (!buffer_ || buffer_->activities.empty()) return nullptr;
    int64_t end = stopNs_ ? stopNs_ : nowNs();
    // 1 us clear of kineto's window end: kineto writes ts and dur in us with three decimals, and a
    // reader that adds them in doubles (at ~5.8e12 us one ulp is ~1 ns) must still find the span's
    // end at or before "Record Window End" (PyTorch's test_basic_chrome_trace does).
    constexpr int64_t kWindowEndMarginNs = 1000;
    if (windowEndNs_ > 0) end = std::max(startNs_, std::min(end, windowEndNs_ - kWindowEndMarginNs));
    buffer_->span = libkineto::TraceSpan(startNs_, end, "torch_mspti");
    return std::move(buffer_);
  } catch (...) {
    return nullptr;
  }
}

std::string MsptiActivityProfilerSession::getDeviceProperties() {
  try {
    // Older kineto never asks a child session for metadata; it calls this just before it writes
    // the trace's metadata, so the report goes to kineto from here (TorchCompat.h).
    if constexpr (!compat::kSessionMetadata) {
      if (!metadataHandedOver_) {
        metadataHandedOver_ = true;
        for (const auto& [key, value] : getMetadata()) compat::addTraceMetadata(key, value);
      }
    }
    if (!deps_.deviceProperties || launches_.devices.empty()) return "";
    return deps_.deviceProperties(launches_.devices);
  } catch (...) {
    return "";
  }
}

void MsptiActivityProfilerSession::finish() {
  if (armed_) guard(errors_, "stop", [&] { collect(); });  // kineto always stops first; be safe if it did not
  if (state_ != SessionState::kFailed) state_ = SessionState::kProcessed;
  if (status_ != libkineto::TraceStatus::ERROR) status_ = libkineto::TraceStatus::READY;
}

std::unordered_map<std::string, std::string> MsptiActivityProfilerSession::getMetadata() {
  try {
    // kineto reads this right before processTrace (kineto.md 1.3 step 4b), and the trace keeps it
    // as read: the report is final from here; processTrace only writes the rows (their counts
    // and link states are in diagnostics() and in each row's "link" argument).
    finish();
    return {{"torch_mspti", healthJson()}};
  } catch (...) {
    return {};
  }
}

SessionReport MsptiActivityProfilerSession::report() const {
  SessionReport r;
  r.state = state_;
  r.errors = errors_;
  for (const auto& given : findings_) r.warnings.push_back(given.first);
  r.findings = findings_;
  for (auto k : enabledKinds_) r.enabledKinds.push_back(kindName(k));
  r.notCollected = notCollected_;
  r.markerDomains = markerDomains_;
  r.hostClock = hostClock_ ? hostClock_->name() : "";
  r.counters = counters_;
  r.drain = drain_;
  r.stopMs = stopMs_;
  r.processTraceMs = processTraceMs_;
  r.releaseWaitMs = releaseWaitMs_;
  return r;
}

std::string MsptiActivityProfilerSession::libraryPath() const {
  return deps_.libraryReport ? deps_.libraryReport().path : std::string();
}

bool MsptiActivityProfilerSession::libraryIsPreloaded() const { return libraryPreloaded(deps_.config, libraryPath()); }

std::string MsptiActivityProfilerSession::preloadHint() const {
  const std::string path = libraryPath();
  return path.empty() ? std::string("<CANN>/lib64/libmspti.so") : path;
}

std::string MsptiActivityProfilerSession::healthJson() const {
  const LibraryReport lib = deps_.libraryReport ? deps_.libraryReport() : LibraryReport{};
  JsonWriter w(JsonWriter::Target::kKinetoMetadata);  // kineto writes it into the trace as it is
  w.beginObject();
  w.beginObject("library");
  writeLibrary(w, lib);
  w.endObject();
  // The final report (state, errors, warnings, stop-phase counters, drain): the same as
  // diagnostics().last_session. Only the rows and their links are computed after kineto reads it:
  // each device row carries its link state in its "link" argument, and torch_mspti.diagnostics()
  // / `torch-mspti check` count them.
  writeReport(w, report(), /*tracePhase=*/false);
  w.value("link_states", "per device row in args.link; counted by torch_mspti.diagnostics() and torch-mspti check");
  w.endObject();
  return w.str();
}

void MsptiActivityProfilerSession::publish(bool final) {
  try {
    if (published_ || !deps_.stats) return;
    deps_.stats->publish(report(), final);
    if (final) published_ = true;
  } catch (...) {}
}

}  // namespace torch_mspti
