#include "MemoryHooks.h"

#include <unistd.h>

#include "SimClock.h"

namespace torch_mspti::sim {

uint64_t MemoryHooks::call(uint32_t operation, uint64_t address, uint64_t bytes, uint32_t deviceId) {
  const bool release = operation == MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  const char* api = release ? "aclrtFree" : "aclrtMalloc";
  const uint64_t apiStart = ctx_.hostRecords.apiNow();
  const bool subscribed = ctx_.subscriber.active();
  // The hooks came with the kind (8.1) and are there only with the preload (mspti.md 5.5).
  const bool hooked = ActivitySwitches::isValidKind(MSPTI_ACTIVITY_KIND_MEMORY) && ctx_.environment.ldPreloadHasMspti();
  uint64_t correlationId = MSPTI_INVALID_CORRELATION_ID;
  if (subscribed && hooked) {
    correlationId = ctx_.ids.mintForThisThread();
    ctx_.hostRecords.writeExternalCorrelations(correlationId);
  }
  const uint64_t start = realtimeNs();
  // (the runtime's own allocation happens here)
  const uint64_t end = realtimeNs();
  if (correlationId != MSPTI_INVALID_CORRELATION_ID && ctx_.switches.isOn(MSPTI_ACTIVITY_KIND_MEMORY)) {
    uint64_t reported = bytes;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = recorded_.find(address);
      if (release) {
        reported = it == recorded_.end() ? 0 : it->second;
        if (it != recorded_.end()) recorded_.erase(it);
      } else {
        recorded_[address] = bytes;
      }
    }
    msptiActivityMemory record{};
    record.kind = MSPTI_ACTIVITY_KIND_MEMORY;
    record.memoryOperationType =
        release ? MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE : MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    record.memoryKind = MSPTI_ACTIVITY_MEMORY_DEVICE;
    record.correlationId = correlationId;
    record.start = ctx_.hostRecords.onHostClock(start);  // MSPTI's host clock (mspti.md 5.8)
    record.end = ctx_.hostRecords.onHostClock(end);
    record.address = address;
    record.bytes = reported;
    record.processId = static_cast<uint32_t>(::getpid());
    record.deviceId = deviceId;
    record.streamId = MSPTI_INVALID_STREAM_ID;
    if (ctx_.buffers.record(&record, sizeof(record))) SimCounters::add(ctx_.counters.memoryRecords);
  }
  if (subscribed) ctx_.hostRecords.writeApi(api, apiStart, ctx_.hostRecords.apiNow());
  return correlationId;
}

}  // namespace torch_mspti::sim
