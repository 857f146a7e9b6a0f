#include "KernelLauncher.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "SimClock.h"

namespace torch_mspti::sim {

namespace {

constexpr const char* kDefaultKernelType = "KERNEL_AICORE";
// The runtime API the CANN runtime reports for a kernel launch at RUNTIME level.
constexpr const char* kLaunchApiName = "LaunchKernelV2";

uint32_t currentTid() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

}  // namespace

uint64_t& KernelLauncher::threadCurrentId() {
  static thread_local uint64_t currentId = MSPTI_INVALID_CORRELATION_ID;
  return currentId;
}

uint64_t KernelLauncher::launch(const char* name, const char* type, uint32_t device, uint32_t stream,
                                uint64_t durationNs, uint32_t count) {
  if (count == 0) {
    return MSPTI_INVALID_CORRELATION_ID;
  }
  const uint64_t hostStart = realtimeNs();
  const char* typeName = ctx_.names.intern(type == nullptr ? kDefaultKernelType : type);
  const char* kernelName = ctx_.names.intern(name);
  // Only task-track reports whose type starts with "KERNEL" reach the kernel parser (mspti.md 4).
  const bool kernelTask = std::strncmp(typeName, "KERNEL", 6) == 0;
  const bool subscribed = ctx_.subscriber.active();
  const uint64_t epoch = ctx_.subscriber.epoch();

  uint64_t correlationId = MSPTI_INVALID_CORRELATION_ID;
  if (subscribed && kernelTask && ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_KERNEL)) {
    // One id per launch task, process-wide, from 1, never reset (mspti.md 4).
    correlationId = nextCorrelationId_.fetch_add(1, std::memory_order_relaxed);
    threadCurrentId() = correlationId;
  }
  const bool externalOn =
      correlationId != MSPTI_INVALID_CORRELATION_ID && ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  const bool neverDeliver = ctx_.options.flag(Option::kNeverDeliver);
  // Fault injection: hold the external records back and write them with the first kernel.
  const bool reorderExternal = externalOn && ctx_.options.get(Option::kReorderExternal) != 0 && !neverDeliver;
  if (externalOn && !reorderExternal) {
    // Written at launch, so normally before (and possibly in an earlier buffer than) the kernel
    // record, which only appears once the device reports (mspti.md 5.4).
    writeExternalCorrelations(correlationId);
  }

  const uint64_t earliestStart = realtimeNs() + static_cast<uint64_t>(ctx_.options.get(Option::kLaunchLatencyNs));
  const std::vector<KernelSlot> slots = ctx_.timeline.place(device, stream, earliestStart, durationNs, count);
  SimCounters::add(ctx_.counters.kernelsLaunched, count);

  // No device task reads the channel: the device's data never reaches MSPTI (counted as dropped
  // here so that a test can tell).
  const bool deviceReports = ctx_.switches.kernelTasksRunning() || !ctx_.options.flag(Option::kEnableAfterSubscribe);
  if (correlationId != MSPTI_INVALID_CORRELATION_ID && (!deviceReports || neverDeliver)) {
    SimCounters::add(ctx_.counters.recordsDropped, slots.size());
  }
  if (correlationId != MSPTI_INVALID_CORRELATION_ID && deviceReports && !neverDeliver) {
    const uint64_t delay = static_cast<uint64_t>(ctx_.options.get(Option::kDeliveryDelayNs));
    const uint32_t physical = ctx_.environment.physicalDevice(device);
    std::vector<PendingKernel> pending;
    pending.reserve(slots.size());
    for (const KernelSlot& slot : slots) {
      PendingKernel kernel{};
      kernel.dueNs = slot.end + delay;
      kernel.epoch = epoch;
      kernel.record.kind = MSPTI_ACTIVITY_KIND_KERNEL;
      kernel.record.start = slot.start;
      kernel.record.end = slot.end;
      kernel.record.ds.deviceId = physical;  // physical id, not the logical index (mspti.md 4)
      kernel.record.ds.streamId = stream;
      kernel.record.correlationId = correlationId;
      kernel.record.type = typeName;
      kernel.record.name = kernelName;
      pending.push_back(kernel);
    }
    if (reorderExternal && !pending.empty()) {
      PendingKernel& first = pending.front();
      for (const auto& [kind, top] : ctx_.externalCorrelation.tops(ctx_.options.flag(Option::kPerThreadStacks))) {
        if (first.externalCount < PendingKernel::kMaxExternals) {
          first.externalKinds[first.externalCount] = kind;
          first.externalIds[first.externalCount] = top;
          ++first.externalCount;
        }
      }
    }
    ctx_.delivery.schedule(std::move(pending));
  }

