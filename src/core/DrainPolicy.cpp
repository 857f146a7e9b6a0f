#include "DrainPolicy.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "ActivityKinds.h"

namespace torch_mspti {
namespace {

using Clock = std::chrono::steady_clock;

int64_t realtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Kinds whose records Disable does not pull in: MSPTI's Disable flushes the driver channels of
// MARKER, KERNEL, HCCL and COMMUNICATION only (mspti.md 2.3). Memory copies, memsets and memory
// records come through the ACL memory hooks or the runtime's reports, on their own schedule.
bool notPulledByDisable(msptiActivityKind kind) {
  return kind == MSPTI_ACTIVITY_KIND_MEMCPY || kind == MSPTI_ACTIVITY_KIND_MEMSET || kind == MSPTI_ACTIVITY_KIND_MEMORY;
}

// Disables the enabled kinds for which `which` is true; `disabledAt` is set by the first call.
template <typename Pred>
void disableKinds(const DrainInput& in, Pred which, std::vector<std::string>& errors, int64_t& disabledAt) {
  if (disabledAt == 0) disabledAt = realtimeNs();
  for (auto kind : in.enabledKinds) {
    if (!which(kind)) continue;
    const msptiResult r = in.api->disable(kind);
    if (r != MSPTI_SUCCESS) errors.push_back(describeCall("msptiActivityDisable", kindName(kind), r));
  }
}

void flush(const DrainInput& in, DrainStats& d, std::vector<std::string>& errors) {
  const msptiResult r = in.api->flushAll();
  ++d.flushes;
  if (r != MSPTI_SUCCESS && errors.size() < 16) errors.push_back(describeCall("msptiActivityFlushAll", "1", r));
}

}  // namespace

DrainOrder resolveDrainOrder(DrainOrder configured, bool libraryHasIsEnabled) {
  if (configured != DrainOrder::kAuto) return configured;
  return libraryHasIsEnabled ? DrainOrder::kDisableFirst : DrainOrder::kPollFirst;
}

DrainStats drain(const DrainInput& in, std::vector<std::string>& errors, int64_t& disabledAt) {
  DrainStats d;
  const auto t0 = Clock::now();
  const DrainOrder order = resolveDrainOrder(in.config.drainOrder, in.api->hasIsEnabled());
  d.order = order == DrainOrder::kDisableFirst ? "disable_first" : "poll_first";
  const uint64_t before = in.store->records();
  const auto deadline = t0 + std::chrono::milliseconds(in.config.drainTimeoutMs);
  const auto interval = std::chrono::milliseconds(in.config.drainPollIntervalMs);

  disabledAt = 0;
  // Launches whose records a disable-first Disable does not bring in: their kinds stay enabled
  // until the poll has them (or the bound), since a record due after its kind is disabled may be
  // discarded.
  const uint32_t latePending =
      in.waitFor & ((1u << static_cast<int>(LaunchClass::kMemcpy)) | (1u << static_cast<int>(LaunchClass::kMemset)));
  if (order == DrainOrder::kDisableFirst)
    disableKinds(in, [](msptiActivityKind k) { return !notPulledByDisable(k); }, errors, disabledAt);
  int quiet = 0;
  uint64_t seen = in.store->records();
  for (;;) {
    flush(in, d, errors);
    const uint64_t now = in.store->records();
    const bool broughtNothing = now == seen;
    if (in.store->knowsLaunches() && in.store->pendingLaunches(in.waitFor) == 0) {
      d.exitReason = "balanced";
      flush(in, d, errors);  // siblings of multi-kernel launches
      break;
    }
    if (order == DrainOrder::kDisableFirst && broughtNothing &&
        !(in.store->knowsLaunches() && in.store->pendingLaunches(latePending) > 0)) {
      // Disable already moved the device's data into MSPTI's buffers: nothing more will come.
      d.exitReason = "quiet";
      break;
    }
    if (!in.store->knowsLaunches()) {
      quiet = broughtNothing ? quiet + 1 : 0;
      if (quiet >= in.config.drainQuietFlushes) {
        d.exitReason = "quiet";
        break;
      }
    }
    seen = now;
    if (Clock::now() >= deadline) {
      d.exitReason = "timeout";
      break;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(interval, deadline - Clock::now()));
  }
  if (order == DrainOrder::kPollFirst) {
    disableKinds(in, [](msptiActivityKind) { return true; }, errors, disabledAt);
    flush(in, d, errors);
  } else if (std::any_of(in.enabledKinds.begin(), in.enabledKinds.end(), notPulledByDisable)) {
    disableKinds(in, notPulledByDisable, errors, disabledAt);
    flush(in, d, errors);
  }
  d.recordsDuringDrain = in.store->records() - before;

  const msptiResult r = in.api->unsubscribe(in.subscriber);
  if (r != MSPTI_SUCCESS) errors.push_back(describeCall("msptiUnsubscribe", "subscriber", r));
  const uint64_t beforeLate = in.store->records();
  flush(in, d, errors);
  d.lateRecords = in.store->records() - beforeLate;
  d.pendingLaunches = in.store->pendingLaunches(in.waitFor);
  d.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return d;
}

}  // namespace torch_mspti
