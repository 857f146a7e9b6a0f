// Load and lifecycle of the plugin core on the simulator, driving MsptiActivityProfilerSession
// as kineto would (configure -> push/pop -> start -> stop -> processTrace) on the process's
// PluginContext, without Python or kineto's own per-session overhead:
//  * one session with 1,000,000 kernels (synthetic launches, zero delivery delay);
//  * 1,000 sessions in one process: every kernel collected in its own session, no buffer kept
//    by MSPTI after a stop, thread count and resident memory flat, MSPTI's external stack empty;
//  * eight threads launching concurrently under one session: every kernel linked to the op
//    instance it was launched in;
//  * fork() during and after a session: the child neither hangs nor calls MSPTI, and refuses
//    profiling with ForkGuard's reason;
//  * stop() while kernels are still running: the drain ends at its bound and reports them.
// The sizes shrink under a sanitizer (ASan/TSan slow everything 2-15x); the full sizes run in
// the normal build (ci/cpp_tests.sh). Figures are printed, never asserted as times.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "CollectingLogger.h"
#include "CoreSimSupport.h"
#include "FakeOps.h"
#include "ForkGuard.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TORCH_MSPTI_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TORCH_MSPTI_SANITIZED 1
#endif
#endif
#ifndef TORCH_MSPTI_SANITIZED
#define TORCH_MSPTI_SANITIZED 0
#endif

namespace torch_mspti::test {
namespace {

using libkineto::ActivityType;

constexpr bool kSanitized = TORCH_MSPTI_SANITIZED != 0;

// A field of /proc/self/status ("Threads", "VmRSS" in kB); -1 when absent.
long procStatus(const char* field) {
  std::ifstream in("/proc/self/status");
  const std::string key = std::string(field) + ":";
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stol(line.substr(key.size()));
  return -1;
}
int threadCount() { return static_cast<int>(procStatus("Threads")); }

// Counts what processTrace hands to kineto by kernel name; keeps nothing else (1M kernels).
class CountingLogger : public CollectingLogger {
 public:
  void handleActivity(const libkineto::ITraceActivity& a) override {
    if (a.type() == ActivityType::CONCURRENT_KERNEL) {
      ++kernels;
      if (a.linkedActivity()) ++linked;
      ids.insert(a.correlationId());
      names[a.name()]++;
    } else if (a.type() == ActivityType::PRIVATEUSE1_RUNTIME) {
      ++launches;
    }
  }
  uint64_t kernels = 0, linked = 0, launches = 0;
  std::set<int64_t> ids;
  std::unordered_map<std::string, uint64_t> names;
};

class LoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(loadSimulator(), nullptr);
    const SimControl& sim = simControl();
    sim.resetOptions();
    ASSERT_EQ(sim.setOption("delivery_delay_ns", 0), 0);
    ASSERT_EQ(sim.setOption("driver_flush_ns", 0), 0);
    ASSERT_EQ(sim.setOption("launch_latency_ns", 1000), 0);
    drainExternalStacks();
  }
  void TearDown() override {
    simControl().synchronize(-1);
    simControl().resetOptions();
  }

  static ConfigSnapshot config() { return simContext().config.snapshot(); }
  static std::unique_ptr<MsptiActivityProfilerSession> newSession(const ConfigSnapshot& cfg) {
    return std::make_unique<MsptiActivityProfilerSession>(
        simSessionDeps(cfg),
        std::set<ActivityType>{ActivityType::CONCURRENT_KERNEL, ActivityType::PRIVATEUSE1_RUNTIME});
  }
  static std::string health(MsptiActivityProfilerSession& s) {
    const auto meta = s.getMetadata();
    auto it = meta.find("torch_mspti");
    return it == meta.end() ? "" : it->second;
  }
  static MsptiBufferPool& pool() { return simContext().pool; }
};

