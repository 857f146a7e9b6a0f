#include "LinkResolver.h"

namespace torch_mspti {

namespace {

// The deeper of two hinted nodes when one encloses the other (a user range inside an op, or an
// op inside a user range), else the op.
const OpNode* deeper(const OpNode* op, const OpNode* user, const OpTimeline& ops) {
  if (!op || !user) return op ? op : user;
  for (const OpNode* p = ops.parent(*user); p; p = ops.parent(*p))
    if (p == op) return user;
  return op;
}

}  // namespace

LinkDecision resolveLink(const Launch& launch, const OpTimeline& ops) {
  LinkDecision d;
  if (launch.call) {
    if (!launch.callTrusted) {
      d.state = LinkState::kClockUntrusted;
      return d;
    }
    const OpNode* op = ops.innermost(launch.call->threadId, launch.callStart, kLaunchToleranceNs);
    if (!op) {
      d.state = LinkState::kNoOpOnThread;
      d.launchThread = launch.call->threadId;
      return d;
    }
    const uint64_t hint = op->userRange ? launch.userHint : launch.opHint;
    d.state = hint == op->id ? LinkState::kVerified : LinkState::kRecovered;
    d.op = op;
    return d;
  }
  const OpNode* hinted = deeper(launch.opHint ? ops.byId(launch.opHint, false) : nullptr,
                                launch.userHint ? ops.byId(launch.userHint, true) : nullptr, ops);
  if (!hinted) {
    d.state = LinkState::kNoRecord;
    return d;
  }
  if (ops.overlapsOtherThread(*hinted)) {
    d.state = LinkState::kAmbiguous;
    return d;
  }
  d.state = LinkState::kUnverified;
  d.op = hinted;
  return d;
}

}  // namespace torch_mspti
