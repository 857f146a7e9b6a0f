// The drop rules of the session's tail are the same for KERNEL and COMMUNICATION records (both
// travel on the SOC log channel, mspti.md 2.3, 5.3, 5.6): one parameterised suite runs each rule
// once per kind.
#include "SimTestSupport.h"

namespace torch_mspti::sim::test {
namespace {

class DeviceRecordDropRulesTest : public SimTest, public ::testing::WithParamInterface<msptiActivityKind> {
 protected:
  msptiActivityKind kind() const { return GetParam(); }

  // One task of the parameter's kind on (device, stream); returns its correlation id.
  uint64_t launchTask(const char* name, uint32_t device, uint32_t stream, uint64_t durationNs) {
    if (kind() == MSPTI_ACTIVITY_KIND_KERNEL) {
      return api_.launchKernel(name, nullptr, device, stream, durationNs);
    }
    return api_.launchCommunication(name, "RING", "group", 4, 16, device, stream, durationNs, nullptr);
  }

  // Names of the records of the parameter's kind, in buffer order.
  static std::vector<std::string> namesOf(const Records& records, msptiActivityKind kind) {
    std::vector<std::string> names;
    if (kind == MSPTI_ACTIVITY_KIND_KERNEL) {
      for (const KernelView& k : records.kernels) names.push_back(k.name);
    } else {
      for (const CommunicationView& c : records.communications) names.push_back(c.name);
    }
    return names;
  }
};

TEST_P(DeviceRecordDropRulesTest, DisablePullsEndedRecordsOnlyAndOfBothSocLogKinds) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);  // the driver never reports
  ASSERT_EQ(api_.setOption("disable_pulls", 1), 0);
  subscribe();
  enable({MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION});
  const uint64_t ended = launchTask("short", 0, 11, 1'000'000);
  launchTask("long", 7, 11, 5'000'000'000);  // own device: no later synchronize(0) waits for it
  waitUntilEnded(0, 11);
  // Disabling the OTHER kind flushes the same channel.
  const msptiActivityKind other =
      kind() == MSPTI_ACTIVITY_KIND_KERNEL ? MSPTI_ACTIVITY_KIND_COMMUNICATION : MSPTI_ACTIVITY_KIND_KERNEL;
  ASSERT_EQ(api_.disable(other), MSPTI_SUCCESS);
  // the reader parses the pulled record after the Disable (its kind is still on); the running
  // task is not waited for
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 1; }));
  const Records records = flushAndDecode();
  EXPECT_EQ(namesOf(records, kind()), std::vector<std::string>{"short"});
  const uint64_t id = kind() == MSPTI_ACTIVITY_KIND_KERNEL ? records.kernels.at(0).correlationId
                                                           : records.communications.at(0).correlationId;
  EXPECT_EQ(id, ended);
}

TEST_P(DeviceRecordDropRulesTest, RecordsDueAfterTheirKindWasDisabledAreDropped) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 100'000'000), 0);
  ASSERT_EQ(api_.setOption("disable_pulls", 0), 0);
  subscribe();
  enable({kind()});
  launchTask("late", 0, 12, 1000);
  ASSERT_EQ(api_.disable(kind()), MSPTI_SUCCESS);
  const auto before = api_.stats();
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  EXPECT_EQ(api_.stats().records_dropped - before.records_dropped, 1u);
  EXPECT_TRUE(namesOf(flushAndDecode(), kind()).empty());
  // drop_after_disable=0: the parser keeps running after Disable.
  ASSERT_EQ(api_.setOption("drop_after_disable", 0), 0);
  enable({kind()});
  launchTask("kept", 0, 12, 1000);
  ASSERT_EQ(api_.disable(kind()), MSPTI_SUCCESS);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  EXPECT_EQ(namesOf(flushAndDecode(), kind()), std::vector<std::string>{"kept"});
}

TEST_P(DeviceRecordDropRulesTest, UnsubscribeDropsRecordsInFlightAndSubscribeDoesNotRestartDeviceTasks) {
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 10'000'000'000), 0);
  subscribe();
  enable({kind()});
  launchTask("inflight", 0, 13, 1000);
  const auto before = api_.stats();
  ASSERT_EQ(before.records_pending, 1u);
  ASSERT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
  subscriber_ = nullptr;
  EXPECT_EQ(api_.stats().records_pending, 0u);
  EXPECT_EQ(api_.stats().records_dropped - before.records_dropped, 1u);
  // Re-subscribed with the kind still on: ids, but no device task reads the channel.
  subscribe();
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 1'000'000), 0);
  const auto again = api_.stats();
  EXPECT_NE(launchTask("orphan", 0, 13, 1000), 0u);
  EXPECT_EQ(api_.stats().records_pending, 0u);
  EXPECT_EQ(api_.stats().records_dropped - again.records_dropped, 1u);
  enable({kind()});  // Enable while subscribed starts them
  launchTask("fresh", 0, 13, 1000);
  api_.synchronize(0);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
  EXPECT_EQ(namesOf(flushAndDecode(), kind()), std::vector<std::string>{"fresh"});
}

INSTANTIATE_TEST_SUITE_P(SocLogKinds, DeviceRecordDropRulesTest,
                         ::testing::Values(MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION),
                         [](const ::testing::TestParamInfo<msptiActivityKind>& info) {
                           return info.param == MSPTI_ACTIVITY_KIND_KERNEL ? "Kernel" : "Communication";
                         });

}  // namespace
}  // namespace torch_mspti::sim::test
