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
    // Written at launch, so normally before (and possibly in an earlier buffer than) the kernel
    // record, which only appears once the device reports (mspti.md 5.4).
    if (ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION)) {
      writeExternalCorrelations(correlationId);
    }
  }

  const uint64_t earliestStart = realtimeNs() + static_cast<uint64_t>(ctx_.options.get(Option::kLaunchLatencyNs));
  const std::vector<KernelSlot> slots = ctx_.timeline.place(device, stream, earliestStart, durationNs, count);
  SimCounters::add(ctx_.counters.kernelsLaunched, count);

  // No device task reads the channel: the device's data never reaches MSPTI (counted as dropped
  // here so that a test can tell).
  const bool deviceReports =
      ctx_.switches.kernelTasksRunning() || !ctx_.options.flag(Option::kEnableAfterSubscribe);
  if (correlationId != MSPTI_INVALID_CORRELATION_ID && !deviceReports) {
    SimCounters::add(ctx_.counters.recordsDropped, slots.size());
  }
  if (correlationId != MSPTI_INVALID_CORRELATION_ID && deviceReports) {
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
    msptiActivityExternalCorrelation record{};
    record.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    record.externalKind = static_cast<msptiExternalCorrelationKind>(kind);
    record.externalId = top;
    record.correlationId = correlationId;
    if (ctx_.buffers.record(&record, sizeof(record))) {
      SimCounters::add(ctx_.counters.externalRecords);
    }
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
  if (ctx_.buffers.record(&kernel.record, sizeof(kernel.record))) {
    SimCounters::add(ctx_.counters.kernelRecords);
  }
}

}  // namespace torch_mspti::sim
