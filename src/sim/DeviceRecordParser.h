// MSPTI's parsers writing a device-reported record into the activity buffer (mspti.md 5.3): the
// sink of the driver reader (DeliveryThread), run on its thread or, during Disable's driver flush,
// on the caller's. Decides whether the record still gets written:
//  * dropped when its device task was stopped by Unsubscribe (launched under an earlier or ended
//    subscription; not with option deliver_after_unsubscribe), when its kind is disabled and
//    option drop_after_disable is on, or once the library was torn down at exit;
//  * KERNEL records go through the fault-injection options (bad timing, unknown kinds, duplicates);
//  * external records held back by option reorder_external are written right after it.
// Every dropped record is counted.
#pragma once

#include <atomic>
#include <cstdint>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "DeliveryThread.h"
#include "HostRecords.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "Subscriber.h"

namespace torch_mspti::sim {

struct ParserContext {
  const SimOptions& options;
  SimCounters& counters;
  const ActivitySwitches& switches;
  const Subscriber& subscriber;
  ActivityBuffers& buffers;
  HostRecords& hostRecords;
};

class DeviceRecordParser {
 public:
  explicit DeviceRecordParser(const ParserContext& context) : ctx_(context) {}
  DeviceRecordParser(const DeviceRecordParser&) = delete;
  DeviceRecordParser& operator=(const DeviceRecordParser&) = delete;

  void write(const PendingRecord& pending);

 private:
  void writeKernel(const PendingRecord& pending);

  ParserContext ctx_;
  std::atomic<uint64_t> kernelWrites_{0};  // KERNEL records written (fault-injection cadence)
};

}  // namespace torch_mspti::sim
