// The one rule that decides which op a launch's device rows belong to.
//
// A launch is linked to an op only when its launch call — the API record's thread and host start
// time — lies within that op on that thread: the innermost op (or user range) open on the calling
// thread at the call's start, within kLaunchToleranceNs of its edges. MSPTI's external
// correlation id is a hint, never proof: its stack is process-global, so with several threads the
// top of the stack can be another thread's op (mspti.md 5.4). States (the table: LinkStates.h):
//  * verified: the innermost op is the one the hint named;
//  * recovered: the hint named another op (or none): the innermost op is used;
//  * no_op_on_thread: the calling thread ran no op then (torch_npu's task queue, a housekeeping
//    thread): no op is credited; the launch is shown on that thread's own lane;
//  * clock_untrusted: the call's host time is on an unknown clock (HostClock): unlinked;
//  * without an API record (API records off or lost) only the hint is left: unverified when no
//    other thread ran an op while the hinted op did (then no other thread could have been on top
//    of the stack), ambiguous (unlinked) otherwise; no_record when there is no hint either.
// Thread-safety: none.
#pragma once

#include <cstdint>

#include "LaunchTable.h"
#include "LinkStates.h"
#include "OpTimeline.h"

namespace torch_mspti {

struct LinkDecision {
  LinkState state = LinkState::kNoRecord;
  const OpNode* op = nullptr;  // the op credited (linked states), nullptr otherwise
  uint32_t launchThread = 0;   // kNoOpOnThread: the thread whose lane shows the launch
};

// Host times of torch's ops and MSPTI's API records come from different reads of the realtime
// clock; 2 us covers their granularity without reaching into a neighbouring op in practice.
inline constexpr int64_t kLaunchToleranceNs = 2000;

LinkDecision resolveLink(const Launch& launch, const OpTimeline& ops);

}  // namespace torch_mspti
