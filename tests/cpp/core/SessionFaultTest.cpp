// MsptiActivityProfilerSession on misbehaving FakeMspti tables: the subscriber held by another
// tool, no library, kinds that cannot be enabled, entry points that throw, a FlushAll that never
// delivers, records after Unsubscribe or after the session, a foreign buffer completed into our
// callback, declined buffers. Each case checks the report, the counters and the warnings the
// user gets, and that nothing is thrown into kineto.
#include <gtest/gtest.h>

#include <algorithm>

#include "CollectingLogger.h"
#include "FakeOps.h"
#include "SessionHarness.h"

namespace torch_mspti::test {
namespace {

using libkineto::ActivityType;

class SessionFaultTest : public ::testing::Test {
 protected:
  // configure -> start -> one op launching `kernels` kernels -> stop -> processTrace, with
  // nothing thrown. `during` runs after the launches, before stop().
  template <typename Fn>
  SessionReport run(int kernels, Fn during, SessionHarness* harness = nullptr) {
    SessionHarness& hh = harness ? *harness : h;
    std::unique_ptr<MsptiActivityProfilerSession> s;
    EXPECT_NO_THROW(s = hh.session(types));
    EXPECT_NO_THROW(s->start());
    op = ops.add(currentTid(), realtimeNs(), 0, "aten::op");
    EXPECT_NO_THROW(s->pushCorrelationId(static_cast<uint64_t>(op)));
    ids.clear();
    for (int i = 0; i < kernels; ++i) ids.push_back(fake.launchKernel("k"));
    EXPECT_NO_THROW(s->popCorrelationId());
    ops.setEnd(op, realtimeNs());
    during();
    EXPECT_NO_THROW(s->stop());
    logger = CollectingLogger();
    EXPECT_NO_THROW(s->processTrace(logger, ops.callback(), 0, 0));
    EXPECT_NO_THROW(s->getMetadata());
    EXPECT_NO_THROW(s->getTraceBuffer());
    const SessionReport r = s->report();
    EXPECT_NO_THROW(s.reset());
    EXPECT_FALSE(fake.subscribed()) << "the subscriber was not given back";
    EXPECT_FALSE(sharedForwarder().armed());
    return r;
  }
  SessionReport run(int kernels) {
    return run(kernels, [] {});
  }
  static bool has(const std::vector<std::string>& list, const std::string& part) { return anyContains(list, part); }