TEST_F(LoadTest, MillionKernelsInOneSession) {
  const uint32_t batches = kSanitized ? 20 : 100;
  const uint32_t perLaunch = 10000;
  const uint64_t total = uint64_t{batches} * perLaunch;  // 1,000,000 (200,000 sanitized)
  const SimControl& sim = simControl();
  const msptiSimStats before = sim.stats();
  ConfigSnapshot cfg = config();
  cfg.drainTimeoutMs = 60000;  // bounded by the ledger: ends "balanced" as soon as all arrived
  const long rssBefore = procStatus("VmRSS");
  auto session = newSession(cfg);
  session->start();
  ASSERT_TRUE(session->errors().empty()) << session->errors().front();
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t b = 0; b < batches; ++b) ASSERT_NE(sim.launchKernels("bulk", nullptr, 0, 1, 1, perLaunch), 0u);
  sim.synchronize(-1);
  session->stop();
  const auto t1 = std::chrono::steady_clock::now();
  CountingLogger logger;
  session->processTrace(logger);
  const auto t2 = std::chrono::steady_clock::now();
  const long rssAfter = procStatus("VmRSS");
  const msptiSimStats after = sim.stats();
  EXPECT_EQ(after.kernel_records - before.kernel_records, total);
  EXPECT_EQ(after.records_dropped, before.records_dropped);
  EXPECT_EQ(logger.kernels, total);
  EXPECT_EQ(logger.names["bulk"], total);
  EXPECT_EQ(pool().outstanding(), 0u);
  EXPECT_TRUE(session->errors().empty()) << session->errors().front();
  const SessionReport r = session->report();
  ASSERT_TRUE(r.drain.has_value());
  EXPECT_EQ(r.drain->exitReason, "balanced");
  EXPECT_EQ(r.counters.buffersDeclined, 0u);
  EXPECT_EQ(r.counters.kernels, total);
  std::printf(
      "[ LoadTest ] %llu kernels: launch+stop %.0f ms, processTrace %.0f ms, %llu buffers, "
      "session data ~%.0f bytes/kernel resident\n",
      static_cast<unsigned long long>(total), std::chrono::duration<double, std::milli>(t1 - t0).count(),
      std::chrono::duration<double, std::milli>(t2 - t1).count(),
      static_cast<unsigned long long>(after.buffers_completed - before.buffers_completed),
      1024.0 * static_cast<double>(rssAfter - rssBefore) / static_cast<double>(total));
}

TEST_F(LoadTest, ThousandSessionsLeaveNothingBehind) {
  const int sessions = kSanitized ? 200 : 1000;
  const int warmup = sessions / 10;
  constexpr uint32_t kKernels = 5;
  const SimControl& sim = simControl();
  const ConfigSnapshot cfg = config();
  std::set<int64_t> allIds;
  int threadsAfterFirst = -1, maxThreads = 0;
  long rssAfterWarmup = 0;
  uint64_t kernels = 0, linked = 0;
  for (int i = 0; i < sessions; ++i) {
    FakeOps ops;
    auto session = newSession(cfg);
    const std::string name = "s" + std::to_string(i);
    session->start();
    const int32_t op = ops.add(currentTid(), realtimeNs(), 0);
    session->pushCorrelationId(static_cast<uint64_t>(op));
    sim.launchKernels(name.c_str(), nullptr, 0, 1, 100, kKernels);
    session->popCorrelationId();
    ops.setEnd(op, realtimeNs());
    sim.synchronize(-1);
    session->stop();
    ASSERT_EQ(pool().outstanding(), 0u) << "session " << i;
    CountingLogger logger;
    session->processTrace(logger, ops.callback(), 0, 0);
    session.reset();
    ASSERT_EQ(logger.kernels, kKernels) << "session " << i;
    ASSERT_EQ(logger.names[name], kKernels) << "session " << i;
    kernels += logger.kernels;
    linked += logger.linked;
    for (int64_t id : logger.ids) EXPECT_TRUE(allIds.insert(id).second) << "id " << id << " reused in session " << i;
    // The session's Unsubscribe runs on a thread of its own after stop(); counted once it ended.
    simContext().release.waitIdle();
    const int threads = threadCount();
    if (i == 0) threadsAfterFirst = threads;
    if (i == warmup) rssAfterWarmup = procStatus("VmRSS");
    maxThreads = std::max(maxThreads, threads);
  }
  const long rssGrowthKb = procStatus("VmRSS") - rssAfterWarmup;
  const msptiSimStats st = sim.stats();
  EXPECT_EQ(st.external_stack_depth, 0u);
  EXPECT_EQ(kernels, uint64_t{kKernels} * sessions);
  EXPECT_EQ(linked, kernels);
  EXPECT_EQ(allIds.size(), static_cast<size_t>(sessions));  // one launch id per session, never reused
  EXPECT_LE(pool().pooled(), MsptiBufferPool::kMaxFree);
  EXPECT_LE(maxThreads, threadsAfterFirst + 2) << "threads grew from " << threadsAfterFirst;
  EXPECT_LE(threadCount(), threadsAfterFirst);
  // Flat memory: what a session keeps (store, names, op log, launches, activities) is freed with
  // it. ASan's quarantine keeps freed blocks resident, so the bound holds in plain builds only.
  if (!kSanitized) {
    EXPECT_LT(rssGrowthKb, 4096) << "resident memory grew by " << rssGrowthKb << " kB";
  }
  std::printf(
      "[ LoadTest ] %d sessions, %llu kernels, %zu distinct ids, threads %d..%d, %llu linked, RSS %+ld kB "
      "after the first %d sessions\n",
      sessions, static_cast<unsigned long long>(kernels), allIds.size(), threadsAfterFirst, maxThreads,
      static_cast<unsigned long long>(linked), rssGrowthKb, warmup);
}

