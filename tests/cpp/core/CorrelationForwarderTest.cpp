// CorrelationForwarder: each thread's op log, the forwarding to MSPTI's process-global
// external-correlation stack (a FakeMspti table), and what happens to unbalanced use: pops on
// another thread, nesting beyond the per-thread stack, ids still pushed at disarm, failing calls.
// The forwarder is the process's one (its thread state is thread_local), so counters are read
// as differences and each scenario runs on fresh threads where it matters.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "CorrelationForwarder.h"
#include "FakeMspti.h"
#include "FakeOps.h"
#include "SessionHarness.h"

namespace torch_mspti::test {
namespace {

using Fwd = CorrelationForwarder;
constexpr uint32_t kOpsStack = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
constexpr uint32_t kUserStack = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1;

class CorrelationForwarderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(fwd.armed());
    table = fake.functions();
    before = fwd.counters();
  }
  void TearDown() override {
    if (fwd.armed()) fwd.disarm();
  }
  SessionCounters delta() const { return fwd.counters().since(before); }
  // Runs `fn` on a new thread and returns that thread's tid.
  template <typename Fn>
  static uint32_t onThread(Fn fn) {
    uint32_t tid = 0;
    std::thread([&] {
      tid = currentTid();
      fn();
    }).join();
    return tid;
  }
  static const ThreadOps* logOf(const std::vector<ThreadOps>& log, uint32_t tid) {
    for (const auto& t : log)
      if (t.threadId == tid) return &t;
    return nullptr;
  }

  FakeMspti fake;
  MsptiFunctions table;
  CorrelationForwarder& fwd = sharedForwarder();
  SessionCounters before;
};

TEST_F(CorrelationForwarderTest, EachThreadLogsItsOwnIdsInPushOrder) {
  const uint32_t gen = fwd.arm(&table);
  const uint32_t a = onThread([&] {
    fwd.push(Fwd::kOps, 1);
    fwd.push(Fwd::kUser, 2);
    fwd.pop(Fwd::kUser);
    fwd.push(Fwd::kOps, 3);
    fwd.pop(Fwd::kOps);
    fwd.pop(Fwd::kOps);
  });
  const uint32_t b = onThread([&] {
    fwd.push(Fwd::kOps, 10);
    fwd.pop(Fwd::kOps);
  });
  EXPECT_EQ(fwd.disarm(), 0u);
  const auto log = fwd.takeLog(gen);
  const ThreadOps* la = logOf(log, a);
  const ThreadOps* lb = logOf(log, b);
  ASSERT_TRUE(la && lb);
  EXPECT_EQ(la->ids, (std::vector<uint64_t>{1, 2 | Fwd::kUserRangeBit, 3}));
  EXPECT_EQ(lb->ids, (std::vector<uint64_t>{10}));
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  EXPECT_EQ(fake.stackDepth(kUserStack), 0u);
  // A later session does not see this one's log.
  const uint32_t next = fwd.arm(&table);
  EXPECT_NE(next, gen);
  fwd.disarm();
  const auto later = fwd.takeLog(next);
  EXPECT_EQ(logOf(later, a), nullptr);
}

TEST_F(CorrelationForwarderTest, ForwardsToTheStackOfItsKindWhileArmed) {
  fwd.arm(&table);
  fwd.push(Fwd::kOps, 7);
  fwd.push(Fwd::kUser, 8);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 1u);
  EXPECT_EQ(fake.stackDepth(kUserStack), 1u);
  fwd.pop(Fwd::kUser);
  fwd.pop(Fwd::kOps);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  EXPECT_EQ(fake.stackDepth(kUserStack), 0u);
  fwd.disarm();
  fwd.push(Fwd::kOps, 9);  // not armed: neither forwarded nor logged
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  fwd.pop(Fwd::kOps);
  EXPECT_EQ(delta().correlationErrors, 0u);
}

TEST_F(CorrelationForwarderTest, LogsWithoutForwardingWhenNoTableIsGiven) {
  const uint32_t gen = fwd.arm(nullptr);
  const uint32_t t = onThread([&] {
    fwd.push(Fwd::kOps, 5);
    fwd.pop(Fwd::kOps);
  });
  fwd.disarm();
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  const auto log = fwd.takeLog(gen);
  const ThreadOps* l = logOf(log, t);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->ids, std::vector<uint64_t>{5});
}

