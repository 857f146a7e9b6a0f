// MsptiActivityProfilerSession built from SessionDeps on a well-behaved FakeMspti (no simulator):
// the calls a session makes and their order, what reaches kineto (a kernel linked to the op
// instance it was launched in), the report and its counters, and the lifecycles kineto may drive
// (two sessions in a row, a session never started, a session destroyed while collecting).
#include <gtest/gtest.h>

#include <algorithm>

#include "CollectingLogger.h"
#include "FakeOps.h"
#include "JsonWriter.h"
#include "SessionHarness.h"

namespace torch_mspti::test {
namespace {

using libkineto::ActivityType;

class SessionTest : public ::testing::Test {
 protected:
  // One op on this thread with `kernels` launches inside it; returns the op's id.
  int32_t runOp(MsptiActivityProfilerSession& s, int kernels, const char* name = "MatMul") {
    const int32_t op = ops.add(currentTid(), realtimeNs(), 0, "aten::mm");
    s.pushCorrelationId(static_cast<uint64_t>(op));
    for (int i = 0; i < kernels; ++i) launched.push_back(fake.launchKernel(name));
    s.popCorrelationId();
    ops.setEnd(op, realtimeNs());
    return op;
  }
  int indexOf(const std::string& call) const {
    const auto calls = fake.calls();
    auto it = std::find(calls.begin(), calls.end(), call);
    return it == calls.end() ? -1 : static_cast<int>(it - calls.begin());
  }

  FakeMspti fake;
  SessionHarness h{&fake};
  FakeOps ops;
  std::vector<uint64_t> launched;
};

TEST_F(SessionTest, WellBehavedSessionLinksEachKernelToItsOp) {
  auto s = h.session();
  EXPECT_TRUE(fake.subscribed());  // taken at configure, before any other profiler starts
  EXPECT_EQ(fake.count("enable(KERNEL)"), 0u);
  s->start();
  const int32_t first = runOp(*s, 2);
  const int32_t second = runOp(*s, 1, "Add");
  EXPECT_EQ(fake.stackDepth(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0), 0u);
  s->stop();
  EXPECT_FALSE(fake.subscribed());
  CollectingLogger logger;
  s->processTrace(logger, ops.callback(), 0, 0);

  const SessionReport r = s->report();
  EXPECT_EQ(r.state, SessionState::kProcessed);
  EXPECT_TRUE(r.errors.empty()) << r.errors.front();
  EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
  EXPECT_TRUE(h.warnings().empty());
  EXPECT_EQ(r.enabledKinds, (std::vector<std::string>{"KERNEL", "MEMORY", "COMMUNICATION", "MARKER",
                                                      "EXTERNAL_CORRELATION", "RUNTIME_API"}));
  EXPECT_EQ(r.hostClock, "realtime");
  ASSERT_TRUE(r.drain.has_value());
  EXPECT_EQ(r.drain->order, "disable_first");
  EXPECT_EQ(r.drain->exitReason, "balanced");
  EXPECT_EQ(r.drain->pendingLaunches, 0u);
  const SessionCounters& c = r.counters;
  EXPECT_EQ(c.kernels, 3u);
  EXPECT_EQ(c.deviceRows, 3u);
  EXPECT_EQ(c.linkedVerified, 3u);
  EXPECT_EQ(c.launchEvents, 3u);
  EXPECT_EQ(c.opsLogged, 2u);
  EXPECT_EQ(c.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL], 3u);
  EXPECT_EQ(c.recordsByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION], 3u);
  EXPECT_EQ(c.recordsByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API], 3u);
  EXPECT_GE(c.buffersRequested, 1u);
  EXPECT_EQ(c.buffersRequested, c.buffersCompleted);
  EXPECT_EQ(c.foreignBuffers + c.buffersDeclined + c.outOfWindow + c.staleRecords + c.afterCollection, 0u);

  // Each kernel belongs to the op instance it was launched in.
  const auto kernels = logger.kernels();
  ASSERT_EQ(kernels.size(), 3u);
  int inFirst = 0, inSecond = 0;
  for (const LoggedActivity* k : kernels) {
    EXPECT_EQ(k->link, "verified");
    if (k->name == "MatMul") inFirst += k->linkedOp == first;
    if (k->name == "Add") inSecond += k->linkedOp == second;
  }
  EXPECT_EQ(inFirst, 2);
  EXPECT_EQ(inSecond, 1);
  EXPECT_EQ(logger.launches().size(), 3u);

  // Calls, in order: subscribe at configure; callbacks then kinds at start; at stop a flush, the
  // pull by COMMUNICATION's Disable (no collective ran), KERNEL's Disable once its rows came, a
  // last flush, then Unsubscribe and its flush (the harness has no SubscriptionRelease).
  EXPECT_EQ(indexOf("subscribe"), 0);
  EXPECT_LT(indexOf("registerCallbacks"), indexOf("enable(KERNEL)"));
  EXPECT_LT(indexOf("enable(RUNTIME_API)"), indexOf("flushAll"));
  EXPECT_LT(indexOf("flushAll"), indexOf("disable(COMMUNICATION)"));
  EXPECT_LT(indexOf("disable(COMMUNICATION)"), indexOf("disable(KERNEL)"));
  const auto calls = fake.calls();
  EXPECT_EQ(calls[calls.size() - 2], "unsubscribe");
  EXPECT_EQ(calls.back(), "flushAll");

  // What kineto asks for afterwards.
  auto info = s->getDeviceInfo();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->id, 0);
  EXPECT_EQ(s->getResourceInfos().size(), 1u);  // stream 1
  const auto meta = s->getMetadata();
  ASSERT_EQ(meta.count("torch_mspti"), 1u);
  EXPECT_NE(meta.at("torch_mspti").find("\"state\":\"processed\""), std::string::npos);
  auto trace = s->getTraceBuffer();
  ASSERT_NE(trace, nullptr);
  EXPECT_EQ(trace->gpuOpCount, 3);
  EXPECT_EQ(h.collected.load(), 1);
  ASSERT_TRUE(h.stats.last().has_value());
  EXPECT_EQ(h.stats.sessions(), 1u);
  EXPECT_EQ(h.stats.totals().kernels, 3u);
  s.reset();
  EXPECT_EQ(fake.count("unsubscribe"), 1u);  // the destructor has nothing left to do
  EXPECT_EQ(h.stats.sessions(), 1u);
  EXPECT_EQ(h.pool.outstanding(), 0u);
}

