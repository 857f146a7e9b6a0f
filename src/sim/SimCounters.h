// Counters behind msptiSimGetStats and msptiSimGetCounter. The real library keeps only a drop
// total it writes to the plog at exit (mspti.md 2.1); the simulator exposes its counters so tests
// can assert on them.
#pragma once

#include <atomic>
#include <cstdint>

namespace torch_mspti::sim {

struct SimCounters {
  std::atomic<uint64_t> kernelsLaunched{0};  // kernel tasks placed on the timeline
  std::atomic<uint64_t> deviceTasks{0};      // every task placed: kernels, collectives, copies, memsets
  std::atomic<uint64_t> kernelRecords{0};
  std::atomic<uint64_t> communicationRecords{0};
  std::atomic<uint64_t> memcpyRecords{0};
  std::atomic<uint64_t> memsetRecords{0};
  std::atomic<uint64_t> memoryRecords{0};
  std::atomic<uint64_t> externalRecords{0};
  std::atomic<uint64_t> apiRecords{0};
  std::atomic<uint64_t> markerRecords{0};  // MARKER records written (host and device)
  std::atomic<uint64_t> recordsDropped{0};
  std::atomic<uint64_t> buffersRequested{0};
  std::atomic<uint64_t> buffersDeclined{0};
  std::atomic<uint64_t> buffersCompleted{0};
  std::atomic<uint64_t> foreignBuffers{0};  // msptiSimCompleteForeignBuffer deliveries

  static void add(std::atomic<uint64_t>& counter, uint64_t n = 1) { counter.fetch_add(n, std::memory_order_relaxed); }
};

}  // namespace torch_mspti::sim
