#include "TaskLauncher.h"

#include <iterator>
#include <vector>

#include "SimClock.h"

namespace torch_mspti::sim {

namespace {

// Runtime calls around a kernel launch (option api_records_per_launch), by the names the CANN
// runtime registers for its RUNTIME-level API records (CANN runtime profiling_agent.cpp, the
// table that also holds "LaunchKernelV2"): argument set-up before the launch, bookkeeping after.
constexpr const char* kCallsBeforeLaunch[] = {"ContextGetCurrent", "KernelArgsInit", "KernelArgsApendPlaceHolder",
                                              "KernelArgsFinalize"};
constexpr const char* kCallsAfterLaunch[] = {"CacheLastTaskOpInfo", "StreamSynchronize"};

}  // namespace

bool TaskLauncher::deviceReports(int kind) const {
  if (kind != MSPTI_ACTIVITY_KIND_KERNEL && kind != MSPTI_ACTIVITY_KIND_COMMUNICATION) {
    return true;  // copies and memsets are reported by the interposed ACL memory calls on the host
  }
  // Older CANN discovers devices only through the preloaded library (option kernels_need_preload,
  // mspti.md 5.5): no device known, no device task.
  if (ctx_.options.flag(Option::kKernelsNeedPreload) && !ctx_.environment.ldPreloadHasMspti()) {
    return false;
  }
  // KERNEL and COMMUNICATION need the device tasks Enable starts (mspti.md 2.3, 5.6).
  return ctx_.switches.deviceTasksRunning(kind) || !ctx_.options.flag(Option::kEnableAfterSubscribe);
}

void TaskLauncher::reportTiming(DeviceRecord& record, const TaskSlot& slot) const {
  // MSPTI writes copies and memsets from the interposed ACL call, on its host clock (mspti.md
  // 5.7): no device clock applies to them, and with api_clock=1 they are on CLOCK_MONOTONIC_RAW
  // like the API records.
  const int kind = kindOf(record);
  if (kind == MSPTI_ACTIVITY_KIND_MEMSET || kind == MSPTI_ACTIVITY_KIND_MEMCPY) {
    setTiming(record, ctx_.hostRecords.onHostClock(slot.start), ctx_.hostRecords.onHostClock(slot.end));
    return;
  }
  uint64_t start = ctx_.deviceClock.report(slot.start);
  const uint64_t end = ctx_.deviceClock.report(slot.end);
  // A reported early start overlaps the previous task of a busy stream (option early_start_every).
  const auto every = static_cast<uint64_t>(ctx_.options.get(Option::kEarlyStartEvery));
  if (every != 0 && slot.ordinal % every == 0) {
    const auto early = static_cast<uint64_t>(ctx_.options.get(Option::kEarlyStartNs));
    start = start > early ? start - early : 0;
  }
  setTiming(record, start, end);
}

void TaskLauncher::writeRuntimeCalls(const char* const* names, size_t nameCount, uint32_t count) {
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t start = ctx_.hostRecords.apiNow();
    ctx_.hostRecords.writeApi(names[i % nameCount], start, ctx_.hostRecords.apiNow());
  }
}

void TaskLauncher::writeAtCallEnd(const DeviceTask& task, uint64_t correlationId, uint64_t epoch, uint64_t startNs,
                                  bool withExternals) {
  PendingRecord record{};
  record.epoch = epoch;
  record.record = task.prototype;
  record.endNs = realtimeNs();
  record.dueNs = record.endNs;
  // Host span of the call on MSPTI's host clock; the device clock does not apply (no device
  // timestamp is involved).
  setTiming(record.record, ctx_.hostRecords.onHostClock(startNs), ctx_.hostRecords.onHostClock(record.endNs));
  setPlacement(record.record, ctx_.environment.physicalDevice(task.device), task.stream, correlationId);
  if (withExternals) {
    for (const auto& [externalKind, top] : ctx_.externalCorrelation.tops(ctx_.options.flag(Option::kPerThreadStacks))) {
      if (record.externalCount < PendingRecord::kMaxExternals) {
        record.externalKinds[record.externalCount] = externalKind;
        record.externalIds[record.externalCount] = top;
        ++record.externalCount;
      }
    }
  }
  // Same checks as a device record (kind still on at the end of the call, same subscription).
  ctx_.parser.write(record);
}