TEST_F(LoadTest, EightThreadsEachKernelLinksToTheOpItWasLaunchedIn) {
  constexpr int kThreads = 8;
  const int launchesPerThread = kSanitized ? 100 : 500;
  const SimControl& sim = simControl();
  FakeOps ops;
  std::mutex m;
  std::unordered_map<std::string, int32_t> opOfKernel;  // kernel name -> the op it was launched in
  auto session = newSession(config());
  session->start();
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint32_t tid = currentTid();
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < launchesPerThread; ++i) {
        const std::string name = "t" + std::to_string(t) + "_" + std::to_string(i);
        const int32_t op = ops.add(tid, realtimeNs(), 0);
        {
          std::lock_guard<std::mutex> lock(m);
          opOfKernel[name] = op;
        }
        session->pushCorrelationId(static_cast<uint64_t>(op));
        if (i % 2) std::this_thread::yield();  // let other threads push onto MSPTI's global stack
        sim.launchKernel(name.c_str(), nullptr, 0u, static_cast<uint32_t>(t + 1), 100);
        session->popCorrelationId();
        ops.setEnd(op, realtimeNs());
      }
    });
  }
  for (auto& th : threads) th.join();
  sim.synchronize(-1);
  session->stop();
  CollectingLogger logger;
  session->processTrace(logger, ops.callback(), 0, 0);
  const auto kernels = logger.kernels();
  uint64_t wrongOp = 0, unlinked = 0, verified = 0;
  for (const LoggedActivity* k : kernels) {
    if (k->linkedOp < 0) {
      ++unlinked;
      continue;
    }
    auto it = opOfKernel.find(k->name);
    if (it == opOfKernel.end() || k->linkedOp != it->second) ++wrongOp;
    verified += k->link == "verified";
  }
  EXPECT_EQ(kernels.size(), static_cast<size_t>(kThreads * launchesPerThread));
  EXPECT_EQ(wrongOp, 0u);
  EXPECT_EQ(unlinked, 0u);  // every launch call lies in its op on its thread
  EXPECT_EQ(logger.launches().size(), kernels.size());
  EXPECT_EQ(sim.stats().external_stack_depth, 0u);
  EXPECT_EQ(pool().outstanding(), 0u);
  const SessionReport r = session->report();
  EXPECT_EQ(r.counters.linkedVerified + r.counters.linkedRecovered, kernels.size());
  std::printf(
      "[ LoadTest ] %d threads x %d launches: %llu verified, %llu recovered (MSPTI's hint named another "
      "thread's op), 0 wrong\n",
      kThreads, launchesPerThread, static_cast<unsigned long long>(verified),
      static_cast<unsigned long long>(kernels.size() - verified));
}

// Waits up to `seconds` for `pid`; kills it and fails when it does not exit. Returns the status.
int waitChild(pid_t pid, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  ADD_FAILURE() << "forked child " << pid << " hung (killed after " << seconds << " s)";
  return -1;
}

// Any MSPTI call in a forked child ends it with exit code 20: every entry point of the table the
// sessions and the forwarder use is replaced by a tripwire.
void armTripwires() {
  MsptiFunctions& f = sessionTable();
  f.subscribe = [](msptiSubscriberHandle*, msptiCallbackFunc, void*) -> msptiResult { _exit(20); };
  f.unsubscribe = [](msptiSubscriberHandle) -> msptiResult { _exit(20); };
  f.registerCallbacks = [](msptiBuffersCallbackRequestFunc, msptiBuffersCallbackCompleteFunc) -> msptiResult {
    _exit(20);
  };
  f.enable = [](msptiActivityKind) -> msptiResult { _exit(20); };
  f.disable = [](msptiActivityKind) -> msptiResult { _exit(20); };
  f.flushAll = [](uint32_t) -> msptiResult { _exit(20); };
  f.pushExternalCorrelationId = [](msptiExternalCorrelationKind, uint64_t) -> msptiResult { _exit(20); };
  f.popExternalCorrelationId = [](msptiExternalCorrelationKind, uint64_t*) -> msptiResult { _exit(20); };
  f.isEnabled = [](msptiActivityKind) -> bool { _exit(20); };
}

bool namesForkReason(const std::vector<std::string>& errors) {
  for (const auto& e : errors)
    if (e.find(kForkedChildReason) != std::string::npos) return true;
  return false;
}

