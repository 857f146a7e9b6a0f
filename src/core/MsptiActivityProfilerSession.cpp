#include "MsptiActivityProfilerSession.h"

#include <chrono>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "ActivityBuilder.h"
#include "DrainPolicy.h"
#include "ForkGuard.h"
#include "JsonWriter.h"
#include "MsptiActivityApi.h"
#include "MsptiLibrary.h"

namespace torch_mspti {
namespace {

using libkineto::ActivityType;

// Highest MSPTI correlation id of earlier sessions: API records at or below it are stale.
std::atomic<uint64_t> gStaleBelow{0};

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

}  // namespace

MsptiActivityProfilerSession::MsptiActivityProfilerSession(ConfigSnapshot config, std::set<ActivityType> types)
    : config_(std::move(config)), types_(std::move(types)), forwarder_(CorrelationForwarder::instance()) {
  buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
  buffer_->gpuOpCount = 0;
  for (const auto& e : Config::instance().environmentErrors()) errors_.push_back(e);
}

MsptiActivityProfilerSession::~MsptiActivityProfilerSession() {
  guard(errors_, "teardown", [&] {
    if (armed_) collect();
    if (!published_) publish(true);
  });
}

void MsptiActivityProfilerSession::warnOnce(const std::string& cause) {
  if (warned_) return;
  warned_ = true;
  try {
    TORCH_WARN("torch-mspti: the NPU lane of this trace will be empty or incomplete: ", cause,
               ". Run `torch-mspti doctor` for details.");
  } catch (...) {}
}

void MsptiActivityProfilerSession::fail(const std::string& message, const std::string& cause) {
  errors_.push_back(message);
  state_ = "failed";
  status_ = libkineto::TraceStatus::ERROR;
  warnOnce(cause);
}

void MsptiActivityProfilerSession::start() {
  guard(errors_, "start", [&] {
    startNs_ = nowNs();
    if (arm()) {
      state_ = "started";
      status_ = libkineto::TraceStatus::RECORDING;
    }
  });
  publish(false);
}

bool MsptiActivityProfilerSession::arm() {
  MsptiLibrary& lib = MsptiLibrary::instance();
  if (!lib.ensureLoaded()) {
    LibraryReport r = lib.report();
    fail(fmt::format("MSPTI unavailable: {} ({})", r.reason, r.fix), r.reason);
    return false;
  }
  MsptiActivityApi api(lib.functions());
  store_ = std::make_shared<RecordStore>(gStaleBelow.load());
  MsptiBufferPool& pool = MsptiBufferPool::instance();
  pool.configure(static_cast<size_t>(config_.bufferSizeBytes), static_cast<size_t>(config_.bufferPoolCap));
  poolAtStart_ = pool.counters();
  forwarderErrorsAtStart_ = forwarder_.errors();
  forwarderOverflowsAtStart_ = forwarder_.overflows();
  forwarderInterleavedAtStart_ = forwarder_.interleaved();

  // Order matters: Subscribe -> RegisterCallbacks -> Enable (mspti.md 5.6).
  msptiResult r = api.subscribe(&subscriber_);
  if (r != MSPTI_SUCCESS) {
    const std::string call = describeCall("msptiSubscribe", "NULL, NULL", r);
    if (r == MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      fail(call + ": another tool (msprof, torch_npu's profiler, msmonitor) holds the MSPTI subscriber",
           "the MSPTI subscriber is held by another profiling tool");
    else fail(call, "msptiSubscribe failed");
    return false;
  }
  pool.setSink(store_);
  r = api.registerCallbacks(&MsptiBufferPool::onRequest, &MsptiBufferPool::onComplete);
  if (r != MSPTI_SUCCESS) {
    pool.setSink(nullptr);
    api.unsubscribe(subscriber_);
    fail(describeCall("msptiActivityRegisterCallbacks", "request, complete", r),
         "msptiActivityRegisterCallbacks failed");
    return false;
  }

  auto wants = [&](ActivityType t) { return types_.count(t) > 0; };
  auto enable = [&](msptiActivityKind kind, bool report) {
    msptiResult res = api.enable(kind);
    StatsRegistry::instance().noteEnable(kind, static_cast<int>(res));
    if (res == MSPTI_SUCCESS) {
      enabledKinds_.push_back(kind);
      return true;
    }
    if (report) errors_.push_back(describeCall("msptiActivityEnable", kindName(kind), res));
    return false;
  };
  bool kernels = false;
  if (config_.enableKernels && wants(ActivityType::CONCURRENT_KERNEL)) {
    kernels = enable(MSPTI_ACTIVITY_KIND_KERNEL, true);
    if (!kernels) warnOnce("msptiActivityEnable(KERNEL) failed");
  }
  if (kernels && config_.enableExternalCorrelation && api.hasExternalCorrelation())
    enable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, true);
  if (kernels && config_.enableApiRecords) {
    // RUNTIME_API from MSPTI 26.0 carries the launch records; older libraries only know API
    // (mspti.md 3.2, 8). Both carry the launching thread, host time and the launch's id.
    if (!enable(MSPTI_ACTIVITY_KIND_RUNTIME_API, false)) enable(MSPTI_ACTIVITY_KIND_API, true);
  }
  if (config_.enableCommunication && wants(ActivityType::CONCURRENT_KERNEL))
    enable(MSPTI_ACTIVITY_KIND_COMMUNICATION, true);
  if (config_.enableMemcpyMemset) {
    if (wants(ActivityType::GPU_MEMCPY)) enable(MSPTI_ACTIVITY_KIND_MEMCPY, true);
    if (wants(ActivityType::GPU_MEMSET)) enable(MSPTI_ACTIVITY_KIND_MEMSET, true);
  }
  if (config_.enableMarkers && wants(ActivityType::GPU_USER_ANNOTATION)) enable(MSPTI_ACTIVITY_KIND_MARKER, true);

  if (std::find(enabledKinds_.begin(), enabledKinds_.end(), MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) !=
      enabledKinds_.end())
    forwarder_.arm(&lib.functions());
  else if (kernels && config_.enableExternalCorrelation && !api.hasExternalCorrelation() &&
           (std::find(enabledKinds_.begin(), enabledKinds_.end(), MSPTI_ACTIVITY_KIND_API) != enabledKinds_.end() ||
            std::find(enabledKinds_.begin(), enabledKinds_.end(), MSPTI_ACTIVITY_KIND_RUNTIME_API) !=
                enabledKinds_.end()))
    // No external correlation (CANN 8.0.RC3): link through the API records' thread and host
    // time against the op intervals the forwarder records instead (mspti.md 8).
    intervalGen_ = forwarder_.armIntervals();
  armed_ = true;
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
    // parent's; draining here could hang on a lock held at the fork. The forwarder was disarmed
    // by the fork handler, the parent's records are not ours: stop without calling MSPTI.
    // No warning here: this is the parent's session; a session the child starts warns once.
    store_.reset();
    errors_.push_back(fmt::format("session inherited across fork() and stopped in the child without draining: {}",
                                  kForkedChildReason));
    state_ = "failed";
    status_ = libkineto::TraceStatus::ERROR;
    return;
  }
  counters_.unbalancedAtStop += forwarder_.disarm();
  if (intervalGen_) intervals_ = forwarder_.takeIntervals(intervalGen_);
  counters_.opIntervals = intervals_.size();
  MsptiActivityApi api(MsptiLibrary::instance().functions());
  DrainInput in{&api, store_.get(), subscriber_, enabledKinds_, config_};
  std::vector<std::string> drainErrors;
  drain_ = drain(in, drainErrors);
  MsptiBufferPool& pool = MsptiBufferPool::instance();
  pool.setSink(nullptr);
  for (auto& e : drainErrors) errors_.push_back(std::move(e));