TEST_F(SessionTest, DevicesWithRecordsAreSynchronizedBeforeTheDrain) {
  h.config.visibleDevices = {4, 6};
  auto s = h.session();
  s->start();
  runOp(*s, 1);
  const uint64_t t = static_cast<uint64_t>(realtimeNs());
  RecordBuilder early;  // a kernel record on physical device 6 delivered during the session
  early.kernel(t, t + 10, 6, 2, launched.back(), "early");
  fake.writeNow(early);
  fake.deliverNow();
  s->stop();
  EXPECT_EQ(h.synchronized(), (std::vector<std::vector<int32_t>>{{1}}));  // logical index of physical 6
  h.config.synchronizeDevices = false;
  auto quiet = h.session();
  quiet->start();
  runOp(*quiet, 1);
  fake.deliverNow();
  quiet->stop();
  EXPECT_EQ(h.synchronized().size(), 1u);
}

TEST_F(SessionTest, TheHealthReportKinetoReadsBeforeProcessTraceIsTheFinalReport) {
  // kineto calls getMetadata() before processTrace() and the trace keeps the text it read
  // (kineto.md 1.3 step 4b): that text must be the report diagnostics() give afterwards.
  auto s = h.session();
  s->start();
  runOp(*s, 1);
  s->stop();
  const std::string json = s->getMetadata().at("torch_mspti");
  EXPECT_NE(json.find("\"state\":\"processed\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"library\":{\"available\":true,\"path\":\"/fake/libmspti.so\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"exit_reason\":\"balanced\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"links\":{"), std::string::npos) << "trace-phase counters are not known yet";
  CollectingLogger logger;
  s->processTrace(logger, ops.callback(), 0, 0);
  const auto last = h.stats.last();
  ASSERT_TRUE(last.has_value());
  JsonWriter w(JsonWriter::Target::kKinetoMetadata);
  w.beginObject();
  writeReport(w, *last, /*tracePhase=*/false);
  w.endObject();
  std::string published = w.str();  // {"state":...,"drain":{...}}: the trace's report minus library and link_states
  published = published.substr(1, published.size() - 2);
  EXPECT_NE(json.find(published), std::string::npos) << json << "\n" << published;
}

