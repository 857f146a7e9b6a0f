#include "HostClock.h"

#include <time.h>

namespace torch_mspti {
namespace {

int64_t read(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// API records of a session may start a little before it (a launch call already in progress) and
// end after it (the drain): a minute either way still separates the clocks, whose values differ
// by decades.
constexpr int64_t kSlackNs = 60LL * 1000000000LL;

}  // namespace

ClockSample ClockSample::now() {
  ClockSample s;
  s.realtime = read(CLOCK_REALTIME);
  s.monotonicRaw = read(CLOCK_MONOTONIC_RAW);
  return s;
}

HostClock HostClock::decide(const ApiRecords& apis, const ClockSample& start, const ClockSample& stop) {
  std::vector<int64_t> times;
  times.reserve(apis.size());
  for (const auto& a : apis) times.push_back(a.start);
  return decide(times, start, stop);
}

HostClock HostClock::decide(const std::vector<int64_t>& times, const ClockSample& start, const ClockSample& stop) {
  if (times.empty()) return HostClock(Kind::kNoRecords, 0, 0);
  uint64_t onRealtime = 0, onMonotonic = 0;
  for (const int64_t t : times) {
    if (t >= start.realtime - kSlackNs && t <= stop.realtime + kSlackNs) ++onRealtime;
    else if (t >= start.monotonicRaw - kSlackNs && t <= stop.monotonicRaw + kSlackNs) ++onMonotonic;
  }
  // Nine in ten: a stray record (a stale value, an injected fault) does not decide the clock.
  const uint64_t needed = times.size() - times.size() / 10;
  if (onRealtime >= needed) return HostClock(Kind::kRealtime, 0, 0);
  if (onMonotonic >= needed) {
    const int64_t atStart = start.realtime - start.monotonicRaw;
    const int64_t atStop = stop.realtime - stop.monotonicRaw;
    return HostClock(Kind::kMonotonicRaw, atStart, atStop - atStart);
  }
  return HostClock(Kind::kUntrusted, 0, 0);
}

const char* HostClock::name() const {
  switch (kind_) {
    case Kind::kNoRecords: return "no_records";
    case Kind::kRealtime: return "realtime";
    case Kind::kMonotonicRaw: return "monotonic_raw";
    case Kind::kUntrusted: return "untrusted";
  }
  return "untrusted";
}

}  // namespace torch_mspti