  // API records come from profapi callbacks registered by Subscribe, so they need a subscriber.
  if (subscribed) {
    writeApiRecord(hostStart);
  }
  return correlationId;
}

void KernelLauncher::writeExternalCorrelations(uint64_t correlationId) {
  const bool perThread = ctx_.options.flag(Option::kPerThreadStacks);
  // One record per kind whose stack is non-empty, externalId = its top (mspti.md 5.4).
  for (const auto& [kind, top] : ctx_.externalCorrelation.tops(perThread)) {
    writeExternalRecord(kind, top, correlationId);
  }
}

void KernelLauncher::writeExternalRecord(uint32_t kind, uint64_t externalId, uint64_t correlationId) {
  msptiActivityExternalCorrelation record{};
  record.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  record.externalKind = static_cast<msptiExternalCorrelationKind>(kind);
  record.externalId = externalId;
  record.correlationId = correlationId;
  if (ctx_.buffers.record(&record, sizeof(record))) {
    SimCounters::add(ctx_.counters.externalRecords);
  }
}

void KernelLauncher::writeApiRecord(uint64_t hostStartNs) {
  // RUNTIME level maps to RUNTIME_API in 26.x; the older API kind is still accepted
  // (mspti.md 3.2). One record per launch, RUNTIME_API preferred.
  msptiActivityKind kind;
  if (ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_RUNTIME_API)) {
    kind = MSPTI_ACTIVITY_KIND_RUNTIME_API;
  } else if (ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_API)) {
    kind = MSPTI_ACTIVITY_KIND_API;
  } else {
    return;
  }
  msptiActivityApi record{};
  record.kind = kind;
  record.start = hostStartNs;
  record.end = realtimeNs();
  record.pt.processId = static_cast<uint32_t>(::getpid());
  record.pt.threadId = currentTid();
  // The thread's current id: this launch's if it minted one, else the last one it minted.
  record.correlationId = threadCurrentId();
  record.name = ctx_.names.intern(kLaunchApiName);
  if (ctx_.buffers.record(&record, sizeof(record))) {
    SimCounters::add(ctx_.counters.apiRecords);
  }
}

void KernelLauncher::writeKernelRecord(const PendingKernel& kernel) {
  // Launched under an earlier subscription: its device task was stopped by Unsubscribe.
  const bool staleTask = !ctx_.subscriber.active() || ctx_.subscriber.epoch() != kernel.epoch;
  // Parser stopped by Disable(KERNEL) (option drop_after_disable).
  const bool parserStopped =
      !ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_KERNEL) && ctx_.options.flag(Option::kDropAfterDisable);
  if (staleTask || parserStopped) {
    SimCounters::add(ctx_.counters.recordsDropped);
    return;
  }
  // Fault injection: the record as a faulty driver or parser would write it.
  const uint64_t nth = kernelWrites_.fetch_add(1, std::memory_order_relaxed) + 1;
  msptiActivityKernel record = kernel.record;
  const auto badEvery = static_cast<uint64_t>(ctx_.options.get(Option::kBadTimingEvery));
  if (badEvery != 0 && nth % badEvery == 0) {
    if ((nth / badEvery) % 2 == 1) {
      record.start = 0;  // zero timing
      record.end = 0;
    } else {
      record.start = kernel.record.end;  // inverted timing
      record.end = kernel.record.start;
    }
  }
  const auto unknownEvery = static_cast<uint64_t>(ctx_.options.get(Option::kUnknownKindEvery));
  if (unknownEvery != 0 && nth % unknownEvery == 0) {
    // A record no MSPTI generation knows: a reader cannot size it, so nothing after it in that
    // buffer can be walked (mspti.md 2.3: GetNextRecord answers INNER).
    uint8_t unknown[sizeof(msptiActivityKernel)] = {};
    const int32_t kind = 99;
    std::memcpy(unknown, &kind, sizeof(kind));
    ctx_.buffers.record(unknown, sizeof(unknown));
  }
  const int copies = ctx_.options.flag(Option::kDuplicateKernelRecords) ? 2 : 1;
  for (int i = 0; i < copies; ++i) {
    if (ctx_.buffers.record(&record, sizeof(record))) {
      SimCounters::add(ctx_.counters.kernelRecords);
    }
  }
  if (kernel.externalCount > 0) {
    // reorder_external: after the kernel record, and with 2 in a later buffer than it.
    if (ctx_.options.get(Option::kReorderExternal) == 2) {
      ctx_.buffers.retireCurrent();
    }
    for (int i = 0; i < kernel.externalCount; ++i) {
      writeExternalRecord(kernel.externalKinds[i], kernel.externalIds[i], kernel.record.correlationId);
    }
  }
}

}  // namespace torch_mspti::sim
