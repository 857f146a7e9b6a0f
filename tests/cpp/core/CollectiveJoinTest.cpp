// CollectiveJoin: each COMMUNICATION row joined with the "communication" mstx range that holds its
// launch and with its process group; kineto's NCCL fields, Seq only when the group's calls and rows
// agree, and every row that cannot be joined counted by reason.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include <mspti/mspti_activity.h>

#include "CollectiveJoin.h"

namespace torch_mspti::test {
namespace {

const std::string kComm = "16898834563344171674", kOther = "777", kCommDomain = "communication",
                  kUserDomain = "default";
const std::string kAllGather = "hcom_allGather__674_0_1", kAllReduce = "hcom_allReduce__674_1_1",
                  kSend = "hcom_send__674_2_1", kAllToAllV = "hcom_alltoallv__674_3_1";

std::string message(const std::string& op, const std::string& group, const std::string& extra = "") {
  // As torch_npu writes it: every quote backslash-escaped (torch_npu.md 5).
  return "{\\\"opName\\\": \\\"" + op + "\\\",\\\"groupName\\\": \\\"" + group + "\\\"" + extra + "}";
}

class Facts final : public RowFacts {
 public:
  void text(const std::string& key, const std::string& value) override { out[key] = value; }
  void number(const std::string& key, uint64_t value) override { out[key] = std::to_string(value); }
  void real(const std::string& key, double value) override { out[key] = std::to_string(value); }
  std::map<std::string, std::string> out;
};

// A session's launches and markers, built by hand: one launch per row, on device 0.
struct Fixture {
  LaunchTable launches;
  MarkerTable markers;
  std::vector<std::string> messages;  // stable: reserved
  std::vector<ApiRecord> calls;
  Fixture() {
    messages.reserve(64);
    calls.reserve(64);
  }

  // A COMMUNICATION row on (device 0, stream) over [start, end], launched by thread `tid` at `callAt`.
  void row(const std::string* name, int64_t start, int64_t end, uint64_t count, const std::string* comm = &kComm,
           uint32_t stream = 6, uint32_t tid = 42, int64_t callAt = 0) {
    DeviceRow r;
    r.record.kind = MSPTI_ACTIVITY_KIND_COMMUNICATION;
    r.record.start = start;
    r.record.end = end;
    r.record.count = count;
    r.record.name = name;
    r.record.group = comm;
    r.record.streamId = stream;
    r.device = 0;
    ApiRecord& call = calls.emplace_back();
    call.processId = 9;
    call.threadId = tid;
    Launch l;
    l.correlationId = launches.launches.size() + 1;
    l.call = &call;
    l.callTrusted = callAt != 0;
    l.callStart = callAt;
    l.firstRow = static_cast<uint32_t>(launches.rows.size());
    l.rowCount = 1;
    launches.rows.push_back(r);
    launches.launches.push_back(l);
  }

  // A paired range with `text` as its raw message, on a device stream or a host thread.
  void range(bool onDevice, int32_t lane, int32_t row, int64_t start, int64_t end, const std::string& text,
             const std::string* domain = &kCommDomain) {
    Marker m;
    m.kind = MarkerKind::kRange;
    m.onDevice = onDevice;
    m.lane = lane;
    m.row = row;
    m.start = start;
    m.end = end;
    m.domain = domain;
    m.name = m.message = &messages.emplace_back(text);
    markers.markers.push_back(m);
  }
};

CommunicatorMap groupOf(const std::string& comm, int64_t seq, std::vector<int64_t> ranks = {0, 1, 2, 3},
                        int64_t rank = 1) {
  CommunicatorMap m;
  m[comm] = {comm, "0", "default_pg", std::move(ranks), rank, seq};
  return m;
}

std::map<std::string, std::string> describe(const CollectiveTable& t, const Fixture& f, uint32_t row) {
  Facts facts;
  describeCollective(&t, row, f.launches.rows[row].record, facts);
  return facts.out;
}

TEST(CollectiveJoin, ParsesTorchNpusEscapedMessageAndPlainJson) {
  const auto escaped = parseCollectiveMessage(message("HcclAllreduce", kComm, ",\\\"count\\\": \\\"5\\\""));
  ASSERT_TRUE(escaped);
  EXPECT_EQ(escaped->at("opName"), "HcclAllreduce");
  EXPECT_EQ(escaped->at("groupName"), kComm);
  EXPECT_EQ(escaped->at("count"), "5");
  const auto plain = parseCollectiveMessage(R"( {"srcRank": 3, "a\"b": "x\\y"} )");
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->at("srcRank"), "3");
  EXPECT_EQ(plain->at("a\"b"), "x\\y");
  for (const char* bad : {"", "step 3", "{\"a\": }", "{\"a\": \"b\"", "{\"a\": \"b\"} tail", "[1, 2]", "{\"a\" \"b\"}"})
    EXPECT_FALSE(parseCollectiveMessage(bad)) << bad;
}