TEST_F(CorrelationForwarderTest, DisarmPopsWhatIsStillPushedAndLaterPopsAreIgnored) {
  fwd.arm(&table);
  std::thread t([&] {
    fwd.push(Fwd::kOps, 1);
    fwd.push(Fwd::kOps, 2);
    fwd.push(Fwd::kUser, 3);
  });
  t.join();
  fwd.push(Fwd::kOps, 4);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 3u);
  EXPECT_EQ(fwd.disarm(), 4u);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  EXPECT_EQ(fake.stackDepth(kUserStack), 0u);
  // Another tool pushes meanwhile; our late pop must not take its id.
  uint64_t theirs = 0;
  ASSERT_EQ(FakeMspti::push(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 999), MSPTI_SUCCESS);
  fwd.pop(Fwd::kOps);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 1u);
  ASSERT_EQ(FakeMspti::pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &theirs), MSPTI_SUCCESS);
  EXPECT_EQ(theirs, 999u);
}

TEST_F(CorrelationForwarderTest, StacksAreClearedAtTheFirstPushOfANewSession) {
  std::thread worker;
  std::mutex m;
  std::condition_variable cv;
  int step = 0;  // 1: push in session 1; 2: push in session 2
  auto waitFor = [&](int s) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return step >= s; });
  };
  auto advance = [&](int s) {
    std::lock_guard<std::mutex> lock(m);
    step = s;
    cv.notify_all();
  };
  int done = 0;
  worker = std::thread([&] {
    waitFor(1);
    fwd.push(Fwd::kOps, 1);  // an op left open across sessions
    fwd.push(Fwd::kOps, 2);
    {
      std::lock_guard<std::mutex> lock(m);
      done = 1;
      cv.notify_all();
    }
    waitFor(2);
    fwd.push(Fwd::kOps, 3);
    fwd.pop(Fwd::kOps);
    fwd.pop(Fwd::kOps);  // the stale entries are gone: nothing left to pop
    {
      std::lock_guard<std::mutex> lock(m);
      done = 2;
      cv.notify_all();
    }
  });
  fwd.arm(&table);
  advance(1);
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done >= 1; });
  }
  fwd.disarm();
  const uint32_t gen2 = fwd.arm(&table);
  advance(2);
  {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done >= 2; });
  }
  fwd.disarm();
  worker.join();
  EXPECT_EQ(delta().staleStackEntries, 2u);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  const auto log = fwd.takeLog(gen2);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].ids, std::vector<uint64_t>{3});
}

TEST_F(CorrelationForwarderTest, CrossThreadPopsDoNotLeakIntoLaterSessions) {
  // Thread P pushes, thread Q pops (an op whose end runs elsewhere), more often per session than
  // P's stack holds in all: each new session starts P with an empty stack, so P never overflows
  // and every push of every session is forwarded and logged.
  const int perSession = Fwd::kMaxDepth;
  std::mutex m;
  std::condition_variable cv;
  int session = 0, pushed = 0;
  std::thread p([&] {
    for (int s = 1; s <= 3; ++s) {
      {
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return session == s; });
      }
      for (int i = 0; i < perSession; ++i) fwd.push(Fwd::kOps, static_cast<uint64_t>(s * 1000 + i));
      std::lock_guard<std::mutex> lock(m);
      pushed = s;
      cv.notify_all();
    }
  });
  uint64_t logged = 0;
  for (int s = 1; s <= 3; ++s) {
    const uint32_t gen = fwd.arm(&table);
    {
      std::lock_guard<std::mutex> lock(m);
      session = s;
      cv.notify_all();
    }
    {
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return pushed == s; });
    }
    onThread([&] {
      for (int i = 0; i < perSession; ++i) fwd.pop(Fwd::kOps);  // Q has no entries: ignored
    });
    EXPECT_EQ(fwd.disarm(), static_cast<uint64_t>(perSession)) << "session " << s;  // P's pushes popped here
    for (const auto& t : fwd.takeLog(gen)) logged += t.ids.size();
    EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  }
  p.join();
  EXPECT_EQ(delta().correlationOverflow, 0u);
  EXPECT_EQ(logged, 3u * perSession);
  EXPECT_EQ(delta().staleStackEntries, 2u * perSession);  // cleared at sessions 2 and 3
}

