// RecordStore: appends from completion threads and the launch ledger the drain consults.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "NameTable.h"
#include "RecordStore.h"

namespace torch_mspti::test {
namespace {

const std::string* kName = NameTable::instance().intern("k");

WalkResult externals(std::initializer_list<uint64_t> corrs, uint64_t opId = 1) {
  WalkResult w;
  for (uint64_t c : corrs) {
    w.externals.push_back({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, opId, c});
    ++w.recordsByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION];
    ++w.records;
  }
  return w;
}

WalkResult apis(std::initializer_list<uint64_t> corrs) {
  WalkResult w;
  for (uint64_t c : corrs) {
    w.apis.push_back({10, 20, 1, 2, c, kName});
    ++w.recordsByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API];
    ++w.records;
  }
  return w;
}

WalkResult kernels(std::initializer_list<uint64_t> corrs) {
  WalkResult w;
  for (uint64_t c : corrs) {
    w.kernels.push_back({100, 200, c, 0, 0, kName, kName});
    ++w.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL];
    ++w.records;
  }
  return w;
}

void add(RecordStore& s, WalkResult w) { s.append(w); }

TEST(RecordStoreTest, ExternalRecordMakesALaunchPendingUntilItsFirstKernel) {
  RecordStore s(0);
  EXPECT_FALSE(s.knowsLaunches());
  add(s, externals({5}));
  EXPECT_TRUE(s.knowsLaunches());
  EXPECT_EQ(s.pendingLaunches(), 1u);
  add(s, kernels({5}));
  EXPECT_EQ(s.pendingLaunches(), 0u);
  add(s, kernels({5}));  // a sibling of the same launch: must not go below zero
  EXPECT_EQ(s.pendingLaunches(), 0u);
  add(s, externals({5}));  // the same launch named again (CUSTOM1 record, say): already satisfied
  EXPECT_EQ(s.pendingLaunches(), 0u);
  EXPECT_EQ(s.kernels().size(), 2u);
  EXPECT_EQ(s.externals().size(), 2u);
  EXPECT_EQ(s.records(), 4u);
}

TEST(RecordStoreTest, ApiRecordMakesALaunchPendingAndCountsOnceWithItsExternal) {
  RecordStore s(0);
  add(s, apis({7}));
  EXPECT_TRUE(s.knowsLaunches());
  EXPECT_EQ(s.pendingLaunches(), 1u);
  add(s, externals({7, 8}));
  EXPECT_EQ(s.pendingLaunches(), 2u);
  add(s, apis({8}));
  EXPECT_EQ(s.pendingLaunches(), 2u);
  add(s, kernels({8, 7}));
  EXPECT_EQ(s.pendingLaunches(), 0u);
}

TEST(RecordStoreTest, KernelBeforeItsLaunchRecordNeverMakesItPending) {
  RecordStore s(0);
  add(s, kernels({9}));  // another buffer delivered first
  add(s, externals({9}));
  add(s, apis({9}));
  EXPECT_EQ(s.pendingLaunches(), 0u);
  EXPECT_TRUE(s.knowsLaunches());
}

TEST(RecordStoreTest, StaleAndZeroIdsNeverBecomePending) {
  RecordStore s(10);
  add(s, apis({3, 10}));  // a thread's "current" id from an earlier session
  add(s, externals({0}));
  EXPECT_EQ(s.pendingLaunches(), 0u);
  EXPECT_FALSE(s.knowsLaunches());
  add(s, externals({11}));
  EXPECT_EQ(s.pendingLaunches(), 1u);
  EXPECT_TRUE(s.knowsLaunches());
}

TEST(RecordStoreTest, KernelsOnlyMeansTheLedgerKnowsNothing) {
  RecordStore s(0);
  add(s, kernels({1, 2, 3}));
  EXPECT_FALSE(s.knowsLaunches());
  EXPECT_EQ(s.pendingLaunches(), 0u);
  EXPECT_EQ(s.maxCorrelationId(), 3u);
}

TEST(RecordStoreTest, MaxCorrelationIdCoversExternalsAndKernels) {
  RecordStore s(0);
  add(s, externals({40}));
  add(s, kernels({12}));
  EXPECT_EQ(s.maxCorrelationId(), 40u);
}

TEST(RecordStoreTest, AppendEmptiesTheBatchAndCountsAbandonedBuffers) {
  RecordStore s(0);
  WalkResult w = kernels({1, 2});
  w.abandoned = true;
  w.abandonedBytes = 48;
  s.append(w);
  EXPECT_TRUE(w.kernels.empty());
  EXPECT_EQ(w.records, 0u);
  EXPECT_FALSE(w.abandoned);
  WalkResult w2 = kernels({3});
  s.append(w2);
  EXPECT_EQ(s.kernels().size(), 3u);
  EXPECT_EQ(s.kernels()[2].correlationId, 3u);
  EXPECT_EQ(s.abandonedBuffers(), 1u);
  EXPECT_EQ(s.abandonedBytes(), 48u);
  EXPECT_EQ(s.recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL], 3u);
}

TEST(RecordStoreTest, ConcurrentAppendsFromEightThreadsAreCountedExactly) {
  constexpr int kThreads = 8, kBatches = 200, kPerBatch = 5;
  RecordStore s(0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&s, t] {
      WalkResult w;  // reused, as the completion path reuses its thread_local batch
      for (int b = 0; b < kBatches; ++b) {
        for (int i = 0; i < kPerBatch; ++i) {
          const uint64_t id = 1 + static_cast<uint64_t>((t * kBatches + b) * kPerBatch + i);
          w.externals.push_back({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1, id});
          // Every launch but the last of each batch gets its kernel (in the same batch).
          if (i + 1 < kPerBatch) w.kernels.push_back({100, 200, id, 0, 0, kName, kName});
        }
        w.recordsByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION] += kPerBatch;
        w.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL] += kPerBatch - 1;
        w.records += 2 * kPerBatch - 1;
        s.append(w);
      }
    });
  }
  for (auto& th : threads) th.join();
  const uint64_t batches = kThreads * kBatches;
  EXPECT_EQ(s.records(), batches * (2 * kPerBatch - 1));
  EXPECT_EQ(s.externals().size(), batches * kPerBatch);
  EXPECT_EQ(s.kernels().size(), batches * (kPerBatch - 1));
  EXPECT_EQ(s.recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL], batches * (kPerBatch - 1));
  EXPECT_EQ(s.pendingLaunches(), batches);
  EXPECT_EQ(s.maxCorrelationId(), batches * kPerBatch);
}

}  // namespace
}  // namespace torch_mspti::test