uint64_t TaskLauncher::launch(const DeviceTask& task) {
  if (task.count == 0) {
    return MSPTI_INVALID_CORRELATION_ID;
  }
  const int kind = kindOf(task.prototype);
  const uint64_t hostStart = ctx_.hostRecords.apiNow();
  const bool subscribed = ctx_.subscriber.active();
  const uint64_t epoch = ctx_.subscriber.epoch();
  if (subscribed) {
    writeRuntimeCalls(kCallsBeforeLaunch, std::size(kCallsBeforeLaunch), task.callsBefore);
  }

  uint64_t correlationId = MSPTI_INVALID_CORRELATION_ID;
  // A kernel's id is minted by the kernel parser, only while KERNEL is on (mspti.md 4); a copy's
  // or memset's by the interposed ACL memory call itself, whether or not its kind is collected.
  const bool kindOn = ctx_.switches.isOn(kind);
  const bool hookMints = (kind == MSPTI_ACTIVITY_KIND_MEMCPY || kind == MSPTI_ACTIVITY_KIND_MEMSET) &&
                         ActivitySwitches::isValidKind(kind);  // the hooks came with the kinds (8.1)
  if (subscribed && task.reportable && (kindOn || hookMints)) {
    correlationId = ctx_.ids.mintForThisThread();
  }
  const bool minted = correlationId != MSPTI_INVALID_CORRELATION_ID;
  const bool externalOn = minted && ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  const bool neverDeliver = ctx_.options.flag(Option::kNeverDeliver);
  // Fault injection: hold the external records back and write them with the first device record.
  const bool reorderExternal = externalOn && ctx_.options.get(Option::kReorderExternal) != 0 && !neverDeliver;
  if (externalOn && !reorderExternal) {
    // Written at launch, so normally before (and possibly in an earlier buffer than) the device
    // record, which only appears once the device reports (mspti.md 5.4).
    ctx_.hostRecords.writeExternalCorrelations(correlationId);
  }
  // The interposed ACL memory call takes the copy's start after minting, just before the runtime
  // call, on the host clock MSPTI uses for its own records (CLOCK_REALTIME, mspti.md 5.7).
  const bool copyAtCallEnd = kind == MSPTI_ACTIVITY_KIND_MEMCPY && ctx_.options.flag(Option::kCopiesAtCallEnd);
  const uint64_t copyStart = realtimeNs();

  const uint64_t earliestStart = realtimeNs() + static_cast<uint64_t>(ctx_.options.get(Option::kLaunchLatencyNs));
  const std::vector<TaskSlot> slots =
      ctx_.timeline.place(task.device, task.stream, earliestStart, task.durationNs, task.count);
  SimCounters::add(ctx_.counters.deviceTasks, slots.size());
  if (kind == MSPTI_ACTIVITY_KIND_KERNEL) {
    SimCounters::add(ctx_.counters.kernelsLaunched, slots.size());
  }

  if (minted && !kindOn) {
    // the id exists (and its external records), but nothing records the copy
  } else if (minted && (!deviceReports(kind) || neverDeliver)) {
    // Nothing reads the device's data, so it never reaches MSPTI (counted so that a test can tell).
    SimCounters::add(ctx_.counters.recordsDropped, slots.size());
  } else if (minted && copyAtCallEnd) {
    // written below, when the call returns
  } else if (minted) {
    const uint64_t delay = static_cast<uint64_t>(ctx_.options.get(Option::kDeliveryDelayNs));
    const uint32_t physical = ctx_.environment.physicalDevice(task.device);
    std::vector<PendingRecord> pending;
    pending.reserve(slots.size());
    for (const TaskSlot& slot : slots) {
      PendingRecord record{};
      record.dueNs = slot.end + delay;
      record.epoch = epoch;
      record.endNs = slot.end;
      record.record = task.prototype;
      reportTiming(record.record, slot);
      setPlacement(record.record, physical, task.stream, correlationId);  // physical id (mspti.md 4)
      pending.push_back(record);
    }
    if (reorderExternal) {
      PendingRecord& first = pending.front();
      for (const auto& [externalKind, top] :
           ctx_.externalCorrelation.tops(ctx_.options.flag(Option::kPerThreadStacks))) {
        if (first.externalCount < PendingRecord::kMaxExternals) {
          first.externalKinds[first.externalCount] = externalKind;
          first.externalIds[first.externalCount] = top;
          ++first.externalCount;
        }
      }
    }
    ctx_.delivery.schedule(std::move(pending));
  }

  if (task.hostWaits && !slots.empty()) {
    sleepUntilRealtimeNs(slots.back().end);
  }
  if (minted && kindOn && copyAtCallEnd && deviceReports(kind) && !neverDeliver) {
    writeAtCallEnd(task, correlationId, epoch, copyStart, reorderExternal);
  }
  if (subscribed) {
    ctx_.hostRecords.writeApi(task.apiName, hostStart, ctx_.hostRecords.apiNow());
    writeRuntimeCalls(kCallsAfterLaunch, std::size(kCallsAfterLaunch), task.callsAfter);
  }
  return correlationId;
}

}  // namespace torch_mspti::sim