TEST_F(CorrelationForwarderTest, NestingBeyondTheStackIsCountedAndStaysBalanced) {
  const uint32_t gen = fwd.arm(&table);
  const int extra = 3;
  const uint32_t tid = onThread([&] {
    for (int i = 0; i < Fwd::kMaxDepth + extra; ++i) fwd.push(Fwd::kOps, static_cast<uint64_t>(i + 1));
    EXPECT_EQ(fake.stackDepth(kOpsStack), static_cast<size_t>(Fwd::kMaxDepth));
    for (int i = 0; i < Fwd::kMaxDepth + extra; ++i) fwd.pop(Fwd::kOps);
  });
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);
  EXPECT_EQ(fwd.disarm(), 0u);
  EXPECT_EQ(delta().correlationOverflow, static_cast<uint64_t>(extra));
  const auto log = fwd.takeLog(gen);
  const ThreadOps* l = logOf(log, tid);
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->ids.size(), static_cast<size_t>(Fwd::kMaxDepth));  // the deeper ones are not logged
  EXPECT_EQ(delta().correlationInterleaved, 0u);
}

TEST_F(CorrelationForwarderTest, InterleavedPopsAndFailingCallsAreCounted) {
  fwd.arm(&table);
  fwd.push(Fwd::kOps, 1);
  ASSERT_EQ(FakeMspti::push(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 2), MSPTI_SUCCESS);  // another thread's
  fwd.pop(Fwd::kOps);                                                                     // pops 2: interleaved
  EXPECT_EQ(delta().correlationInterleaved, 1u);
  fake.throwIn = FakeMspti::kPush;
  fwd.push(Fwd::kOps, 3);  // throws inside: counted, nothing escapes, not forwarded
  fake.throwIn = FakeMspti::kPop;
  fwd.push(Fwd::kOps, 4);
  fwd.pop(Fwd::kOps);
  fake.throwIn = 0;
  fwd.pop(Fwd::kOps);
  EXPECT_EQ(delta().correlationErrors, 2u);
  fwd.disarm();
  uint64_t left = 0;
  while (FakeMspti::pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &left) == MSPTI_SUCCESS) {}
}

TEST_F(CorrelationForwarderTest, AbandonForgetsWithoutCallingMspti) {
  fwd.arm(&table);
  fwd.push(Fwd::kOps, 1);
  fake.throwIn = FakeMspti::kPop;  // any pop now would be counted as an error
  fwd.abandon();
  EXPECT_FALSE(fwd.armed());
  EXPECT_EQ(fwd.disarm(), 0u);
  EXPECT_EQ(fake.stackDepth(kOpsStack), 1u);  // left as it was: the process is ending
  EXPECT_EQ(delta().correlationErrors, 0u);
  fake.throwIn = 0;
  uint64_t left = 0;
  FakeMspti::pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &left);
  fwd.pop(Fwd::kOps);
}

// disarm() running between a push's check of the session and its call into MSPTI: the push finds
// the session gone after its call and takes the id back, so MSPTI's stack is left as it was. The
// race is made deterministic by a push entry point that runs disarm() first, as the profiler
// thread would at that moment.
std::atomic<CorrelationForwarder*> gDisarmInPush{nullptr};
std::atomic<uint64_t> gDisarmPopped{0}, gPops{0};
msptiResult pushAfterDisarm(msptiExternalCorrelationKind kind, uint64_t id) {
  if (CorrelationForwarder* f = gDisarmInPush.exchange(nullptr)) gDisarmPopped = f->disarm();
  return FakeMspti::push(kind, id);
}
msptiResult countedPop(msptiExternalCorrelationKind kind, uint64_t* lastId) {
  ++gPops;
  return FakeMspti::pop(kind, lastId);
}

TEST_F(CorrelationForwarderTest, APushRacingDisarmIsTakenBack) {
  MsptiFunctions racing = table;
  racing.pushExternalCorrelationId = &pushAfterDisarm;
  racing.popExternalCorrelationId = &countedPop;
  fwd.arm(&racing);
  fwd.push(Fwd::kOps, 1);  // forwarded before the race
  EXPECT_EQ(fake.stackDepth(kOpsStack), 1u);
  gDisarmInPush = &fwd;
  fwd.push(Fwd::kOps, 2);  // disarm() runs inside this push, before MSPTI gets id 2
  EXPECT_FALSE(fwd.armed());
  EXPECT_EQ(gDisarmPopped.load(), 1u);        // disarm() popped id 1 only: id 2 was not pushed yet
  EXPECT_EQ(fake.stackDepth(kOpsStack), 0u);  // ... and the push took id 2 back
  EXPECT_EQ(gPops.load(), 2u);
  fwd.pop(Fwd::kOps);  // later pops of this thread never reach MSPTI
  fwd.pop(Fwd::kOps);
  EXPECT_EQ(gPops.load(), 2u);
  EXPECT_EQ(delta().correlationErrors, 0u);
}

}  // namespace
}  // namespace torch_mspti::test
