#include "MsptiActivityProfilerSession.h"

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

// The kineto activity type whose request makes a device row kind worth collecting.
bool requested(const std::set<ActivityType>& types, TraceRow row, RecordRole role) {
  switch (row) {
    case TraceRow::kKernel: return types.count(ActivityType::CONCURRENT_KERNEL) > 0;
    case TraceRow::kMemcpy: return types.count(ActivityType::GPU_MEMCPY) > 0;
    case TraceRow::kMemset: return types.count(ActivityType::GPU_MEMSET) > 0;
    case TraceRow::kNone: return role == RecordRole::kApi || role == RecordRole::kExternalCorrelation;
  }
  return false;
}

uint32_t waitBit(LaunchClass c) { return 1u << static_cast<int>(c); }

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
    if (subscribed_) {
      MsptiActivityApi(*fns_).unsubscribe(subscriber_);
      subscribed_ = false;
    }
    if (!published_) publish(true);
  });
}

void MsptiActivityProfilerSession::warnOnce(const std::string& key, const std::string& message) {
  if (std::find(warned_.begin(), warned_.end(), key) != warned_.end()) return;
  warned_.push_back(key);
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
  // Next to torch_npu's backend the lane is not empty: that backend subscribes in its own start()
  // and collects; say who serves it.
  if (deps_.peer.present)
    warnOnce("failed", fmt::format("torch-mspti: collected nothing for this trace: {}; the NPU lane holds only what "
                                   "{} collects",
                                   cause, deps_.peer.description));
  else warnOnce("failed", fmt::format("torch-mspti: the NPU lane of this trace will be empty: {}", cause));
}

