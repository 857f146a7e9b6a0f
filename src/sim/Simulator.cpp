#include "Simulator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "CallbackContext.h"
#include "ForeignBuffer.h"
#include "SimClock.h"

namespace torch_mspti::sim {

namespace {

// The driver channels a kind's Disable flushes (mspti.md 2.3): KERNEL the STARS SOC log,
// COMMUNICATION the TS_FW channel and the SOC log, MARKER and HCCL the TS_FW channel.
enum Channel : uint32_t { kNoChannel = 0, kSocLog = 1U << 0, kTsFw = 1U << 1 };

uint32_t channelsFlushedOnDisable(int kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL: return kSocLog;
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return kTsFw | kSocLog;
    case MSPTI_ACTIVITY_KIND_MARKER:
    case MSPTI_ACTIVITY_KIND_HCCL: return kTsFw;
    default: return kNoChannel;
  }
}

// The records each channel carries in the simulator: kernel and communication records travel on
// the SOC log. Device markers are written at the call (MstxMarkers.h) and HCCL records are not
// simulated, so the TS_FW channel never holds a record here and its flush returns at once.
uint32_t kindsCarriedBy(uint32_t channel) {
  return channel == kSocLog ? (1U << MSPTI_ACTIVITY_KIND_KERNEL) | (1U << MSPTI_ACTIVITY_KIND_COMMUNICATION) : 0U;
}

}  // namespace

Simulator& Simulator::instance() {
  // Deliberately leaked: never destroyed, so no thread can see it half torn down at exit.
  static Simulator* const simulator = new Simulator();
  return *simulator;
}

Simulator::Simulator()
    : buffers_(options_, counters_),
      hostRecords_(
          HostRecordContext{options_, counters_, switches_, subscriber_, externalCorrelation_, buffers_, names_}),
      parser_(ParserContext{options_, counters_, switches_, subscriber_, buffers_, hostRecords_}),
      delivery_([this](const PendingRecord& record) { parser_.write(record); }),
      launcher_(LaunchContext{options_, counters_, environment_, switches_, subscriber_, externalCorrelation_,
                              timeline_, deviceClock_, ids_, hostRecords_, delivery_, parser_}),
      runtime_(options_, launcher_, hostRecords_, names_, environment_),
      memoryHooks_(MemoryHookContext{counters_, environment_, switches_, subscriber_, ids_, hostRecords_, buffers_}),
      markers_(MarkerContext{counters_, switches_, timeline_, environment_, buffers_, names_, hostRecords_}) {}

msptiResult Simulator::subscribe(msptiSubscriberHandle* handle, msptiCallbackFunc callback, void* userdata) {
  const msptiResult r = subscriber_.subscribe(handle, callback, userdata);
  if (r == MSPTI_SUCCESS) subscribedAtNs_.store(realtimeNs(), std::memory_order_relaxed);
  return r;
}

msptiResult Simulator::unsubscribe(msptiSubscriberHandle handle) {
  // Stops the device tasks: records the device has not reported yet are lost (unless option
  // deliver_after_unsubscribe keeps them flowing into whatever is registered later). No buffer is
  // delivered; FlushAll is still needed afterwards (mspti.md 2.2, 5.6).
  return subscriber_.unsubscribe(handle, [this] {
    switches_.stopAllDeviceTasks();
    if (!options_.flag(Option::kDeliverAfterUnsubscribe)) {
      SimCounters::add(counters_.recordsDropped, delivery_.discardAll());
    }
    // unsubscribe_poll_ns (mspti.md 2.2): MSPTI then joins its channel poller, which sits in the
    // driver's poll until that poll times out (a poll restarts whenever one returned data), all
    // under the subscriber lock, so a Subscribe meanwhile waits.
    const auto period = static_cast<uint64_t>(options_.get(Option::kUnsubscribePollNs));
    if (period != 0) {
      const uint64_t now = realtimeNs();
      const uint64_t since = std::max(delivery_.lastHandOverNs(), subscribedAtNs_.load(std::memory_order_relaxed));
      sleepForNs(period - (now > since ? (now - since) % period : 0));
    }
  });
}

msptiResult Simulator::enable(int kind) {
  if (!ActivitySwitches::isValidKind(kind)) {
    return MSPTI_ERROR_INVALID_PARAMETER;
  }
  if (ActivitySwitches::needsLdPreload(kind) && !environment_.ldPreloadHasMspti()) {
    return MSPTI_ERROR_WITHOUT_LD_PRELOAD;
  }
  switches_.set(kind, true);
  if (subscriber_.active()) {
    switches_.setDeviceTasksRunning(kind, true);  // KERNEL and COMMUNICATION have device tasks
  }
  return MSPTI_SUCCESS;
}