  const PoolCounters now = pool.counters();
  counters_.buffersRequested = now.requested - poolAtStart_.requested;
  counters_.buffersCompleted = now.completed - poolAtStart_.completed;
  counters_.buffersDeclined = now.declined - poolAtStart_.declined;
  counters_.nullCompletions = now.nullCompletions - poolAtStart_.nullCompletions;
  counters_.correlationErrors = forwarder_.errors() - forwarderErrorsAtStart_;
  counters_.correlationOverflow = forwarder_.overflows() - forwarderOverflowsAtStart_;
  counters_.correlationInterleaved = forwarder_.interleaved() - forwarderInterleavedAtStart_;
  for (int i = 0; i < MSPTI_ACTIVITY_KIND_COUNT; ++i) counters_.recordsByKind[i] = store_->recordsByKind()[i];
  counters_.abandonedBuffers = store_->abandonedBuffers();
  counters_.abandonedBytes = store_->abandonedBytes();
  uint64_t maxId = store_->maxCorrelationId();
  uint64_t prev = gStaleBelow.load();
  while (maxId > prev && !gStaleBelow.compare_exchange_weak(prev, maxId)) {}
  state_ = "stopped";
  status_ = libkineto::TraceStatus::PROCESSING;
  if (counters_.buffersDeclined > 0)
    warnOnce(fmt::format("{} MSPTI buffer requests were declined at the pool cap of {} (records lost)",
                         counters_.buffersDeclined, config_.bufferPoolCap));
  else if (drain_->exitReason == "timeout")
    warnOnce(fmt::format("the drain timed out after {} ms with {} launches still pending", config_.drainTimeoutMs,
                         drain_->pendingLaunches));
}