  FakeMspti fake;
  SessionHarness h{&fake};
  FakeOps ops;
  std::set<ActivityType> types = {ActivityType::CONCURRENT_KERNEL, ActivityType::PRIVATEUSE1_RUNTIME};
  int32_t op = 0;
  std::vector<uint64_t> ids;
  CollectingLogger logger;
};

TEST_F(SessionFaultTest, SubscriberHeldByAnotherTool) {
  fake.subscribeResult = MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  const SessionReport r = run(1);
  EXPECT_EQ(r.state, SessionState::kFailed);
  EXPECT_TRUE(has(r.errors, "msptiSubscribe(NULL, NULL) -> 2 MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"));
  EXPECT_TRUE(has(r.errors, "another tool")) << r.errors.front();
  ASSERT_EQ(h.warnings().size(), 1u);
  EXPECT_TRUE(h.warned("the MSPTI subscriber is held by another profiling tool"));
  EXPECT_TRUE(h.warned("torch_mspti.diagnostics()"));  // says where to look
  EXPECT_EQ(fake.count("registerCallbacks") + fake.count("enable(KERNEL)") + fake.count("flushAll"), 0u);
  EXPECT_TRUE(logger.activities.empty());
  EXPECT_EQ(fake.stackDepth(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0), 0u);  // nothing forwarded
  EXPECT_EQ(h.collected.load(), 0);
  EXPECT_EQ(h.stats.sessions(), 1u);
  EXPECT_EQ(h.stats.last()->state, SessionState::kFailed);
}

TEST_F(SessionFaultTest, NoLibrary) {
  SessionHarness none(nullptr);
  auto s = none.session();
  s->start();
  s->stop();
  CollectingLogger l;
  EXPECT_NO_THROW(s->processTrace(l));
  const SessionReport r = s->report();
  EXPECT_EQ(r.state, SessionState::kFailed);
  EXPECT_TRUE(has(r.errors, "MSPTI unavailable: libmspti.so not found (set TORCH_MSPTI_LIBRARY)"));
  EXPECT_TRUE(none.warned("libmspti.so not found"));
  EXPECT_NE(s->getMetadata().at("torch_mspti").find("\"available\":false"), std::string::npos);
}

TEST_F(SessionFaultTest, KernelKindCannotBeEnabled) {
  fake.enableResults[MSPTI_ACTIVITY_KIND_KERNEL] = MSPTI_ERROR_INNER;
  const SessionReport r = run(1);
  EXPECT_TRUE(has(r.errors, "msptiActivityEnable(KERNEL) -> 999 MSPTI_ERROR_INNER"));
  EXPECT_TRUE(h.warned("no kernels in this trace: msptiActivityEnable(KERNEL) failed"));
  EXPECT_EQ(std::count(r.enabledKinds.begin(), r.enabledKinds.end(), "KERNEL"), 0);
  EXPECT_EQ(r.counters.kernels, 0u);
  EXPECT_EQ(h.stats.enableOutcomes()[MSPTI_ACTIVITY_KIND_KERNEL].result, MSPTI_ERROR_INNER);
  EXPECT_EQ(r.state, SessionState::kProcessed);  // the rest of the session still works
}

TEST_F(SessionFaultTest, RuntimeApiUnknownFallsBackToApi) {
  fake.enableResults[MSPTI_ACTIVITY_KIND_RUNTIME_API] = MSPTI_ERROR_INVALID_PARAMETER;  // before 26.0
  const SessionReport r = run(1);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_EQ(std::count(r.enabledKinds.begin(), r.enabledKinds.end(), "API"), 1);
  EXPECT_EQ(std::count(r.enabledKinds.begin(), r.enabledKinds.end(), "RUNTIME_API"), 0);
  EXPECT_NE(h.stats.enableOutcomes()[MSPTI_ACTIVITY_KIND_RUNTIME_API].note.find("does not know RUNTIME_API"),
            std::string::npos);
  EXPECT_EQ(r.counters.linkedVerified, 1u);  // API records link as well
}

TEST_F(SessionFaultTest, CopiesWithoutThePreloadAreExplainedOnce) {
  types.insert(ActivityType::GPU_MEMCPY);
  types.insert(ActivityType::GPU_MEMSET);
  fake.enableResults[MSPTI_ACTIVITY_KIND_MEMCPY] = MSPTI_ERROR_WITHOUT_LD_PRELOAD;
  fake.enableResults[MSPTI_ACTIVITY_KIND_MEMSET] = MSPTI_ERROR_WITHOUT_LD_PRELOAD;
  const SessionReport r = run(0, [&] {
    const uint64_t t = static_cast<uint64_t>(realtimeNs());
    RecordBuilder copy;
    copy.api(t, t + 10, 1, currentTid(), 0, "aclrtMemcpyAsync");
    fake.writeNow(copy);
  });
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();  // copies are optional: no error
  const auto outcomes = h.stats.enableOutcomes();
  EXPECT_EQ(outcomes[MSPTI_ACTIVITY_KIND_MEMCPY].result, MSPTI_ERROR_WITHOUT_LD_PRELOAD);
  EXPECT_NE(outcomes[MSPTI_ACTIVITY_KIND_MEMCPY].note.find("LD_PRELOAD"), std::string::npos);
  EXPECT_TRUE(h.warned("memory copy/memset calls but the trace has no copy rows"))
      << testing::PrintToString(h.warnings());
  EXPECT_TRUE(h.warned("LD_PRELOAD"));
}

TEST_F(SessionFaultTest, EntryPointsThatThrow) {
  struct Case {
    uint32_t entry;
    const char* error;
    bool fails;
  };
  for (const Case& c : {Case{FakeMspti::kSubscribe, "msptiSubscribe(NULL, NULL) -> -1 threw a C++ exception", true},
                        Case{FakeMspti::kRegisterCallbacks,
                             "msptiActivityRegisterCallbacks(request, complete) -> -1 threw a C++ exception", true},
                        Case{FakeMspti::kEnable, "msptiActivityEnable(KERNEL) -> -1 threw a C++ exception", false},
                        Case{FakeMspti::kFlushAll, "msptiActivityFlushAll(1) -> -1 threw a C++ exception", false},
                        Case{FakeMspti::kDisable, "msptiActivityDisable(KERNEL) -> -1 threw a C++ exception", false},
                        Case{FakeMspti::kUnsubscribe, "msptiUnsubscribe(subscriber) -> -1 threw", false}}) {
    SCOPED_TRACE(c.error);
    fake.throwIn = c.entry;
    const uint64_t sessionsBefore = h.stats.sessions();
    SessionReport r;
    if (c.entry == FakeMspti::kUnsubscribe) {
      // The fake stays subscribed when Unsubscribe throws: check, then let go of it directly.
      auto s = h.session(types);
      s->start();
      EXPECT_NO_THROW(s->stop());
      r = s->report();
      s.reset();
      fake.throwIn = 0;
      fake.releaseSubscriber();
    } else {
      r = run(1);
    }
    fake.throwIn = 0;
    EXPECT_TRUE(has(r.errors, c.error)) << testing::PrintToString(r.errors);
    EXPECT_EQ(r.state == SessionState::kFailed, c.fails);
    EXPECT_EQ(h.stats.sessions(), sessionsBefore + 1);
  }
}

TEST_F(SessionFaultTest, PushAndPopThatThrowAreCountedAndTheLaunchCallStillLinks) {
  fake.throwIn = FakeMspti::kPush | FakeMspti::kPop;
  const SessionReport r = run(1);
  EXPECT_EQ(r.counters.correlationErrors, 1u);  // the push; its pop is not attempted
  ASSERT_EQ(logger.kernels().size(), 1u);
  EXPECT_EQ(logger.kernels()[0]->linkedOp, op);
  EXPECT_EQ(logger.kernels()[0]->link, "recovered");  // no hint reached MSPTI
}

TEST_F(SessionFaultTest, FlushAllNeverDelivers) {
  fake.flushDelivers = false;
  const SessionReport r = run(2, [&] { fake.deliverNow(); });  // the launch calls arrived, kernels never
  ASSERT_TRUE(r.drain.has_value());
  // nothing proves that no row can come: the launches hold the drain to its bound
  EXPECT_EQ(r.drain->exitReason, "timeout");
  EXPECT_EQ(r.drain->pulledBy, "COMMUNICATION");  // KERNEL stayed on to the bound
  EXPECT_EQ(r.drain->pendingLaunches, 2u);
  EXPECT_EQ(r.counters.kernels, 0u);
  EXPECT_TRUE(h.warned("MSPTI reported 2 launches but no KERNEL record within drain_timeout_ms="))
      << testing::PrintToString(h.warnings());
  EXPECT_TRUE(h.warned("LD_PRELOAD"));
}

TEST_F(SessionFaultTest, SomeKernelsNeverArriveWithPollFirst) {
  fake.withIsEnabled = false;
  SessionHarness old(&fake);
  fake.flushDelivers = false;
  const SessionReport r = run(
      2,
      [&] {
        const uint64_t t = static_cast<uint64_t>(realtimeNs());
        RecordBuilder one;
        one.kernel(t, t + 10, 0, 1, ids[0], "k");
        fake.writeNow(one);
        fake.deliverNow();
      },
      &old);
  ASSERT_TRUE(r.drain.has_value());
  EXPECT_EQ(r.drain->order, "poll_first");
  EXPECT_EQ(r.drain->exitReason, "timeout");
  EXPECT_EQ(r.drain->pendingLaunches, 1u);
  EXPECT_EQ(r.counters.kernels, 1u);
  EXPECT_TRUE(old.warned("1 launches still had no device record when the drain gave up at drain_timeout_ms=200 ms"))
      << testing::PrintToString(old.warnings());
}

TEST_F(SessionFaultTest, RecordsThatComeOnlyAfterUnsubscribeAreOrphansOfNoSession) {
  // The session unsubscribes after its store was sealed (SubscriptionRelease): a record MSPTI
  // hands over only then is counted by the pool as an orphan, never written into the trace.
  fake.inFlightOnlyAfterUnsubscribe = true;
  fake.keepInFlightAfterUnsubscribe = true;
  const uint64_t orphansBefore = h.pool.counters().orphanRecords;
  const SessionReport r = run(1, [&] { fake.deliverNow(); });
  ASSERT_TRUE(r.drain.has_value());
  EXPECT_EQ(r.drain->exitReason, "timeout");
  EXPECT_EQ(r.counters.kernels, 0u);
  EXPECT_EQ(r.drain->pendingLaunches, 1u);
  EXPECT_EQ(h.pool.counters().orphanRecords - orphansBefore, 1u);
}

TEST_F(SessionFaultTest, RecordsOfAnEarlierSessionNeverEnterALaterOne) {
  fake.keepInFlightAfterUnsubscribe = true;  // an MSPTI that keeps delivering after Unsubscribe
  fake.flushDelivers = false;
  const SessionReport first = run(2, [&] { fake.deliverNow(); });
  EXPECT_EQ(first.counters.kernels, 0u);
  EXPECT_EQ(h.staleBelow.load(), ids.back());
  fake.flushDelivers = true;
  const SessionReport second = run(1);  // its flushes bring session 1's two kernels too
  EXPECT_EQ(second.counters.staleRecords, 2u);
  EXPECT_EQ(second.counters.kernels, 1u);
  ASSERT_EQ(logger.kernels().size(), 1u);
  EXPECT_EQ(logger.kernels()[0]->linkedOp, op);
  EXPECT_TRUE(h.warned("2 records of an earlier session arrived in this one and were dropped"));
}

TEST_F(SessionFaultTest, RecordsAfterTheSessionAreOrphansAndReachNoLaterSession) {
  const SessionReport first = run(1);
  const uint64_t t = static_cast<uint64_t>(realtimeNs());
  RecordBuilder stray;
  stray.kernel(t, t + 10, 0, 1, 999, "stray");
  fake.writeNow(stray);
  fake.deliverNow();  // completed while no session collects
  EXPECT_EQ(h.pool.counters().orphanRecords, 1u);
  EXPECT_EQ(first.counters.orphanRecords, 0u);
  const SessionReport second = run(1);
  EXPECT_EQ(second.counters.orphanRecords, 0u);
  EXPECT_EQ(second.counters.kernels, 1u);
  for (const LoggedActivity* k : logger.kernels()) EXPECT_NE(k->name, "stray");
}

TEST_F(SessionFaultTest, ForeignBufferIsWalkedAndLeftToItsOwner) {
  bool intact = false;
  const SessionReport r = run(1, [&] {
    const uint64_t t = static_cast<uint64_t>(realtimeNs());
    RecordBuilder theirs;
    theirs.kernel(t, t + 10, 0, 3, ids[0], "ForeignKernel");
    intact = fake.completeForeignBuffer(theirs);  // another tool's buffer, completed into our callback
  });
  EXPECT_TRUE(intact) << "the pool wrote into a buffer that is not its own";
  EXPECT_EQ(r.counters.foreignBuffers, 1u);
  EXPECT_EQ(r.counters.buffersDeclined, 0u);
  EXPECT_EQ(r.counters.kernels, 2u);  // its record is real: walked and kept
  EXPECT_EQ(h.pool.outstanding(), 0u);
  EXPECT_EQ(h.pool.pooled(), 1u);  // only our own buffer was kept for reuse
  bool foreignKept = false;
  for (const LoggedActivity* k : logger.kernels()) foreignKept |= k->name == "ForeignKernel" && k->linkedOp == op;
  EXPECT_TRUE(foreignKept);
}

TEST_F(SessionFaultTest, DeclinedBuffersAreCountedAndWarnedAbout) {
  h.config.bufferPoolCap = 1;
  uint8_t* held = nullptr;
  size_t size = 0;
  const SessionReport r = run(1, [&] {
    h.pool.request(&held, &size);  // the only buffer the cap allows is out: MSPTI's request is declined
    fake.deliverNow();
    h.pool.complete(held, size, 0);
  });
  EXPECT_EQ(r.counters.buffersDeclined, 1u);
  EXPECT_EQ(r.counters.nullCompletions, 1u);
  EXPECT_TRUE(h.warned("1 MSPTI buffer requests were declined at buffer_pool_cap=1"))
      << testing::PrintToString(h.warnings());
  EXPECT_EQ(fake.recordsDeclined(), layout::external::kSize + layout::api::kSize);
}

}  // namespace
}  // namespace torch_mspti::test