msptiResult Simulator::disable(int kind) {
  if (!ActivitySwitches::isValidKind(kind)) {
    return MSPTI_ERROR_INVALID_PARAMETER;
  }
  // The driver flush channels exist only while subscribed, and only for a kind that is on.
  const uint32_t channels = channelsFlushedOnDisable(kind);
  if (channels != kNoChannel && switches_.isOn(kind) && subscriber_.active() && options_.flag(Option::kDisablePulls)) {
    if (CallbackScope::holdsBufferLock()) {
      abortOnReentry("msptiActivityDisable", "its driver flush records under the buffer mutex MSPTI already holds");
    }
    // MSPTI flushes each channel of the kind in turn (halProfDataFlush) and waits until its
    // reader has read what the driver held (up to 20 ms, driver_flush_ns; an empty channel returns
    // at once); tasks still running are not waited for. The reader parses what it read after that
    // wait, on its own thread, while this Disable goes on to clear the switch: a record parsed
    // after its kind was disabled is dropped (parse_after_pull_ns; 0 parses here, before the
    // switch is cleared: mspti.md 2.3).
    const auto flushNs = static_cast<uint64_t>(options_.get(Option::kDriverFlushNs));
    const auto parseNs = static_cast<uint64_t>(options_.get(Option::kParseAfterPullNs));
    for (uint32_t channel : {kTsFw, kSocLog}) {
      if ((channels & channel) == 0) continue;
      const uint32_t kinds = kindsCarriedBy(channel);
      const uint64_t now = realtimeNs();
      if (kinds != 0 && delivery_.pullEnded(now, kinds, parseNs == 0 ? 0 : now + flushNs + parseNs) > 0) {
        sleepForNs(flushNs);
      }
    }
  }
  // Then the parser stops and the switch is cleared.
  switches_.set(kind, false);
  switches_.setDeviceTasksRunning(kind, false);
  return MSPTI_SUCCESS;
}

msptiResult Simulator::pushExternalCorrelationId(uint32_t kind, uint64_t id) {
  return externalCorrelation_.push(kind, id, options_.flag(Option::kPerThreadStacks));
}

msptiResult Simulator::popExternalCorrelationId(uint32_t kind, uint64_t* lastId) {
  return externalCorrelation_.pop(kind, lastId, options_.flag(Option::kPerThreadStacks));
}

int Simulator::completeForeignBuffer(uint32_t kernels, bool onNewThread) {
  return sim::completeForeignBuffer(buffers_, ids_, names_, environment_, counters_, kernels, onNewThread,
                                    static_cast<uint64_t>(options_.get(Option::kForeignCorrelationId)));
}

void Simulator::fillStats(msptiSimStats* out) const {
  if (out == nullptr) {
    return;
  }
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  out->kernels_launched = get(counters_.kernelsLaunched);
  out->kernel_records = get(counters_.kernelRecords);
  out->external_records = get(counters_.externalRecords);
  out->api_records = get(counters_.apiRecords);
  out->records_dropped = get(counters_.recordsDropped);
  out->records_pending = delivery_.pending();
  out->buffers_requested = get(counters_.buffersRequested);
  out->buffers_declined = get(counters_.buffersDeclined);
  out->buffers_completed = get(counters_.buffersCompleted);
  out->external_stack_depth = externalCorrelation_.globalDepth(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
}

uint64_t Simulator::counter(const char* name) const {
  if (name == nullptr) {
    return UINT64_MAX;
  }
  msptiSimStats stats{};
  fillStats(&stats);
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  const std::pair<const char*, uint64_t> all[] = {
      {"kernels_launched", stats.kernels_launched},     {"kernel_records", stats.kernel_records},
      {"external_records", stats.external_records},     {"api_records", stats.api_records},
      {"records_dropped", stats.records_dropped},       {"records_pending", stats.records_pending},
      {"buffers_requested", stats.buffers_requested},   {"buffers_declined", stats.buffers_declined},
      {"buffers_completed", stats.buffers_completed},   {"external_stack_depth", stats.external_stack_depth},
      {"device_tasks", get(counters_.deviceTasks)},     {"communication_records", get(counters_.communicationRecords)},
      {"memcpy_records", get(counters_.memcpyRecords)}, {"memory_records", get(counters_.memoryRecords)},
      {"memset_records", get(counters_.memsetRecords)}, {"foreign_buffers", get(counters_.foreignBuffers)},
      {"marker_records", get(counters_.markerRecords)},
  };
  for (const auto& [key, value] : all) {
    if (std::strcmp(key, name) == 0) {
      return value;
    }
  }
  return UINT64_MAX;
}

}  // namespace torch_mspti::sim
