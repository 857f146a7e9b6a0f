// OpTimeline and LinkResolver: which op was innermost on a thread at a time (nesting, the
// tolerance at op edges, user ranges), and the link state each kind of launch gets: verified,
// recovered, no_op_on_thread, clock_untrusted, unverified, ambiguous, no_record.
#include <gtest/gtest.h>

#include <vector>

#include "FakeOps.h"
#include "LinkResolver.h"
#include "OpTimeline.h"

namespace torch_mspti::test {
namespace {

using Fwd = CorrelationForwarder;
constexpr uint32_t kT1 = 101, kT2 = 102, kIdle = 109;

// Thread kT1: op 1 [100, 1000] holding op 2 [200, 500] (holding user range 50 [250, 450]) and
// op 3 [600, 900]; ops 4 [2000, 2100] and 5 [2105, 2200]. Thread kT2: op 6 [5000, 6000].
class LinkResolverTest : public ::testing::Test {
 protected:
  LinkResolverTest() {
    ops.add(kT1, 100, 1000, "outer", 1);
    ops.add(kT1, 200, 500, "inner", 2);
    ops.add(kT1, 250, 450, "range", 50);
    ops.add(kT1, 600, 900, "second", 3);
    ops.add(kT1, 2000, 2100, "left", 4);
    ops.add(kT1, 2105, 2200, "right", 5);
    ops.add(kT2, 5000, 6000, "other thread", 6);
    log = {{kT1, {1, 2, 50 | Fwd::kUserRangeBit, 3, 4, 5}}, {kT2, {6}}};
    cb = ops.callback();
    timeline = std::make_unique<OpTimeline>(log, &cb, counters);
  }
  uint64_t idAt(uint32_t tid, int64_t t, int64_t tolerance = 0) const {
    const OpNode* n = timeline->innermost(tid, t, tolerance);
    return n ? n->id : 0;
  }
  // A launch whose call ran on `tid` at `t` (trusted clock unless told otherwise).
  Launch launchAt(uint32_t tid, int64_t t, uint64_t opHint, uint64_t userHint = 0, bool trusted = true) {
    call.threadId = tid;
    call.start = t;
    call.end = t + 5;
    Launch l;
    l.call = &call;
    l.callTrusted = trusted;
    l.callStart = t;
    l.callEnd = t + 5;
    l.opHint = opHint;
    l.userHint = userHint;
    return l;
  }

