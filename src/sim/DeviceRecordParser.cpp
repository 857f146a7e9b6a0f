#include "DeviceRecordParser.h"

#include <cstring>

#include "Teardown.h"

namespace torch_mspti::sim {

namespace {

std::atomic<uint64_t>& recordCounter(SimCounters& counters, int kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return counters.communicationRecords;
    case MSPTI_ACTIVITY_KIND_MEMCPY: return counters.memcpyRecords;
    case MSPTI_ACTIVITY_KIND_MEMSET: return counters.memsetRecords;
    default: return counters.kernelRecords;
  }
}

}  // namespace

void DeviceRecordParser::write(const PendingRecord& pending) {
  const int kind = kindOf(pending.record);
  // Launched under an earlier subscription: its device task was stopped by Unsubscribe (unless
  // option deliver_after_unsubscribe: an MSPTI that keeps delivering into the next session).
  const bool staleTask = !ctx_.options.flag(Option::kDeliverAfterUnsubscribe) &&
                         (!ctx_.subscriber.active() || ctx_.subscriber.epoch() != pending.epoch);
  // Parser stopped by Disable of the record's kind (option drop_after_disable).
  const bool parserStopped = !ctx_.switches.isOn(kind) && ctx_.options.flag(Option::kDropAfterDisable);
  // Static destruction tore the library down at process exit (option destroy_at_exit).
  if (staleTask || parserStopped || tornDown()) {
    SimCounters::add(ctx_.counters.recordsDropped);
    return;
  }
  if (kind == MSPTI_ACTIVITY_KIND_KERNEL) {
    writeKernel(pending);
  } else if (ctx_.buffers.record(&pending.record, sizeOf(pending.record))) {
    SimCounters::add(recordCounter(ctx_.counters, kind));
  }
  if (pending.externalCount > 0) {
    // reorder_external: after the device record, and with 2 in a later buffer than it.
    if (ctx_.options.get(Option::kReorderExternal) == 2) {
      ctx_.buffers.retireCurrent();
    }
    for (int i = 0; i < pending.externalCount; ++i) {
      ctx_.hostRecords.writeExternalRecord(pending.externalKinds[i], pending.externalIds[i],
                                           correlationIdOf(pending.record));
    }
  }
}

void DeviceRecordParser::writeKernel(const PendingRecord& pending) {
  // Fault injection: the record as a faulty driver or parser would write it.
  const uint64_t nth = kernelWrites_.fetch_add(1, std::memory_order_relaxed) + 1;
  msptiActivityKernel record = pending.record.kernel;
  const auto badEvery = static_cast<uint64_t>(ctx_.options.get(Option::kBadTimingEvery));
  if (badEvery != 0 && nth % badEvery == 0) {
    if ((nth / badEvery) % 2 == 1) {
      record.start = 0;  // zero timing
      record.end = 0;
    } else {
      record.start = pending.record.kernel.end;  // inverted timing
      record.end = pending.record.kernel.start;
    }
  }
  const auto unknownEvery = static_cast<uint64_t>(ctx_.options.get(Option::kUnknownKindEvery));
  if (unknownEvery != 0 && nth % unknownEvery == 0) {
    // A record no MSPTI generation knows: a reader cannot size it, so nothing after it in that
    // buffer can be walked (mspti.md 2.3: GetNextRecord answers INNER).
    uint8_t unknown[sizeof(msptiActivityKernel)] = {};
    const int32_t unknownKind = 99;
    std::memcpy(unknown, &unknownKind, sizeof(unknownKind));
    ctx_.buffers.record(unknown, sizeof(unknown));
  }
  const int copies = ctx_.options.flag(Option::kDuplicateKernelRecords) ? 2 : 1;
  for (int i = 0; i < copies; ++i) {
    if (ctx_.buffers.record(&record, sizeof(record))) {
      SimCounters::add(ctx_.counters.kernelRecords);
    }
  }
}

}  // namespace torch_mspti::sim