bool MsptiActivityProfilerSession::subscribe() {
  fns_ = deps_.loadLibrary ? deps_.loadLibrary(deps_.config) : nullptr;
  if (!fns_) {
    const LibraryReport r = deps_.libraryReport ? deps_.libraryReport() : LibraryReport{};
    fail(fmt::format("MSPTI unavailable: {} ({})", r.reason, r.fix), r.reason.empty() ? "no MSPTI library" : r.reason);
    return false;
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

bool MsptiActivityProfilerSession::enable(msptiActivityKind kind, bool report) {
  const msptiResult res = MsptiActivityApi(*fns_).enable(kind);
  std::string note;
  const bool copies = kind == MSPTI_ACTIVITY_KIND_MEMCPY || kind == MSPTI_ACTIVITY_KIND_MEMSET;
  if (res == MSPTI_ERROR_WITHOUT_LD_PRELOAD || (res == MSPTI_SUCCESS && copies && !libraryIsPreloaded()))
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
  if (res == MSPTI_SUCCESS) enabledKinds_.push_back(kind);
  else if (report) errors_.push_back(describeCall("msptiActivityEnable", kindName(kind), res));
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
    clockAtStart_ = ClockSample::now();
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
  for (const ActivityKindInfo& k : kActivityKinds) {
    if (k.row == TraceRow::kNone || !*k.setting || !deps_.config.flag(k.setting)) continue;
    if (!requested(types_, k.row, k.role)) continue;
    const bool ok = enable(k.kind, /*report=*/k.kind == MSPTI_ACTIVITY_KIND_KERNEL);
    if (k.kind == MSPTI_ACTIVITY_KIND_KERNEL && !ok)
      warnOnce("kernels", "torch-mspti: no kernels in this trace: msptiActivityEnable(KERNEL) failed");
    if (k.kind == MSPTI_ACTIVITY_KIND_COMMUNICATION && !ok)
      // The host side of a collective (c10d ranges, ProcessGroup calls) is in the trace anyway;
      // without this the trace looks complete. Copies have their own note (copiesNote_).
      notCollected_.push_back(fmt::format(
          "COMMUNICATION: HCCL/LCCL collectives are not collected, so the trace has their host-side ranges but no "
          "collective rows: {} (MSPTI 8.2 and newer record them)",
          lastEnableNote_.empty() ? "msptiActivityEnable(COMMUNICATION) failed" : lastEnableNote_));
    anyDevice |= ok;
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
  return true;
}

void MsptiActivityProfilerSession::stop() {
  guard(errors_, "stop", [&] {
    if (armed_) collect();
  });
  publish(false);
}

void MsptiActivityProfilerSession::collect() {
  armed_ = false;
  stopNs_ = nowNs();
  if (forkedFromMsptiParent()) {
    // Started in the parent, stopped in a forked child: MSPTI's threads and buffers are the
    // parent's; draining here could hang on a lock held at the fork. Stop without calling MSPTI.
    store_.reset();
    subscribed_ = false;
    errors_.push_back(fmt::format("session inherited across fork() and stopped in the child without draining: {}",
                                  kForkedChildReason));
    state_ = SessionState::kFailed;
    status_ = libkineto::TraceStatus::ERROR;
    return;
  }
  if (deps_.peer.present) {
    // The peer may have stopped first: its stop() disables MSPTI's kinds (ours), which on
    // libraries that do not pull device data on Disable loses what is still on its way; enable
    // ours again at once, and take the callbacks back before the drain's first FlushAll.
    reclaimCallbacks_.store(true);
    reclaimCallbacks();
    MsptiActivityApi api(*fns_);
    for (auto kind : enabledKinds_) api.enable(kind);
  }
  DrainStats drain;
  bool devicesSynchronized = false;
  if (deps_.config.synchronizeDevices && deps_.synchronizeDevices) {
    // torch.profiler synchronises the current device only; kernels launched in the window on the
    // others may still be running, and MSPTI 26.1 discards what has not ended when it is disabled.
    // The devices this session has seen records from are named here; synchronizeDevices adds the
    // ones the backend has initialised (device records arrive ~200 ms late, so a device whose
    // kernels are still running has usually delivered none yet) and never touches an idle one.
    std::vector<int32_t> devices;
    for (uint32_t physical : store_->devicesSeen())
      devices.push_back(logicalDevice(physical, deps_.config.visibleDevices));
    const auto t0 = std::chrono::steady_clock::now();
    guard(errors_, "synchronize devices", [&] { devicesSynchronized = deps_.synchronizeDevices(devices); });
    drain.synchronizeMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  counters_.unbalancedAtStop += forwarder_->disarm();
  opLog_ = forwarder_->takeLog(generation_);
  for (const ThreadOps& t : opLog_) counters_.opsLogged += t.ids.size();

  MsptiActivityApi api(*fns_);
  DrainInput in{&api, store_.get(), subscriber_, enabledKinds_, deps_.config, 0};
  auto collected = [&](msptiActivityKind kind) {
    return std::find(enabledKinds_.begin(), enabledKinds_.end(), kind) != enabledKinds_.end();
  };
  for (auto kind : enabledKinds_) {
    const LaunchClass c = classOfDeviceKind(kind);
    if (c != LaunchClass::kNone) in.waitFor |= waitBit(c);
    if (kind == MSPTI_ACTIVITY_KIND_KERNEL) in.waitFor |= waitBit(LaunchClass::kNone);
  }
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
  in.devicesSynchronized = devicesSynchronized;
  std::vector<std::string> drainErrors;
  int64_t disabledAt = 0;
  const double synchronizeMs = drain.synchronizeMs;
  drain = torch_mspti::drain(in, drainErrors, disabledAt);
  drain.synchronizeMs = synchronizeMs;
  subscribed_ = false;  // the drain unsubscribed
  drain_ = drain;
  deps_.pool->setSink(nullptr);
  store_->seal();
  for (auto& e : drainErrors) errors_.push_back(std::move(e));

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
  const CorrelationLedger::Watermark watermark = store_->ledger().watermark();
  counters_.junkCorrelationIds = store_->ledger().junkIds() + watermark.outliers;
  counters_.overCap = store_->overCap();

  hostClock_ = HostClock::decide(store_->apis(), clockAtStart_, ClockSample::now());
  const Window window{startNs_, stopNs_, std::max(stopNs_, disabledAt ? disabledAt : nowNs())};
  launches_ = LaunchTable::build(*store_, *hostClock_, window, deps_.config.visibleDevices, counters_);
  store_->releaseDeviceRecords();  // the launch table holds the kept rows from here on
  if (deps_.staleBelow) {
    const uint64_t maxId = watermark.id;
    uint64_t prev = deps_.staleBelow->load();
    while (maxId > prev && !deps_.staleBelow->compare_exchange_weak(prev, maxId)) {}
  }
  state_ = SessionState::kStopped;
  status_ = libkineto::TraceStatus::PROCESSING;

  // At most one warning of each kind per session, each naming its cause and fix.
  if (counters_.buffersDeclined > 0)
    warnOnce("declined", fmt::format("torch-mspti: {} MSPTI buffer requests were declined at buffer_pool_cap={}; "
                                     "records were lost (raise buffer_pool_cap or buffer_size)",
                                     counters_.buffersDeclined, deps_.config.bufferPoolCap));
  const uint64_t kernelRecords = store_->recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL];
  if (drain.evidence == "kernels_need_preload" && drain.pendingLaunches > 0)
    warnOnce("no-kernels",
             fmt::format("torch-mspti: MSPTI reported {} launches but no KERNEL or COMMUNICATION record, and stop() "
                         "did not wait for them: this MSPTI does not know RUNTIME_API, so it predates 26.0, and such "
                         "a library knows a device only when libmspti.so is preloaded at process start: run with "
                         "LD_PRELOAD={}",
                         drain.pendingLaunches, preloadHint()));
  else if (drain.exitReason == "timeout" && drain.pendingLaunches > 0 && deps_.peer.present &&
           drain.order == "poll_first")
    warnOnce("pending", fmt::format("torch-mspti: {} launches of this session never delivered device records: {} "
                                    "stopped before torch-mspti and disabled MSPTI's kinds, and this MSPTI (before "
                                    "26.1) drops what is still on its way then; use MSPTI 26.1 or newer, or "
                                    "TORCH_MSPTI_PROFILER=off to let it serve",
                                    drain.pendingLaunches, deps_.peer.description));
  else if (drain.exitReason == "timeout" && drain.pendingLaunches > 0 && kernelRecords == 0 && !libraryIsPreloaded())
    // Two documented causes look alike here (mspti.md 5.5): records later than the bound (or
    // kernels still running), and a CANN that delivers kernels only with a process-start preload.
    warnOnce("no-kernels",
             fmt::format("torch-mspti: MSPTI reported {} launches but no KERNEL record within drain_timeout_ms={} "
                         "ms. Either their records come later than that or the kernels were still running (raise "
                         "drain_timeout_ms, or synchronize the device before the profile stops), or this CANN "
                         "delivers kernels only when libmspti.so is preloaded at process start (releases before "
                         "9.1): run with LD_PRELOAD={}",
                         drain.pendingLaunches, deps_.config.drainTimeoutMs, preloadHint()));
  else if (drain.exitReason == "timeout" && drain.pendingLaunches > 0)
    warnOnce("timeout", fmt::format("torch-mspti: {} launches still had no device record when the drain gave up at "
                                    "drain_timeout_ms={} ms: their records come later than that, or their work was "
                                    "still running on a device that was not synchronised (raise drain_timeout_ms, "
                                    "or synchronize the device before the profile stops)",
                                    drain.pendingLaunches, deps_.config.drainTimeoutMs));
  else if (drain.evidence == "unclassified_quiet" && drain.pendingLaunches > 0)
    warnOnce("unclassified",
             fmt::format("torch-mspti: {} launches known only from MSPTI's external-correlation hint had no device "
                         "record once every row was due, and stop() did not wait longer: without API records "
                         "their class is unknown, and they are likely copies, which this session does not "
                         "collect (set enable_api_records=True, so stop() knows which launches to wait for)",
                         drain.pendingLaunches));
  else if (drain.pendingLaunches > 0)
    warnOnce("pending", fmt::format("torch-mspti: {} launches of this session have no device record (drain: {})",
                                    drain.pendingLaunches, drain.exitReason));
  if (counters_.outOfWindow > 0)
    warnOnce("window", fmt::format("torch-mspti: {} device records were dropped: their launch lies outside the "
                                   "profiling window",
                                   counters_.outOfWindow));
  if (counters_.overCap > 0)
    warnOnce("over-cap", fmt::format("torch-mspti: {} records were dropped: this session reached "
                                     "max_session_records={} (raise it, or profile a shorter window)",
                                     counters_.overCap, deps_.config.maxSessionRecords));
  if (counters_.staleRecords > 0)
    warnOnce("stale", fmt::format("torch-mspti: {} records of an earlier session arrived in this one and were dropped",
                                  counters_.staleRecords));
  const CorrelationLedger& ledger = store_->ledger();
  const uint64_t copyCalls = ledger.apiCalls(LaunchClass::kMemcpy) + ledger.apiCalls(LaunchClass::kMemset);
  const uint64_t copyRecords =
      store_->recordsByKind()[MSPTI_ACTIVITY_KIND_MEMCPY] + store_->recordsByKind()[MSPTI_ACTIVITY_KIND_MEMSET];
  if (!copiesNote_.empty() && copyCalls > 0 && copyRecords == 0 && deps_.stats && deps_.stats->firstTime("copies"))
    warnOnce("copies", fmt::format("torch-mspti: the program made {} memory copy/memset calls but the trace has no "
                                   "copy rows: {}",
                                   copyCalls, copiesNote_));
  if (hostClock_->kind() == HostClock::Kind::kUntrusted)
    warnOnce("clock", "torch-mspti: MSPTI's API records are on an unknown host clock: no link could be verified");
  warnAboutLinks();
}

void MsptiActivityProfilerSession::warnAboutLinks() {
  // Decided here, from the launches and the op log, because kineto reads the health report
  // (getMetadata) before processTrace resolves each row's link (kineto.md 1.3 step 4b): the
  // trace's report and diagnostics() must carry the same warnings.
  std::unordered_set<uint32_t> opThreads;
  for (const ThreadOps& t : opLog_)
    if (!t.ids.empty()) opThreads.insert(t.threadId);
  uint64_t rows = 0, fromOpLessThreads = 0, withoutApiRecord = 0;
  for (const Launch& l : launches_.launches) {
    rows += l.rowCount;
    if (l.call && l.callTrusted && opThreads.count(l.call->threadId) == 0) fromOpLessThreads += l.rowCount;
    if (!l.call && (l.opHint || l.userHint)) withoutApiRecord += l.rowCount;
  }
  if (rows > 0 && fromOpLessThreads * 2 > rows)
    warnOnce("task-queue",
             fmt::format("torch-mspti: {} of {} device rows were launched from threads that ran no op torch "
                         "recorded: they are shown on their launch thread's lane and credited to no op. With "
                         "torch_npu's task queue set TASK_QUEUE_ENABLE=0; for threads of your own, profile with "
                         "experimental_config=torch._C._profiler._ExperimentalConfig(profile_all_threads=True)",
                         fromOpLessThreads, rows));
  if (withoutApiRecord == 0) return;
  // Without API records only MSPTI's hint is left; whether another thread could have been on top
  // of MSPTI's stack needs the ops' times, known at processTrace. One thread running ops rules it
  // out for every row.
  if (opThreads.size() <= 1)
    warnOnce("unverified", fmt::format("torch-mspti: {} device rows are linked by MSPTI's hint alone (no API "
                                       "records): right for launches from the op's own thread, wrong for launches "
                                       "from a thread that runs no op (torch_npu's task queue, a housekeeping "
                                       "thread); set enable_api_records=True to verify each link",
                                       withoutApiRecord));
  else
    warnOnce("ambiguous", fmt::format("torch-mspti: {} device rows have no API record while {} threads ran ops: "
                                      "MSPTI's hint cannot be verified, and rows whose op ran while another thread "
                                      "ran ops are left unlinked (each row's link argument says which); set "
                                      "enable_api_records=True",
                                      withoutApiRecord, opThreads.size()));
}

std::vector<std::string> MsptiActivityProfilerSession::errors() { return errors_; }

void MsptiActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  guard(errors_, "processTrace", [&] { process(logger, nullptr); });
}

void MsptiActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger,
                                                libkineto::getLinkedActivityCallback getLinkedActivity,
                                                int64_t /*startTime*/, int64_t /*endTime*/) {
  // The window was applied at stop (LaunchTable: by launch time, on the session's own start and
  // stop, which kineto's capture window encloses).
  guard(errors_, "processTrace", [&] { process(logger, &getLinkedActivity); });
}

void MsptiActivityProfilerSession::process(libkineto::ActivityLogger& logger,
                                           const libkineto::getLinkedActivityCallback* linked) {
  if (armed_) collect();  // kineto always stops first; be safe if it did not
  if (store_) {
    const OpTimeline ops(opLog_, linked, counters_);
    BuildContext in{&launches_, &ops, deps_.ids, deps_.processId};
    buildActivities(in, *buffer_, lanes_, counters_);
    for (const auto& act : buffer_->activities) logger.handleActivity(*act);
    // getDeviceInfo() names the first device; the others are named here (kineto.md 6, step 6).
    const auto devices = lanes_.devices();
    for (size_t i = 1; i < devices.size(); ++i) logger.handleDeviceInfo(lanes_.deviceInfo(devices[i]), startNs_);
  }
  finish();
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
    buffer_->span = libkineto::TraceSpan(startNs_, stopNs_ ? stopNs_ : nowNs(), "torch_mspti");
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
  r.warnings = warned_;
  for (auto k : enabledKinds_) r.enabledKinds.push_back(kindName(k));
  r.notCollected = notCollected_;
  r.hostClock = hostClock_ ? hostClock_->name() : "";
  r.counters = counters_;
  r.drain = drain_;
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
