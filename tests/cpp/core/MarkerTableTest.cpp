// MarkerTable: mstx MARKER records paired into ranges by (sourceKind, id), whatever order and
// buffer they arrive in; unpaired starts and ends counted and kept as instants; counts by domain.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <mspti/mspti_activity.h>

#include "MarkerTable.h"

namespace torch_mspti::test {
namespace {

const std::string kStep = "step", kLoad = "load", kTrain = "train", kDefault = "default";

MarkerRecord rec(uint32_t flag, uint32_t source, int64_t t, uint64_t id, const std::string* name = nullptr,
                 const std::string* domain = nullptr, uint32_t first = 7, uint32_t second = 8) {
  MarkerRecord r;
  r.flag = flag;
  r.sourceKind = source;
  r.timestamp = t;
  r.id = id;
  r.name = name;
  r.domain = domain;
  r.first = first;
  r.second = second;
  return r;
}

constexpr uint32_t kHost = MSPTI_ACTIVITY_SOURCE_KIND_HOST, kDevice = MSPTI_ACTIVITY_SOURCE_KIND_DEVICE;

// The table of records inside a window that holds them all, on the realtime clock.
MarkerTable buildAll(const std::vector<MarkerRecord>& records, const std::vector<uint32_t>& visible,
                     const MarkerDomainFilter* keep, SessionCounters& c) {
  const CorrelationLedger ledger(0);
  Admission admission(HostClock::realtime(), {0, INT64_MAX, INT64_MAX}, ledger, c);
  return MarkerTable::build(records, admission, visible, keep, c);
}

TEST(MarkerTable, PairsRangesByIdInAnyArrivalOrder) {
  // The end arrives first (another buffer), and host and device records share the id.
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END, kHost, 900, 5),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE, kDevice, 1900, 6, nullptr, nullptr, 1, 3),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START, kHost, 100, 5, &kStep, &kTrain),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE, kDevice, 1000, 6, nullptr, nullptr, 1, 3),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE, kHost, 950, 6, &kLoad, &kDefault),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE, kHost, 960, 6),
  };
  SessionCounters c;
  const MarkerTable t = buildAll(records, {}, nullptr, c);
  ASSERT_EQ(t.markers.size(), 3u);
  EXPECT_EQ(c.markerRanges, 3u);
  EXPECT_EQ(c.markerUnpairedStarts + c.markerUnpairedEnds, 0u);
  const Marker& host = t.markers[0];
  EXPECT_EQ(host.kind, MarkerKind::kRange);
  EXPECT_FALSE(host.onDevice);
  EXPECT_EQ(host.start, 100);
  EXPECT_EQ(host.end, 900);
  EXPECT_EQ(host.lane, 7);
  EXPECT_EQ(host.row, 8);
  ASSERT_TRUE(host.name && host.domain);
  EXPECT_EQ(*host.name, "step");
  EXPECT_EQ(*host.domain, "train");
  const Marker& device = t.markers[2];
  EXPECT_TRUE(device.onDevice);
  EXPECT_EQ(device.start, 1000);
  EXPECT_EQ(device.end, 1900);
  EXPECT_EQ(device.lane, 1);
  EXPECT_EQ(device.row, 3);
  // the device records carry no message: the host start with the same id gives it
  ASSERT_TRUE(device.name && device.domain);
  EXPECT_EQ(*device.name, "load");
  EXPECT_EQ(*device.domain, "default");
  const std::map<std::string, uint64_t> byDomain = {{"train", 1}, {"default", 2}};
  EXPECT_EQ(c.markersByDomain, byDomain);
}

