// How device timestamps are reported (options device_clock_offset_ns, device_clock_drift_ppm).
//
// MSPTI converts the device's system counter to epoch ns against a base pair (syscnt,
// CLOCK_REALTIME) that its sync thread refreshes every 7 s (mspti.md 4); between refreshes, or
// with a bad pair, device times sit off the host clock and drift from it. The simulator reports
//   reported = true + offset + drift_ppm * (true - t0) / 1e6,   t0 = when the library was loaded
// in the start/end of KERNEL and COMMUNICATION records (copies and memsets carry the host call's
// span on MSPTI's host clock instead, mspti.md 5.7: HostRecords::onHostClock). The timeline itself (when
// tasks run, what synchronize waits for, what Disable's pull counts as ended) stays on true time.
#pragma once

#include <cstdint>

#include "SimClock.h"
#include "SimOptions.h"

namespace torch_mspti::sim {

class DeviceClock {
 public:
  explicit DeviceClock(const SimOptions& options) : options_(options), loadNs_(realtimeNs()) {}
  DeviceClock(const DeviceClock&) = delete;
  DeviceClock& operator=(const DeviceClock&) = delete;

  // The reported time of the true instant `trueNs` (both ns since the epoch), clamped to uint64.
  uint64_t report(uint64_t trueNs) const {
    const __int128 offset = options_.get(Option::kDeviceClockOffsetNs);
    const __int128 drift = options_.get(Option::kDeviceClockDriftPpm);
    if (offset == 0 && drift == 0) {
      return trueNs;  // the default: no 128-bit arithmetic on the launch path
    }
    const __int128 elapsed = static_cast<__int128>(trueNs) - static_cast<__int128>(loadNs_);
    const __int128 reported = static_cast<__int128>(trueNs) + offset + drift * elapsed / 1000000;
    return reported < 0                                   ? 0
           : reported > static_cast<__int128>(UINT64_MAX) ? UINT64_MAX
                                                          : static_cast<uint64_t>(reported);
  }
  // t0 of the drift.
  uint64_t loadNs() const { return loadNs_; }

 private:
  const SimOptions& options_;
  const uint64_t loadNs_;
};

}  // namespace torch_mspti::sim