// HcclScatter's count is the per-rank receive count and a gather's the per-rank send count, so the
// root's whole buffer is count x ranks: torch's NCCL convention is In 32 / Out 8 for a scatter of
// 8 elements per rank on 4 ranks, In 8 / Out 32 for a gather (torch_npu.md 6). A corrupt count
// whose product does not fit in int64 is unknown (-1), not a wrapped number.
TEST(CollectiveJoin, ScatterAndGatherSizesFollowTorchsConvention) {
  static const std::string kScatter = "hcom_scatter__674_0_1", kGather = "hcom_gather__674_1_1";
  Fixture f;
  f.row(&kScatter, 1000, 2000, 8);
  f.row(&kGather, 3000, 4000, 8);
  f.row(&kAllGather, 5000, 6000, std::numeric_limits<int64_t>::max() / 2);
  f.range(true, 0, 6, 990, 2000, message("HcclScatter", kComm));
  f.range(true, 0, 6, 2990, 4000, message("HcclGather", kComm));
  f.range(true, 0, 6, 4990, 6000, message("HcclAllGather", kComm));
  SessionCounters c;
  const CollectiveTable t =
      CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 10), true, groupOf(kComm, 13), c);
  ASSERT_EQ(c.collectivesJoined, 3u);
  const auto scatter = describe(t, f, 0), gather = describe(t, f, 1), corrupt = describe(t, f, 2);
  EXPECT_EQ(scatter.at("In msg nelems"), "32");
  EXPECT_EQ(scatter.at("Out msg nelems"), "8");
  EXPECT_EQ(gather.at("In msg nelems"), "8");
  EXPECT_EQ(gather.at("Out msg nelems"), "32");
  EXPECT_EQ(corrupt.count("Out msg nelems"), 0u);  // unknown: not written, as for an all-to-all-v
}

TEST(CollectiveJoin, ARowJoinsTheDeviceRangeOnItsStreamAndItsGroup) {
  Fixture f;
  f.row(&kAllGather, 1000, 2000, 8);
  f.range(true, 0, 7, 900, 2100, message("HcclAllGather", kComm));  // another stream: not this row's
  f.range(true, 0, 6, 990, 2000, message("HcclAllGather", kComm));
  SessionCounters c;
  const CollectiveTable t =
      CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 10), true, groupOf(kComm, 11), c);
  EXPECT_EQ(c.collectiveRows, 1u);
  EXPECT_EQ(c.collectivesJoined, 1u);
  const auto a = describe(t, f, 0);
  // HcclAllGather's count is its send count: the receive buffer holds count x ranks (torch_npu.md 6).
  EXPECT_EQ(a.at("In msg nelems"), "8");
  EXPECT_EQ(a.at("Out msg nelems"), "32");
  EXPECT_EQ(a.at("Group size"), "4");
  EXPECT_EQ(a.at("Process Group Name"), "0");
  EXPECT_EQ(a.at("Process Group Description"), "default_pg");
  EXPECT_EQ(a.at("Process Group Ranks"), "[0, 1, 2, 3]");
  EXPECT_EQ(a.at("Rank"), "1");
  EXPECT_EQ(a.at("Seq"), "11");
  EXPECT_EQ(a.count("Src Rank") + a.count("Dst Rank"), 0u);
}

TEST(CollectiveJoin, WithoutADeviceRangeTheHostRangeOnTheLaunchThreadJoins) {
  Fixture f;
  f.row(&kAllReduce, 5000, 6000, 4, &kComm, 6, /*tid=*/42, /*callAt=*/1500);
  f.range(false, 9, 41, 1000, 2000, message("HcclAllreduce", kComm));  // another thread
  f.range(false, 9, 42, 1400, 1600, message("HcclAllreduce", kComm));
  f.range(false, 9, 42, 1450, 1550, message("step", kComm), &kUserDomain);  // a user range, not HCCL's
  SessionCounters c;
  const CollectiveTable t = CollectiveTable::build(f.launches, f.markers, {}, true, groupOf(kComm, 1), c);
  EXPECT_EQ(c.collectivesJoined, 1u);
  EXPECT_EQ(describe(t, f, 0).at("Seq"), "1");  // a group made during the session began at 0
}

TEST(CollectiveJoin, RowsThatCannotBeJoinedKeepWhatMsptiGaveAndAreCountedByReason) {
  Fixture f;
  f.row(&kAllReduce, 1000, 1100, 4);                 // no range at all
  f.row(&kAllReduce, 2000, 2100, 4);                 // a range naming another communicator
  f.row(&kSend, 3000, 3100, 4);                      // a send whose message has no destRank
  f.row(&kAllReduce, 4000, 4100, 4, &kOther);        // a communicator torch.distributed does not know
  f.row(&kAllReduce, 5000, 5100, 4, &kComm, 6, 42);  // a range whose message is not JSON
  f.range(true, 0, 6, 1990, 2100, message("HcclAllreduce", kOther));
  f.range(true, 0, 6, 2990, 3100, message("HcclSend", kComm));
  f.range(true, 0, 6, 3990, 4100, message("HcclAllreduce", kOther));
  f.range(true, 0, 6, 4990, 5100, "HcclAllreduce " + kComm);
  SessionCounters c;
  const CollectiveTable t =
      CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 0), true, groupOf(kComm, 4), c);
  EXPECT_EQ(c.collectiveRows, 5u);
  EXPECT_EQ(c.collectivesJoined, 0u);
  EXPECT_EQ(c.collectivesUnjoined, 5u);
  EXPECT_EQ(c.collectivesNoMarker, 1u);
  EXPECT_EQ(c.collectivesBadMessage, 3u);
  EXPECT_EQ(c.collectivesNoGroup, 1u);
  const auto a = describe(t, f, 3);
  const std::map<std::string, std::string> mspti = {{"In msg nelems", "4"}, {"Process Group Name", kOther}};
  EXPECT_EQ(a, mspti);
}