TEST_F(SessionTest, TwoSessionsInARowKeepTheirOwnRecords) {
  auto s1 = h.session();
  s1->start();
  runOp(*s1, 2, "first");
  s1->stop();
  CollectingLogger l1;
  s1->processTrace(l1, ops.callback(), 0, 0);
  s1.reset();
  EXPECT_EQ(h.staleBelow.load(), launched.back());

  auto s2 = h.session();
  s2->start();
  const int32_t op = runOp(*s2, 1, "second");
  s2->stop();
  CollectingLogger l2;
  s2->processTrace(l2, ops.callback(), 0, 0);
  ASSERT_EQ(l2.kernels().size(), 1u);
  EXPECT_EQ(l2.kernels()[0]->name, "second");
  EXPECT_EQ(l2.kernels()[0]->linkedOp, op);
  EXPECT_NE(l1.kernels()[0]->correlation, l2.kernels()[0]->correlation);  // host ids never reused
  EXPECT_EQ(h.stats.sessions(), 2u);
  EXPECT_EQ(h.stats.totals().kernels, 3u);
}

TEST_F(SessionTest, ASessionNeverStartedLetsGoOfTheSubscriber) {
  {
    auto s = h.session({ActivityType::CONCURRENT_KERNEL});
    EXPECT_TRUE(fake.subscribed());
  }  // destroyed without start(): unsubscribes, publishes
  EXPECT_FALSE(fake.subscribed());
  EXPECT_EQ(fake.count("enable(KERNEL)"), 0u);
  EXPECT_EQ(h.stats.sessions(), 1u);
}

TEST_F(SessionTest, DestroyedWhileCollectingDrainsAndUnsubscribes) {
  {
    auto s = h.session();
    s->start();
    const int32_t op = ops.add(currentTid(), realtimeNs(), realtimeNs() + 1'000'000'000, "left open");
    s->pushCorrelationId(static_cast<uint64_t>(op));  // never popped
    fake.launchKernel("k");
    EXPECT_EQ(fake.stackDepth(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0), 1u);
  }
  EXPECT_FALSE(fake.subscribed());
  EXPECT_EQ(fake.stackDepth(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0), 0u);  // left as found
  EXPECT_FALSE(sharedForwarder().armed());
  ASSERT_TRUE(h.stats.last().has_value());
  EXPECT_EQ(h.stats.last()->counters.unbalancedAtStop, 1u);
  EXPECT_EQ(h.stats.last()->counters.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL], 1u);
  EXPECT_EQ(h.pool.outstanding(), 0u);
}

TEST_F(SessionTest, OlderLibraryWithoutExternalCorrelationStillLinksByTheLaunchCall) {
  FakeMspti* f = &fake;
  f->withExternalCorrelation = false;
  f->withIsEnabled = false;
  SessionHarness old(f);
  auto s = old.session();
  s->start();
  const int32_t op = runOp(*s, 1);
  s->stop();
  CollectingLogger logger;
  s->processTrace(logger, ops.callback(), 0, 0);
  const SessionReport r = s->report();
  EXPECT_EQ(r.drain->order, "poll_first");
  EXPECT_EQ(std::count(r.enabledKinds.begin(), r.enabledKinds.end(), "EXTERNAL_CORRELATION"), 0);
  ASSERT_EQ(logger.kernels().size(), 1u);
  EXPECT_EQ(logger.kernels()[0]->linkedOp, op);
  EXPECT_EQ(logger.kernels()[0]->link, "recovered");  // no hint to verify, the launch call decides
}

// max_session_records bounds a session: what does not fit is counted (in the report and the
// trace's health report) and named in one warning.
TEST_F(SessionTest, RecordsOverTheCapAreCountedAndWarned) {
  h.config.maxSessionRecords = 4;
  auto s = h.session();
  s->start();
  runOp(*s, 5);  // 5 launches: 5 external, 5 API and 5 kernel records
  s->stop();
  CollectingLogger logger;
  s->processTrace(logger, ops.callback(), 0, 0);
  const SessionReport r = s->report();
  const uint64_t received = r.counters.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL] +
                            r.counters.recordsByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] +
                            r.counters.recordsByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API];
  EXPECT_EQ(received, 15u);
  EXPECT_EQ(r.counters.overCap, received - 4);
  EXPECT_LE(r.counters.deviceRows, 4u);
  EXPECT_TRUE(h.warned("max_session_records=4"));
  EXPECT_NE(s->getMetadata().at("torch_mspti").find("\"over_cap\":11"), std::string::npos);
}

}  // namespace
}  // namespace torch_mspti::test
