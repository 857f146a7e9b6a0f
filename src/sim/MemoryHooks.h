// The interposed ACL allocation calls (aclrtMalloc, aclrtFree and their variants) and the MEMORY
// records they write, as MSPTI's hooks do (mspti.md 5.8):
//  * the hooks exist only when libmspti.so was preloaded (mspti.md 5.5) and in generations that
//    know MEMORY (8.1 and newer); without them a call writes no MEMORY record and mints nothing;
//  * with them, while subscribed, the call mints the thread's current correlation id (and writes
//    the EXTERNAL_CORRELATION records of the new id), then, as it returns and only if MEMORY is on
//    at that moment, writes one msptiActivityMemory at once: the call's host span (CLOCK_REALTIME
//    ns), the address, the bytes, memoryKind DEVICE, the process id, the calling thread's current
//    device, and no stream (MSPTI_INVALID_STREAM_ID);
//  * a release reports the bytes of the allocation recorded at that address while MEMORY was on,
//    and 0 bytes for an address allocated before (MSPTI keeps that map only for what it recorded);
//  * while subscribed with an API kind on, an API record names the call ("aclrtMalloc" /
//    "aclrtFree") and carries the thread's current id.
// Thread-safety: thread-safe (the address map has its own lock; the rest is the simulator's).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "CorrelationIds.h"
#include "Environment.h"
#include "HostRecords.h"
#include "SimCounters.h"
#include "Subscriber.h"

namespace torch_mspti::sim {

struct MemoryHookContext {
  SimCounters& counters;
  const Environment& environment;
  const ActivitySwitches& switches;
  const Subscriber& subscriber;
  CorrelationIds& ids;
  HostRecords& hostRecords;
  ActivityBuffers& buffers;
};

class MemoryHooks {
 public:
  explicit MemoryHooks(const MemoryHookContext& context) : ctx_(context) {}
  MemoryHooks(const MemoryHooks&) = delete;
  MemoryHooks& operator=(const MemoryHooks&) = delete;

  // One allocation (operation MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) or release
  // (RELEASE) of `bytes` at device address `address` on physical device `deviceId`. Returns the
  // minted correlation id, or 0 when none was minted.
  uint64_t call(uint32_t operation, uint64_t address, uint64_t bytes, uint32_t deviceId);

 private:
  MemoryHookContext ctx_;
  std::mutex mutex_;
  std::unordered_map<uint64_t, uint64_t> recorded_;  // address -> bytes, allocations recorded while MEMORY was on
};

}  // namespace torch_mspti::sim
