// The findings table: names unique, every row holds for facts made for it and its message names
// its numbers, the drain's rows exclude each other in priority order, and nothing holds for a
// clean session.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "SessionFindings.h"

namespace torch_mspti::test {
namespace {

std::vector<std::string> names(const SessionFacts& f) {
  std::vector<std::string> out;
  for (const FindingHit& h : findingsFor(f)) out.push_back(h.info->name);
  return out;
}

TEST(SessionFindings, NamesAreUniqueAndEveryRowHasAFix) {
  std::set<std::string> seen;
  for (const FindingInfo& f : findingTable()) {
    EXPECT_TRUE(seen.insert(f.name).second) << f.name;
    EXPECT_STRNE(f.fix, "") << f.name;
    EXPECT_EQ(findFinding(f.name), &f);
  }
  EXPECT_EQ(findFinding("no-such-finding"), nullptr);
  EXPECT_EQ(findingMessage("no-such-finding", SessionFacts{}), "");
}

TEST(SessionFindings, ACleanSessionHasNone) { EXPECT_TRUE(findingsFor(SessionFacts{}).empty()); }

TEST(SessionFindings, TheDrainGroupGivesOnlyItsFirstHoldingRow) {
  SessionFacts f;
  f.drainExitReason = "timeout";
  f.pendingLaunches = 7;
  f.drainTimeoutMs = 123;
  f.kernelRecords = 5;
  EXPECT_EQ(names(f), std::vector<std::string>{"timeout"});  // not also "pending"
  f.kernelRecords = 0;  // no kernel at all, library not preloaded: the preload is a possible cause
  f.preloadHint = "/opt/x/libmspti.so";
  const auto hits = findingsFor(f);
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_STREQ(hits[0].info->name, "no-kernels");
  EXPECT_NE(hits[0].message.find("7 launches"), std::string::npos) << hits[0].message;
  EXPECT_NE(hits[0].message.find("drain_timeout_ms=123"), std::string::npos) << hits[0].message;
  EXPECT_NE(hits[0].message.find("LD_PRELOAD=/opt/x/libmspti.so"), std::string::npos) << hits[0].message;
  f.peerPresent = true;  // a peer that disabled our kinds first comes before both
  f.peerDescription = "torch_npu's MSPTI backend";
  f.drainOrder = "poll_first";
  EXPECT_EQ(names(f), std::vector<std::string>{"peer-dropped"});
  f.drainEvidence = "kernels_need_preload";
  EXPECT_EQ(names(f), std::vector<std::string>{"kernels-need-preload"});
  f = SessionFacts{};
  f.pendingLaunches = 2;
  f.drainExitReason = "quiet";
  EXPECT_EQ(names(f), std::vector<std::string>{"pending"});
  f.drainEvidence = "unclassified_quiet";
  EXPECT_EQ(names(f), std::vector<std::string>{"unclassified"});
}

TEST(SessionFindings, IndependentRowsComeTogetherInTableOrder) {
  SessionFacts f;
  f.buffersDeclined = 3;
  f.bufferPoolCap = 64;
  f.outOfWindow = 1;
  f.overCap = 2;
  f.staleRecords = 4;
  f.clockUntrusted = true;
  f.deviceRows = 10;
  f.rowsFromOpLessThreads = 6;
  f.opsLogged = 5;
  EXPECT_EQ(names(f), (std::vector<std::string>{"declined", "window", "over-cap", "stale", "clock", "task-queue"}));
  EXPECT_NE(findingsFor(f)[0].message.find("buffer_pool_cap=64"), std::string::npos);
}

// torch passed no op at all (its external correlation off): every row is from a thread that ran
// no op, but the task queue is not the cause and is not named; the setting is.
TEST(SessionFindings, NoOpIdsAtAllNameTorchsSettingNotTheTaskQueue) {
  SessionFacts f;
  f.deviceRows = 15;
  f.rowsFromOpLessThreads = 15;
  f.rowsFromSessionThread = 15;
  f.opsLogged = 0;
  EXPECT_EQ(names(f), std::vector<std::string>{"no-op-ids"});
  EXPECT_NE(findingsFor(f)[0].message.find("disable_external_correlation=True"), std::string::npos);
  EXPECT_EQ(findingsFor(f)[0].message.find("TASK_QUEUE"), std::string::npos);
  f.opsLogged = 30;
  EXPECT_EQ(names(f), std::vector<std::string>{"task-queue"});
  // No op at all, but the rows came from a thread of the user's (not the profiling thread): that
  // thread ran no op torch records without profile_all_threads, which the task-queue row names.
  f.opsLogged = 0;
  f.rowsFromSessionThread = 0;
  EXPECT_EQ(names(f), std::vector<std::string>{"task-queue"});
}

TEST(SessionFindings, HintOnlyLinksAreUnverifiedOnOneOpThreadAndAmbiguousOnMore) {
  SessionFacts f;
  f.rowsWithoutApiRecord = 9;
  f.opThreads = 1;
  EXPECT_EQ(names(f), std::vector<std::string>{"unverified"});
  f.opThreads = 3;
  EXPECT_EQ(names(f), std::vector<std::string>{"ambiguous"});
  EXPECT_NE(findingsFor(f)[0].message.find("3 threads"), std::string::npos);
}

TEST(SessionFindings, PendingLaunchesAfterDeclinedBuffersAreBlamedOnTheCapNotTheTimeout) {
  SessionFacts f;
  f.drainExitReason = "timeout";
  f.pendingLaunches = 251;
  f.kernelRecords = 9;
  f.buffersDeclined = 4;
  f.bufferPoolCap = 1;
  EXPECT_EQ(names(f), (std::vector<std::string>{"declined", "declined-pending"}));
  EXPECT_NE(findingsFor(f)[1].message.find("does not bring them back"), std::string::npos);
}

TEST(SessionFindings, RowsWithoutAnApiRecordAreNotBlamedOnTheSettingWhenApiRecordsWereCollected) {
  SessionFacts f;
  f.rowsWithoutApiRecord = 3;  // their API records were lost (declined buffers), not switched off
  f.opThreads = 1;
  f.apiRecordsCollected = true;
  EXPECT_TRUE(names(f).empty());
  f.apiRecordsCollected = false;
  EXPECT_EQ(names(f), std::vector<std::string>{"unverified"});
}

TEST(SessionFindings, RowsWithNeitherApiRecordNorHintAreSaidToBeUnlinkable) {
  SessionFacts f;  // MSPTI 8.0.RC3 (no external correlation) with enable_api_records=False
  f.rowsWithoutLinkEvidence = 25;
  EXPECT_EQ(names(f), std::vector<std::string>{"no-link-evidence"});
  EXPECT_NE(findingsFor(f)[0].message.find("25 device rows"), std::string::npos);
  f.apiRecordsCollected = true;
  EXPECT_TRUE(names(f).empty());
}

TEST(SessionFindings, FailedNamesThePeerThatServesTheLane) {
  SessionFacts f;
  f.failureCause = "MSPTI unavailable";
  EXPECT_EQ(findingMessage("failed", f), "torch-mspti: the NPU lane of this trace will be empty: MSPTI unavailable");
  f.peerPresent = true;
  f.peerDescription = "torch_npu";
  EXPECT_NE(findingMessage("failed", f).find("holds only what torch_npu collects"), std::string::npos);
}

}  // namespace
}  // namespace torch_mspti::test