// Child side of the fork tests: exit code 0 when everything holds, else the first failed check.
int childChecks(MsptiActivityProfilerSession* inherited) {
  PluginContext& ctx = simContext();
  if (!forkedFromMsptiParent()) return 10;
  armTripwires();
  if (ctx.library.ensureLoaded({MSPTI_SIM_PATH, false})) return 11;
  const LibraryReport r = ctx.library.report();
  if (r.available || r.reason != kForkedChildReason) return 12;
  // Op hooks in the child reach no MSPTI stack.
  ctx.forwarder.push(CorrelationForwarder::kOps, 77);
  ctx.forwarder.pop(CorrelationForwarder::kOps);
  if (inherited) {
    inherited->pushCorrelationId(78);
    inherited->popCorrelationId();
    inherited->stop();  // must not drain (MSPTI's threads are the parent's)
    CountingLogger logger;
    inherited->processTrace(logger);
    if (logger.kernels != 0) return 13;
    if (!namesForkReason(inherited->errors())) return 14;
  }
  auto fresh = std::make_unique<MsptiActivityProfilerSession>(simSessionDeps(ctx.config.snapshot()),
                                                              std::set<ActivityType>{ActivityType::CONCURRENT_KERNEL});
  fresh->start();
  if (!namesForkReason(fresh->errors())) return 15;
  fresh->stop();
  fresh.reset();
  return 0;
}

TEST_F(LoadTest, ForkDuringAndAfterASession) {
  const SimControl& sim = simControl();
  FakeOps ops;
  auto session = newSession(config());
  session->start();
  sim.launchKernels("before_fork", nullptr, 0, 1, 100, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // well outside the op's start tolerance
  const int32_t op = ops.add(currentTid(), realtimeNs(), 0);
  session->pushCorrelationId(static_cast<uint64_t>(op));  // an op open across the fork
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(childChecks(session.get()));
  int status = waitChild(pid, 20);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  // The parent is unaffected: its op is still forwarded, its kernels all collected.
  sim.launchKernels("after_fork", nullptr, 0, 1, 100, 2);
  session->popCorrelationId();
  ops.setEnd(op, realtimeNs());
  sim.synchronize(-1);
  session->stop();
  CollectingLogger logger;
  session->processTrace(logger, ops.callback(), 0, 0);
  uint64_t before = 0, after = 0;
  for (const LoggedActivity* k : logger.kernels()) {
    if (k->name == "before_fork") {
      ++before;
      EXPECT_EQ(k->linkedOp, -1) << "launched outside any op";
    } else if (k->name == "after_fork") {
      ++after;
      EXPECT_EQ(k->linkedOp, op) << "launched inside the op open across the fork";
      EXPECT_EQ(k->link, "verified");
    }
  }
  EXPECT_EQ(before, 3u);
  EXPECT_EQ(after, 2u);
  EXPECT_FALSE(forkedFromMsptiParent());
  EXPECT_EQ(sim.stats().external_stack_depth, 0u);

  // After the session: same rules.
  std::fflush(nullptr);
  pid = fork();
  if (pid == 0) _exit(childChecks(nullptr));
  status = waitChild(pid, 20);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST_F(LoadTest, StopWithKernelsInFlightEndsAtTheDrainBound) {
  const SimControl& sim = simControl();
  ConfigSnapshot cfg = config();
  cfg.drainTimeoutMs = 100;
  cfg.synchronizeDevices = false;  // what torch.profiler does for a device it does not synchronise
  auto session = newSession(cfg);
  session->start();
  for (int i = 0; i < 4; ++i) sim.launchKernel("long", nullptr, 0, 7, 600'000'000);  // 4 x 600 ms, serial
  sim.launchKernel("short", nullptr, 0, 8, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  session->stop();
  CountingLogger logger;
  session->processTrace(logger);
  const SessionReport r = session->report();
  ASSERT_TRUE(r.drain.has_value());
  EXPECT_EQ(r.drain->pendingLaunches, 4u) << health(*session);
  EXPECT_EQ(logger.names["short"], 1u);
  EXPECT_EQ(logger.names["long"], 0u);
  EXPECT_EQ(pool().outstanding(), 0u);
  bool warned = false;
  for (const auto& w : r.warnings) warned |= w == "pending" || w == "timeout";  // the keys of warnings given
  EXPECT_TRUE(warned) << health(*session);

  // The next session starts clean: the late kernels were dropped with the old subscription.
  auto next = newSession(config());
  next->start();
  sim.launchKernel("next", nullptr, 0, 8, 1000);
  sim.synchronize(-1);  // includes the long kernels: they end while `next` collects
  next->stop();
  CountingLogger nextLogger;
  next->processTrace(nextLogger);
  EXPECT_EQ(nextLogger.names["next"], 1u);
  EXPECT_EQ(nextLogger.names["long"], 0u);
  EXPECT_EQ(nextLogger.kernels, 1u);
}

}  // namespace
}  // namespace torch_mspti::test
