// SessionCounters: add() and since() for every counter of the list, the merge rule of maxima,
// saturation when a process-wide source reads lower than before, and the JSON of the report
// (every counter in its group, trace-phase groups only when asked).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "JsonWriter.h"
#include "SessionCounters.h"
#include "SessionStats.h"

namespace torch_mspti::test {
namespace {

// Counter i gets base + i (distinct per counter, so a swapped field shows).
SessionCounters filled(uint64_t base) {
  SessionCounters c;
  for (int i = 0; i < kCounterCount; ++i) c.*(kCounterInfo[i].field) = base + static_cast<uint64_t>(i);
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) c.recordsByKind[k] = base + 100 + static_cast<uint64_t>(k);
  return c;
}

TEST(SessionCounters, TheListIsComplete) {
  EXPECT_GT(kCounterCount, 30);
  std::set<std::string> keys;
  std::set<const void*> fields;
  SessionCounters c;
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& info = kCounterInfo[i];
    EXPECT_TRUE(keys.insert(std::string(info.group) + "." + info.key).second) << info.key;
    EXPECT_TRUE(fields.insert(&(c.*(info.field))).second) << info.key;
    EXPECT_NE(std::string(info.description), "") << info.key;
  }
  // Every uint64_t of the struct before recordsByKind is a listed counter; markersByDomain follows.
  EXPECT_EQ(sizeof(SessionCounters), sizeof(uint64_t) * (static_cast<size_t>(kCounterCount) +
                                                         MSPTI_ACTIVITY_KIND_COUNT * (1 + kDropReasonCount)) +
                                         sizeof(c.markersByDomain));
}

TEST(SessionCounters, MarkersByDomainAddAndSubtract) {
  SessionCounters a, b;
  a.markersByDomain = {{"default", 3}, {"train", 1}};
  b.markersByDomain = {{"default", 2}, {"eval", 4}};
  a.add(b);
  const std::map<std::string, uint64_t> sum = {{"default", 5}, {"eval", 4}, {"train", 1}};
  EXPECT_EQ(a.markersByDomain, sum);
  const SessionCounters d = a.since(b);
  const std::map<std::string, uint64_t> diff = {{"default", 3}, {"eval", 0}, {"train", 1}};
  EXPECT_EQ(d.markersByDomain, diff);
}

TEST(SessionCounters, AddSumsEveryCounterAndMaximaTakeTheLarger) {
  SessionCounters a = filled(1000);
  const SessionCounters b = filled(5);
  a.add(b);
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& info = kCounterInfo[i];
    const uint64_t want = info.merge == CounterMerge::kMax ? 1000u + i : 1000u + i + 5u + i;
    EXPECT_EQ(a.*(info.field), want) << info.key;
  }
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k)
    EXPECT_EQ(a.recordsByKind[k], 1100u + k + 105u + k) << "kind " << k;
  SessionCounters m;
  m.maxOverlapShiftNs = 7;
  SessionCounters n;
  n.maxOverlapShiftNs = 3;
  m.add(n);
  EXPECT_EQ(m.maxOverlapShiftNs, 7u);
}

TEST(SessionCounters, SinceTakesDifferencesAndSaturates) {
  const SessionCounters later = filled(1000);
  const SessionCounters earlier = filled(10);
  const SessionCounters d = later.since(earlier);
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& info = kCounterInfo[i];
    const uint64_t want = info.merge == CounterMerge::kMax ? 1000u + i : 990u;
    EXPECT_EQ(d.*(info.field), want) << info.key;
  }
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) EXPECT_EQ(d.recordsByKind[k], 990u);
  // A source that reads lower than before (reset, wrapped): 0, never 2^64 - x.
  const SessionCounters backwards = earlier.since(later);
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& info = kCounterInfo[i];
    if (info.merge == CounterMerge::kSum) {
      EXPECT_EQ(backwards.*(info.field), 0u) << info.key;
    }
  }
  for (int k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) EXPECT_EQ(backwards.recordsByKind[k], 0u);
}

TEST(SessionCounters, RecordsAndLinkedRows) {
  SessionCounters c;
  c.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL] = 3;
  c.recordsByKind[MSPTI_ACTIVITY_KIND_API] = 4;
  EXPECT_EQ(c.records(), 7u);
  c.linkedVerified = 1;
  c.linkedRecovered = 2;
  c.linkedUnverified = 4;
  c.unlinkedNoOp = 8;
  EXPECT_EQ(c.linkedRows(), 7u);
}

TEST(SessionCounters, JsonHasEveryCounterInItsGroup) {
  const SessionCounters c = filled(1);
  JsonWriter stop;
  stop.beginObject();
  writeCounters(stop, c, /*tracePhase=*/false);
  stop.endObject();
  JsonWriter trace;
  trace.beginObject();
  writeCounters(trace, c, /*tracePhase=*/true);
  trace.endObject();
  for (int i = 0; i < kCounterCount; ++i) {
    const CounterInfo& info = kCounterInfo[i];
    const std::string member = "\"" + std::string(info.key) + "\":" + std::to_string(1 + i);
    const std::string group = "\"" + std::string(info.group) + "\":{";
    const size_t g = trace.str().find(group);
    ASSERT_NE(g, std::string::npos) << info.group;
    const size_t end = trace.str().find('}', g);
    EXPECT_NE(trace.str().substr(g, end - g).find(member), std::string::npos) << info.key << " in " << info.group;
    const bool inStop = stop.str().find(group) != std::string::npos;
    EXPECT_EQ(inStop, info.phase == CounterPhase::kStop) << info.group;
  }
  EXPECT_NE(trace.str().find("\"KERNEL\":103"), std::string::npos) << trace.str();
  EXPECT_NE(trace.str().find("\"linked_rows\":"), std::string::npos);
  EXPECT_NE(trace.str().find("\"link_ratio\":"), std::string::npos);
  EXPECT_EQ(stop.str().find("\"link_ratio\""), std::string::npos);
}

TEST(StatsRegistry, PublishesTheLastReportAndTotals) {
  StatsRegistry stats;
  SessionReport r;
  r.counters.kernels = 5;
  r.state = SessionState::kStopped;
  stats.publish(r, /*final=*/false);
  EXPECT_EQ(stats.sessions(), 0u);
  EXPECT_EQ(stats.totals().kernels, 0u);
  r.state = SessionState::kProcessed;
  stats.publish(r, /*final=*/true);
  stats.publish(r, /*final=*/true);
  EXPECT_EQ(stats.sessions(), 2u);
  EXPECT_EQ(stats.totals().kernels, 10u);
  ASSERT_TRUE(stats.last().has_value());
  EXPECT_EQ(stats.last()->state, SessionState::kProcessed);
  EXPECT_TRUE(stats.firstTime("copies"));
  EXPECT_FALSE(stats.firstTime("copies"));
  const std::string json = sessionReportJson(stats);
  EXPECT_NE(json.find("\"state\":\"processed\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"sessions\":2"), std::string::npos) << json;
}

}  // namespace
}  // namespace torch_mspti::test