  FakeOps ops;
  std::vector<ThreadOps> log;
  libkineto::getLinkedActivityCallback cb;
  SessionCounters counters;
  std::unique_ptr<OpTimeline> timeline;
  ApiRecord call;
};

TEST_F(LinkResolverTest, InnermostOpOpenOnTheThread) {
  EXPECT_EQ(idAt(kT1, 150), 1u);
  EXPECT_EQ(idAt(kT1, 220), 2u);
  EXPECT_EQ(idAt(kT1, 300), 50u);  // the user range nested inside op 2
  EXPECT_EQ(idAt(kT1, 480), 2u);
  EXPECT_EQ(idAt(kT1, 550), 1u);  // between the inner ops: the outer one
  EXPECT_EQ(idAt(kT1, 700), 3u);
  EXPECT_EQ(idAt(kT1, 1000), 1u);  // edges belong to the op
  EXPECT_EQ(idAt(kT1, 1500), 0u);
  EXPECT_EQ(idAt(kT2, 300), 0u);  // another thread's ops never count
  EXPECT_EQ(idAt(kIdle, 300), 0u);
  EXPECT_TRUE(timeline->ranOps(kT2));
  EXPECT_FALSE(timeline->ranOps(kIdle));
}

TEST_F(LinkResolverTest, ToleranceReachesTheNearestEdgeOnly) {
  EXPECT_EQ(idAt(kT1, 98, 2), 1u);    // just before op 1 starts
  EXPECT_EQ(idAt(kT1, 1002, 2), 1u);  // just after it ends
  EXPECT_EQ(idAt(kT1, 1003, 2), 0u);
  EXPECT_EQ(idAt(kT1, 97, 2), 0u);
  EXPECT_EQ(idAt(kT1, 2102, 5), 4u);  // 2 ns after op 4, 3 before op 5: the nearer
  EXPECT_EQ(idAt(kT1, 2103, 5), 5u);
  EXPECT_EQ(idAt(kT1, 1002, 0), 0u);
}

TEST_F(LinkResolverTest, ToleranceReachesOpsShorterThanIt) {
  // Ops of a few hundred ns (shorter than the tolerance): a launch call stamped just before the
  // op's start, or just after its end, still belongs to it.
  FakeOps quick;
  quick.add(kT1, 10'000, 10'400, "quick", 1);
  quick.add(kT1, 20'000, 20'300, "quicker", 2);
  const std::vector<ThreadOps> log2 = {{kT1, {1, 2}}};
  const auto cb2 = quick.callback();
  SessionCounters c;
  const OpTimeline t(log2, &cb2, c);
  auto at = [&](int64_t when) {
    const OpNode* n = t.innermost(kT1, when, kLaunchToleranceNs);
    return n ? n->id : 0;
  };
  EXPECT_EQ(at(9'900), 1u);   // 100 ns before its start
  EXPECT_EQ(at(10'500), 1u);  // 100 ns after its end
  EXPECT_EQ(at(19'000), 2u);  // 1000 ns before the next one, 8600 after the previous
  EXPECT_EQ(at(15'000), 0u);  // more than the tolerance from both
  EXPECT_EQ(at(12'300), 1u);  // 1900 ns after op 1
  EXPECT_EQ(at(18'100), 2u);  // 1900 ns before op 2
  Launch l = launchAt(kT1, 9'900, 1);
  EXPECT_EQ(resolveLink(l, t).state, LinkState::kVerified);
}

TEST_F(LinkResolverTest, TimelineKnowsIdsParentsAndOtherThreads) {
  const OpNode* range = timeline->byId(50, true);
  ASSERT_NE(range, nullptr);
  EXPECT_TRUE(range->userRange);
  EXPECT_EQ(timeline->byId(50, false), nullptr);
  const OpNode* parent = timeline->parent(*range);
  ASSERT_NE(parent, nullptr);
  EXPECT_EQ(parent->id, 2u);
  EXPECT_EQ(timeline->parent(*parent)->id, 1u);
  EXPECT_EQ(timeline->parent(*timeline->parent(*parent)), nullptr);
  EXPECT_FALSE(timeline->overlapsOtherThread(*timeline->byId(1, false)));
  EXPECT_FALSE(timeline->overlapsOtherThread(*timeline->byId(6, false)));
}

TEST_F(LinkResolverTest, UnknownLoggedIdsAreCountedAndInvalidOnesSkipped) {
  SessionCounters c;
  const std::vector<ThreadOps> log2 = {{kT1, {1, 777, 888 | Fwd::kUserRangeBit, 0, uint64_t{1} << 40}}};
  OpTimeline t(log2, &cb, c);
  EXPECT_EQ(c.linkTargetMissing, 2u);  // 777 and 888; 0 and ids beyond int32 are not torch's
  EXPECT_NE(t.byId(1, false), nullptr);
  OpTimeline none(log2, nullptr, c);  // no getLinkedActivity: an empty timeline
  EXPECT_FALSE(none.ranOps(kT1));
}

TEST_F(LinkResolverTest, VerifiedWhenTheHintNamesTheInnermostOp) {
  const LinkDecision d = resolveLink(launchAt(kT1, 220, 2), *timeline);
  EXPECT_EQ(d.state, LinkState::kVerified);
  ASSERT_NE(d.op, nullptr);
  EXPECT_EQ(d.op->id, 2u);
  const LinkDecision u = resolveLink(launchAt(kT1, 300, 2, 50), *timeline);
  EXPECT_EQ(u.state, LinkState::kVerified);  // the innermost is the user range; its hint matches
  EXPECT_EQ(u.op->id, 50u);
}

TEST_F(LinkResolverTest, RecoveredWhenTheHintIsWrongOrAbsent) {
  for (uint64_t hint : {uint64_t{1}, uint64_t{6}, uint64_t{0}}) {
    const LinkDecision d = resolveLink(launchAt(kT1, 700, hint), *timeline);
    EXPECT_EQ(d.state, LinkState::kRecovered) << hint;
    ASSERT_NE(d.op, nullptr);
    EXPECT_EQ(d.op->id, 3u) << "the op open on the launching thread, not the hinted one";
  }
}

TEST_F(LinkResolverTest, NoOpOnThreadAndClockUntrusted) {
  const LinkDecision idle = resolveLink(launchAt(kIdle, 700, 3), *timeline);
  EXPECT_EQ(idle.state, LinkState::kNoOpOnThread);
  EXPECT_EQ(idle.op, nullptr);
  EXPECT_EQ(idle.launchThread, kIdle);
  const LinkDecision gap = resolveLink(launchAt(kT1, 10'000, 1), *timeline);  // farther than the tolerance
  EXPECT_EQ(gap.state, LinkState::kNoOpOnThread);
  const LinkDecision clock = resolveLink(launchAt(kT1, 220, 2, 0, /*trusted=*/false), *timeline);
  EXPECT_EQ(clock.state, LinkState::kClockUntrusted);
  EXPECT_EQ(clock.op, nullptr);
}

TEST_F(LinkResolverTest, WithoutALaunchCallOnlyTheHintIsLeft) {
  Launch l;
  l.opHint = 3;
  LinkDecision d = resolveLink(l, *timeline);
  EXPECT_EQ(d.state, LinkState::kUnverified);  // no other thread ran an op meanwhile
  EXPECT_EQ(d.op->id, 3u);
  l.opHint = 2;
  l.userHint = 50;
  d = resolveLink(l, *timeline);
  EXPECT_EQ(d.state, LinkState::kUnverified);
  EXPECT_EQ(d.op->id, 50u);  // the deeper of the two hinted nodes
  l.userHint = 0;
  l.opHint = 999;
  EXPECT_EQ(resolveLink(l, *timeline).state, LinkState::kNoRecord);
  l.opHint = 0;
  EXPECT_EQ(resolveLink(l, *timeline).state, LinkState::kNoRecord);
}

TEST_F(LinkResolverTest, HintAloneIsAmbiguousWhileAnotherThreadRanAnOp) {
  FakeOps busy;
  busy.add(kT1, 100, 1000, "a", 1);
  busy.add(kT2, 900, 1200, "b", 2);
  const std::vector<ThreadOps> log2 = {{kT1, {1}}, {kT2, {2}}};
  const auto cb2 = busy.callback();
  SessionCounters c;
  OpTimeline t(log2, &cb2, c);
  Launch l;
  l.opHint = 1;
  const LinkDecision d = resolveLink(l, t);
  EXPECT_EQ(d.state, LinkState::kAmbiguous);
  EXPECT_EQ(d.op, nullptr);
  // With the launch call, the thread decides and the other thread does not matter.
  ApiRecord callRecord;
  callRecord.threadId = kT1;
  l.call = &callRecord;
  l.callTrusted = true;
  l.callStart = 950;
  EXPECT_EQ(resolveLink(l, t).state, LinkState::kVerified);
}

TEST(LinkState, NamesAndLinkedStates) {
  EXPECT_STREQ(linkStateName(LinkState::kVerified), "verified");
  EXPECT_STREQ(linkStateName(LinkState::kRecovered), "recovered");
  EXPECT_STREQ(linkStateName(LinkState::kUnverified), "unverified");
  EXPECT_STREQ(linkStateName(LinkState::kNoOpOnThread), "no_op_on_thread");
  EXPECT_STREQ(linkStateName(LinkState::kClockUntrusted), "clock_untrusted");
  EXPECT_STREQ(linkStateName(LinkState::kAmbiguous), "ambiguous");
  EXPECT_STREQ(linkStateName(LinkState::kNoRecord), "no_record");
  EXPECT_TRUE(isLinked(LinkState::kVerified));
  EXPECT_TRUE(isLinked(LinkState::kRecovered));
  EXPECT_TRUE(isLinked(LinkState::kUnverified));
  EXPECT_FALSE(isLinked(LinkState::kNoOpOnThread));
  EXPECT_FALSE(isLinked(LinkState::kClockUntrusted));
  EXPECT_FALSE(isLinked(LinkState::kAmbiguous));
  EXPECT_FALSE(isLinked(LinkState::kNoRecord));
}

}  // namespace
}  // namespace torch_mspti::test