TEST(CollectiveJoin, PointToPointRowsNameBothEndsAsGroupRanks) {
  Fixture f;
  f.row(&kSend, 1000, 1100, 5);
  f.range(true, 0, 6, 990, 1100, message("HcclSend", kComm, ",\\\"destRank\\\": \\\"3\\\""));
  SessionCounters c;
  const CollectiveTable t =
      CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 0), true, groupOf(kComm, 1), c);
  const auto a = describe(t, f, 0);
  EXPECT_EQ(a.at("Src Rank"), "1");  // this rank in the group
  EXPECT_EQ(a.at("Dst Rank"), "3");
  EXPECT_EQ(a.at("In msg nelems"), "5");
  EXPECT_EQ(a.at("Out msg nelems"), "5");
}

TEST(CollectiveJoin, APeerOutsideTheGroupIsABadMessage) {
  Fixture f;
  f.row(&kSend, 1000, 1100, 5);
  f.range(true, 0, 6, 990, 1100, message("HcclSend", kComm, ",\\\"destRank\\\": \\\"7\\\""));
  SessionCounters c;
  CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 0), true, groupOf(kComm, 1), c);
  EXPECT_EQ(c.collectivesJoined, 0u);
  EXPECT_EQ(c.collectivesBadMessage, 1u);
}

TEST(CollectiveJoin, AGroupDestroyedBeforeStopIsNamedFromTheStartSampleWithoutSeq) {
  Fixture f;
  f.row(&kAllReduce, 1000, 1100, 4);
  f.range(true, 0, 6, 990, 1100, message("HcclAllreduce", kComm));
  SessionCounters c;
  const CollectiveTable t = CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 3), true, {}, c);
  EXPECT_EQ(c.collectivesJoined, 1u);
  EXPECT_EQ(c.collectivesNoSeq, 1u);
  const auto a = describe(t, f, 0);
  EXPECT_EQ(a.at("Process Group Name"), "0");
  EXPECT_EQ(a.count("Seq"), 0u);
}

TEST(CollectiveJoin, SeqNumbersTheGroupsRowsByDeviceStartOnlyWhenTheyAreExactlyItsCalls) {
  Fixture f;  // three rows of one group, launched in another order than they ran
  f.row(&kAllReduce, 3000, 3100, 4);
  f.row(&kAllToAllV, 1000, 1100, 4);
  f.row(&kAllReduce, 2000, 2100, 4);
  for (int64_t s : {990, 1990, 2990}) f.range(true, 0, 6, s, s + 200, message("HcclAllreduce", kComm));
  SessionCounters c;
  const CollectiveTable exact =
      CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 7), true, groupOf(kComm, 10), c);
  EXPECT_EQ(describe(exact, f, 1).at("Seq"), "8");
  EXPECT_EQ(describe(exact, f, 2).at("Seq"), "9");
  EXPECT_EQ(describe(exact, f, 0).at("Seq"), "10");
  EXPECT_EQ(describe(exact, f, 1).count("Out msg nelems"), 0u);  // all-to-all-v: per-peer counts unknown
  EXPECT_EQ(c.collectivesNoSeq, 0u);

  // Four calls for three rows (a record lost, or a call of the group outside the window): no Seq.
  SessionCounters lost;
  const CollectiveTable off =
      CollectiveTable::build(f.launches, f.markers, groupOf(kComm, 6), true, groupOf(kComm, 10), lost);
  EXPECT_EQ(lost.collectivesJoined, 3u);
  EXPECT_EQ(lost.collectivesNoSeq, 3u);
  EXPECT_EQ(describe(off, f, 0).count("Seq"), 0u);

  // No sample at start (no provider then), or a backend that does not say: no Seq either.
  SessionCounters unsampled;
  CollectiveTable::build(f.launches, f.markers, {}, false, groupOf(kComm, 10), unsampled);
  EXPECT_EQ(unsampled.collectivesNoSeq, 3u);
  SessionCounters silent;
  CollectiveTable::build(f.launches, f.markers, groupOf(kComm, -1), true, groupOf(kComm, -1), silent);
  EXPECT_EQ(silent.collectivesNoSeq, 3u);
}

TEST(CollectiveJoin, OtherKindsGetNoCollectiveFacts) {
  DeviceRecord kernel;
  kernel.kind = MSPTI_ACTIVITY_KIND_KERNEL;
  Facts facts;
  describeCollective(nullptr, 0, kernel, facts);
  EXPECT_TRUE(facts.out.empty());
}

}  // namespace
}  // namespace torch_mspti::test