std::vector<std::string> MsptiActivityProfilerSession::errors() { return errors_; }

void MsptiActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger) {
  guard(errors_, "processTrace", [&] { process(logger, nullptr, 0, 0); });
}

void MsptiActivityProfilerSession::processTrace(libkineto::ActivityLogger& logger,
                                                libkineto::getLinkedActivityCallback getLinkedActivity,
                                                int64_t startTime, int64_t endTime) {
  guard(errors_, "processTrace", [&] { process(logger, &getLinkedActivity, startTime, endTime); });
}

void MsptiActivityProfilerSession::process(libkineto::ActivityLogger& logger,
                                           const libkineto::getLinkedActivityCallback* linked, int64_t startTime,
                                           int64_t endTime) {
  if (armed_) collect();  // kineto always stops first; be safe if it did not
  if (store_) {
    BuildInput in{store_.get(), linked, startTime, endTime, config_.visibleDevices, &intervals_};
    buildActivities(in, *buffer_, lanes_, counters_);
    for (const auto& act : buffer_->activities) logger.handleActivity(*act);
    // getDeviceInfo() names the first device; the others are named here (kineto.md 6, step 6).
    const auto devices = lanes_.devices();
    for (size_t i = 1; i < devices.size(); ++i) logger.handleDeviceInfo(DeviceLanes::deviceInfo(devices[i]), startNs_);
  }
  if (state_ != "failed") state_ = "processed";
  if (status_ != libkineto::TraceStatus::ERROR) status_ = libkineto::TraceStatus::READY;
  publish(true);
}

std::unique_ptr<libkineto::DeviceInfo> MsptiActivityProfilerSession::getDeviceInfo() {
  try {
    const auto devices = lanes_.devices();
    if (devices.empty()) return nullptr;
    return std::make_unique<libkineto::DeviceInfo>(DeviceLanes::deviceInfo(devices.front()));
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

std::unordered_map<std::string, std::string> MsptiActivityProfilerSession::getMetadata() {
  try {
    return {{"torch_mspti", healthJson()}};
  } catch (...) {
    return {};
  }
}

std::string MsptiActivityProfilerSession::healthJson() const {
  const LibraryReport lib = MsptiLibrary::instance().report();
  JsonWriter w;
  w.beginObject();
  w.beginObject("library")
      .value("available", lib.available)
      .value("path", lib.path)
      .value("found_by", lib.foundBy)
      .value("version", lib.version)
      .value("reason", lib.reason)
      .endObject();
  w.beginArray("enabled_kinds");
  for (auto k : enabledKinds_) w.value(nullptr, kindName(k));
  w.endArray();
  w.value("state", state_);
  w.beginArray("errors");
  for (const auto& e : errors_) w.value(nullptr, e);
  w.endArray();
  // kineto reads the metadata before processTrace, where kernels are linked and filtered: the
  // link statistics are not known yet and are left out rather than reported as zero.
  writeCounters(w, counters_, /*withLinks=*/false);
  if (drain_) writeDrain(w, *drain_);
  w.value("link_statistics", "computed after this report; see torch_mspti.diagnostics() or torch-mspti check");
  w.endObject();
  return w.str();
}

void MsptiActivityProfilerSession::publish(bool final) {
  try {
    if (published_) return;
    SessionReport r{state_, errors_, counters_, drain_};
    StatsRegistry::instance().publish(r, final);
    if (final) published_ = true;
  } catch (...) {}
}

}  // namespace torch_mspti