TEST(MarkerTable, UnpairedEndsAndStartsAreCountedAndKeptAsInstants) {
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END, kHost, 200, 1),            // its start was before the window
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START, kHost, 300, 2, &kStep),  // its end comes after the window
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, kHost, 250, 3, &kLoad),
      rec(0x40, kHost, 260, 4, &kLoad),  // not a MARKER_* flag
  };
  SessionCounters c;
  const MarkerTable t = buildAll(records, {}, nullptr, c);
  ASSERT_EQ(t.markers.size(), 4u);
  EXPECT_EQ(c.markerUnpairedEnds, 1u);
  EXPECT_EQ(c.markerUnpairedStarts, 1u);
  EXPECT_EQ(c.markerMarks, 1u);
  EXPECT_EQ(c.markerUnknownFlag, 1u);
  EXPECT_EQ(c.markerRanges, 0u);
  EXPECT_EQ(t.markers[0].kind, MarkerKind::kUnpairedEnd);
  EXPECT_EQ(t.markers[0].start, t.markers[0].end);
  EXPECT_EQ(t.markers[3].kind, MarkerKind::kUnpairedStart);
  EXPECT_EQ(*t.markers[3].name, "step");
  EXPECT_EQ(c.markersByDomain.at(kUnknownMarkerDomain), 4u);  // no record here names a domain
}

TEST(MarkerTable, ASecondStartWithTheSameIdLeavesTheFirstUnpaired) {
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START, kHost, 100, 9, &kStep),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START, kHost, 200, 9, &kLoad),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END, kHost, 300, 9),
  };
  SessionCounters c;
  const MarkerTable t = buildAll(records, {}, nullptr, c);
  EXPECT_EQ(c.markerUnpairedStarts, 1u);
  EXPECT_EQ(c.markerRanges, 1u);
  ASSERT_EQ(t.markers.size(), 2u);
  EXPECT_EQ(*t.markers[1].name, "load");
  EXPECT_EQ(t.markers[1].end, 300);
}

TEST(MarkerTable, DeviceMarkersUseTheLogicalDevice) {
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE, kDevice, 100, 1, &kStep, nullptr, 6, 2)};
  SessionCounters c;
  const MarkerTable t = buildAll(records, {4, 6}, nullptr, c);  // ASCEND_RT_VISIBLE_DEVICES=4,6
  ASSERT_EQ(t.markers.size(), 1u);
  EXPECT_EQ(t.markers[0].lane, 1);
  EXPECT_EQ(t.markers[0].row, 2);
}

TEST(MarkerTable, AnIncludeListDropsOtherDomainsAndCountsThem) {
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, kHost, 100, 1, &kStep, &kTrain),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, kHost, 200, 2, &kLoad, &kDefault),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END, kHost, 300, 3),  // no domain known: kept
  };
  MarkerDomainFilter keep;
  keep.mode = MarkerDomainFilter::Mode::kInclude;
  keep.names = {"train"};
  SessionCounters c;
  const MarkerTable t = buildAll(records, {}, &keep, c);
  ASSERT_EQ(t.markers.size(), 2u);
  EXPECT_EQ(*t.markers[0].name, "step");
  EXPECT_EQ(t.markers[1].kind, MarkerKind::kUnpairedEnd);
  EXPECT_EQ(c.markerNotIncluded, 1u);
  const std::map<std::string, uint64_t> byDomain = {{"train", 1}, {kUnknownMarkerDomain, 1}};
  EXPECT_EQ(c.markersByDomain, byDomain);
  // The counts by kind are of the kept markers, as those by domain are: the dropped mark is in
  // not_included only.
  EXPECT_EQ(c.markerMarks, 1u);
  EXPECT_EQ(c.markerUnpairedEnds, 1u);
}

// A range whose end has its start's timestamp is a range of no length, whatever order the two
// records come in (an end sorted before its start at equal times would leave both unpaired).
TEST(MarkerTable, AZeroLengthRangePairs) {
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_END, kHost, 500, 9),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_START, kHost, 500, 9, &kStep, &kTrain),
  };
  SessionCounters c;
  const MarkerTable t = buildAll(records, {}, nullptr, c);
  ASSERT_EQ(t.markers.size(), 1u);
  EXPECT_EQ(t.markers[0].kind, MarkerKind::kRange);
  EXPECT_EQ(t.markers[0].start, 500);
  EXPECT_EQ(t.markers[0].end, 500);
  EXPECT_EQ(c.markerUnpairedStarts + c.markerUnpairedEnds, 0u);
}

