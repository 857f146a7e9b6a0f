// Which clock the host times of MSPTI's API records are on, decided once per session.
//
// MSPTI reports host times as CLOCK_REALTIME ns since the epoch, the clock of torch's ops and of
// kineto (mspti.md 4); some builds returned raw CLOCK_MONOTONIC_RAW values instead (fixed in
// 2026: 990582b, 7722b61). Comparing a launch's host time with an op's interval is meaningful only
// on one clock, so each session samples both clocks at start and at stop and checks where the API
// records' times fall: inside the session on the realtime clock (kRealtime), inside it on the
// monotonic raw clock (kMonotonicRaw: converted with the offset measured at start), or neither
// (kUntrusted: no link is verified by time). Never decided silently: the report names it.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "NpuRecords.h"

namespace torch_mspti {

struct ClockSample {
  int64_t realtime = 0;      // CLOCK_REALTIME, ns
  int64_t monotonicRaw = 0;  // CLOCK_MONOTONIC_RAW, ns
  static ClockSample now();
};

class HostClock {
 public:
  enum class Kind { kNoRecords, kRealtime, kMonotonicRaw, kUntrusted };

  // Decides from the API records of a session that ran from `start` to `stop`.
  static HostClock decide(const ApiRecords& apis, const ClockSample& start, const ClockSample& stop);
  // Decides from any host-clock times (the same rule): a session without API records decides from
  // its other host-clock records (MEMORY records, host markers, copy and memset rows), which MSPTI
  // takes from the same clock (mspti.md 4).
  static HostClock decide(const std::vector<int64_t>& hostTimes, const ClockSample& start, const ClockSample& stop);
  // Realtime as is (tests, and libraries known to be right).
  static HostClock realtime() { return HostClock(Kind::kRealtime, 0, 0); }

  Kind kind() const { return kind_; }
  bool trusted() const { return kind_ == Kind::kRealtime || kind_ == Kind::kMonotonicRaw; }
  // An API record time converted to CLOCK_REALTIME ns (only meaningful when trusted()).
  int64_t toRealtime(int64_t t) const { return t + offsetNs_; }
  int64_t offsetNs() const { return offsetNs_; }
  // How much the two clocks drifted apart during the session, ns (kMonotonicRaw).
  int64_t driftNs() const { return driftNs_; }
  // "realtime", "monotonic_raw", "untrusted", "no_records".
  const char* name() const;

 private:
  HostClock(Kind k, int64_t offset, int64_t drift) : kind_(k), offsetNs_(offset), driftNs_(drift) {}
  Kind kind_;
  int64_t offsetNs_;
  int64_t driftNs_;
};

}  // namespace torch_mspti
