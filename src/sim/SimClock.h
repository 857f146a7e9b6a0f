// Clock helpers shared by the simulator's threads.
//
// Every time the simulator hands out is CLOCK_REALTIME ns since the Unix epoch, the base MSPTI
// uses for host and device records (mspti.md 4), unless a harsh mode says otherwise (api_clock,
// DeviceClock). Waits on condition variables use steady_clock
// deadlines derived from a CLOCK_REALTIME target, so no thread ever spins.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace torch_mspti::sim {

constexpr uint64_t kNsPerSecond = 1000000000ULL;

inline uint64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSecond + static_cast<uint64_t>(ts.tv_nsec);
}

// CLOCK_MONOTONIC_RAW ns: what some MSPTI builds put into API records instead of epoch ns when
// the host oscillator frequency was unavailable (mspti.md 4, fixes 990582b, 7722b61).
inline uint64_t monotonicRawNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kNsPerSecond + static_cast<uint64_t>(ts.tv_nsec);
}

// Sleeps until CLOCK_REALTIME reaches `targetNs` (absolute, so EINTR restarts lose nothing).
inline void sleepUntilRealtimeNs(uint64_t targetNs) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(targetNs / kNsPerSecond);
  ts.tv_nsec = static_cast<long>(targetNs % kNsPerSecond);
  while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, nullptr) == EINTR) {}
}

inline void sleepForNs(uint64_t ns) {
  if (ns > 0) {
    sleepUntilRealtimeNs(realtimeNs() + ns);
  }
}

// steady_clock deadline matching the CLOCK_REALTIME instant `targetNs` (now if already past).
inline std::chrono::steady_clock::time_point steadyDeadlineFor(uint64_t targetNs) {
  const uint64_t now = realtimeNs();
  const uint64_t remaining = targetNs > now ? targetNs - now : 0;
  return std::chrono::steady_clock::now() + std::chrono::nanoseconds(remaining);
}

}  // namespace torch_mspti::sim