// Markers go through the session's admission: a marker of an earlier session delivered late (its
// time before this session's start) is dropped and counted by kind, as a late kernel is; a host
// marker on a raw CLOCK_MONOTONIC_RAW library is put on the realtime clock as API records are.
TEST(MarkerTable, MarkersAreWindowedAndOnTheSessionsClock) {
  const std::vector<MarkerRecord> records = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE, kDevice, 900, 3, nullptr, nullptr, 0,
          2),  // session 1's
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, kHost, 1500, 4, &kStep, &kTrain),
  };
  SessionCounters c;
  const CorrelationLedger ledger(0);
  Admission admission(HostClock::realtime(), {1000, 2000, 2100}, ledger, c);
  const MarkerTable t = MarkerTable::build(records, admission, {}, nullptr, c);
  ASSERT_EQ(t.markers.size(), 1u);
  EXPECT_EQ(t.markers[0].id, 4u);
  EXPECT_EQ(c.outOfWindow, 1u);
  EXPECT_EQ(c.droppedByKind[kDropOutOfWindow][MSPTI_ACTIVITY_KIND_MARKER], 1u);

  // A library whose host times are raw CLOCK_MONOTONIC_RAW (HostClock kMonotonicRaw, decided from
  // its API records): host markers are converted with the clock's offset, device markers are not.
  constexpr int64_t kReal = 1'780'000'000'000'000'000, kRaw = 5'000'000'000'000;
  ApiRecords apis(1);
  apis[0].start = kRaw + 1200;
  const HostClock raw = HostClock::decide(apis, {kReal + 1000, kRaw + 1000}, {kReal + 2100, kRaw + 2100});
  ASSERT_EQ(raw.kind(), HostClock::Kind::kMonotonicRaw);
  SessionCounters c2;
  Admission onRaw(raw, {kReal + 1000, kReal + 2000, kReal + 2100}, ledger, c2);
  const std::vector<MarkerRecord> rawRecords = {
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, kHost, kRaw + 1500, 5, &kStep, &kTrain),
      rec(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE, kDevice, kReal + 1600, 5, nullptr, nullptr, 0, 2),
  };
  const MarkerTable onRealtime = MarkerTable::build(rawRecords, onRaw, {}, nullptr, c2);
  ASSERT_EQ(onRealtime.markers.size(), 2u);
  EXPECT_EQ(onRealtime.markers[0].start, kReal + 1500);
  EXPECT_EQ(onRealtime.markers[1].start, kReal + 1600);
  EXPECT_EQ(c2.outOfWindow, 0u);
}

// The stale rule by kind (Admission.h): a kernel whose id lies below the session's first launch
// and that the session never saw launched is an earlier session's; a MEMORY record is written as its
// call returns (never late), and its call may be one no record names: stale only at or below the
// watermark.
TEST(Admission, MemoryRecordsAreStaleOnlyAtOrBelowTheWatermark) {
  CorrelationLedger ledger(10);
  ExternalCorrelationRecord e;
  e.externalKind = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  e.externalId = 7;
  e.correlationId = 100;
  ledger.noteExternal(e);
  SessionCounters c;
  Admission admission(HostClock::realtime(), {0, INT64_MAX, INT64_MAX}, ledger, c);
  EXPECT_TRUE(admission.stale(MSPTI_ACTIVITY_KIND_KERNEL, 50));
  EXPECT_FALSE(admission.stale(MSPTI_ACTIVITY_KIND_MEMORY, 50));
  EXPECT_TRUE(admission.stale(MSPTI_ACTIVITY_KIND_MEMORY, 5));
  EXPECT_FALSE(admission.stale(MSPTI_ACTIVITY_KIND_MARKER, 5));
  EXPECT_EQ(c.droppedByKind[kDropEarlierSession][MSPTI_ACTIVITY_KIND_MEMORY], 1u);
  EXPECT_EQ(c.staleRecords, 2u);
}

}  // namespace
}  // namespace torch_mspti::test
