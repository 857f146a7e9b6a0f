// Load and lifecycle robustness of the plugin core on the simulator (issue 7, item 3), driving
// MsptiActivityProfilerSession directly as kineto would (configure -> push/pop -> start -> stop
// -> processTrace), without Python or kineto's own per-session overhead:
//  * one session with 1,000,000 kernels (synthetic launches, zero delivery delay);
//  * many sessions in one process: every kernel collected in its own session, no buffer kept
//    by MSPTI after a stop, the thread count flat, MSPTI's external stack left empty;
//  * eight threads launching concurrently under one session: every kernel collected, links
//    only to an op of the launching thread;
//  * fork() during and after a session: the child neither hangs nor calls MSPTI, and refuses
//    profiling with ForkGuard's reason;
//  * stop() while kernels are still running: the drain ends at its timeout and reports them.
// The sizes shrink under a sanitizer (ASan/TSan slow everything 2-15x); the full sizes run in
// the normal build (ci/cpp_tests.sh).
#include <gtest/gtest.h>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <output_base.h>

#include "Config.h"
#include "CoreSimSupport.h"
#include "CorrelationForwarder.h"
#include "ForkGuard.h"
#include "MsptiActivityProfilerSession.h"
#include "MsptiBufferPool.h"
#include "MsptiLibrary.h"

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
using libkineto::GenericTraceActivity;
using libkineto::ITraceActivity;

constexpr bool kSanitized = TORCH_MSPTI_SANITIZED != 0;

uint32_t gettidNow() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

// Counts what processTrace hands to kineto; keeps nothing.
class CountingLogger : public libkineto::ActivityLogger {
 public:
  void handleDeviceInfo(const libkineto::DeviceInfo&, int64_t) override {}
  void handleResourceInfo(const libkineto::ResourceInfo&, int64_t) override {}
  void handleOverheadInfo(const OverheadInfo&, int64_t) override {}
  void handleTraceSpan(const libkineto::TraceSpan&) override {}
  void handleActivity(const ITraceActivity& a) override {
    if (a.type() == ActivityType::CONCURRENT_KERNEL) {
      ++kernels;
      if (a.linkedActivity()) {
        ++linked;
        // A link must point at an op of the thread that launched the kernel: the kernel's name
        // carries that thread's tid (see ConcurrentThreads).
        const std::string want = std::to_string(a.linkedActivity()->resourceId()) + "_";
        if (a.name().rfind(want, 0) != 0) ++wrongThreadLinks;
      }
      ids.insert(a.correlationId());
      names[a.name()]++;
    } else if (a.type() == ActivityType::PRIVATEUSE1_RUNTIME) {
      ++launches;
    }
  }
  void handleGenericActivity(const GenericTraceActivity& a) override { handleActivity(a); }
  void handleTraceStart(const std::unordered_map<std::string, std::string>&, const std::string&) override {}
  void finalizeMemoryTrace(const std::string&, const libkineto::Config&) override {}
  void finalizeTrace(const libkineto::Config&, std::unique_ptr<libkineto::ActivityBuffers>, int64_t,
                     std::unordered_map<std::string, std::vector<std::string>>&) override {}

  uint64_t kernels = 0, linked = 0, launches = 0, wrongThreadLinks = 0;
  std::set<int64_t> ids;
  std::unordered_map<std::string, uint64_t> names;
};

// Stands in for torch's op activities: id -> an op on a given thread and time range.
class Ops {
 public:
  int32_t add(uint32_t tid, int64_t start, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int32_t id = next_++;
    auto op = std::make_unique<GenericTraceActivity>(span_, ActivityType::CPU_OP, "op");
    op->startTime = start;
    op->endTime = end;
    op->resource = static_cast<int32_t>(tid);
    op->id = id;
    ops_.emplace(id, std::move(op));
    return id;
  }
  void setEnd(int32_t id, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex_);
    ops_.at(id)->endTime = end;
  }
  libkineto::getLinkedActivityCallback callback() {
    return [this](int32_t id) -> const ITraceActivity* {
      auto it = ops_.find(id);
      return it == ops_.end() ? nullptr : it->second.get();
    };
  }

 private:
  std::mutex mutex_;
  libkineto::TraceSpan span_{0, 0, "ops"};
  int32_t next_ = 1;
  std::unordered_map<int32_t, std::unique_ptr<GenericTraceActivity>> ops_;
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

  static std::unique_ptr<MsptiActivityProfilerSession> newSession(const ConfigSnapshot& cfg) {
    return std::make_unique<MsptiActivityProfilerSession>(
        cfg, std::set<ActivityType>{ActivityType::CONCURRENT_KERNEL, ActivityType::PRIVATEUSE1_RUNTIME});
  }
  static std::string lastState(MsptiActivityProfilerSession& s) {
    const auto meta = s.getMetadata();
    auto it = meta.find("torch_mspti");
    return it == meta.end() ? "" : it->second;
  }
};

TEST_F(LoadTest, MillionKernelsInOneSession) {
  const uint32_t batches = kSanitized ? 20 : 100;
  const uint32_t perLaunch = 10000;
  const uint64_t total = uint64_t{batches} * perLaunch;  // 1,000,000 (200,000 sanitized)
  const SimControl& sim = simControl();
  const msptiSimStats before = sim.stats();
  ConfigSnapshot cfg = Config::instance().snapshot();
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
  EXPECT_EQ(MsptiBufferPool::instance().outstanding(), 0u);
  EXPECT_TRUE(session->errors().empty()) << session->errors().front();
  const std::string meta = lastState(*session);
  EXPECT_NE(meta.find("\"exit_reason\":\"balanced\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"declined\":0"), std::string::npos) << meta;
  std::printf(
      "[ LoadTest ] %llu kernels: launch+stop %.0f ms, processTrace %.0f ms, %llu buffers, "
      "session data ~%.0f bytes/kernel resident\n",
      static_cast<unsigned long long>(total), std::chrono::duration<double, std::milli>(t1 - t0).count(),
      std::chrono::duration<double, std::milli>(t2 - t1).count(),
      static_cast<unsigned long long>(after.buffers_completed - before.buffers_completed),
      1024.0 * static_cast<double>(rssAfter - rssBefore) / static_cast<double>(total));
}

TEST_F(LoadTest, ManySessionsLeaveNothingBehind) {
  const int sessions = kSanitized ? 200 : 1000;
  constexpr uint32_t kKernels = 5;
  const SimControl& sim = simControl();
  const ConfigSnapshot cfg = Config::instance().snapshot();
  std::set<int64_t> allIds;
  int threadsAfterFirst = -1, maxThreads = 0;
  uint64_t kernels = 0, linked = 0;
  for (int i = 0; i < sessions; ++i) {
    Ops ops;
    auto session = newSession(cfg);
    const std::string name = "s" + std::to_string(i);
    session->start();
    const int32_t op = ops.add(gettidNow(), nowNs(), 0);
    session->pushCorrelationId(static_cast<uint64_t>(op));
    sim.launchKernels(name.c_str(), nullptr, 0, 1, 100, kKernels);
    session->popCorrelationId();
    ops.setEnd(op, nowNs());
    sim.synchronize(-1);
    session->stop();
    ASSERT_EQ(MsptiBufferPool::instance().outstanding(), 0u) << "session " << i;
    CountingLogger logger;
    session->processTrace(logger, ops.callback(), 0, 0);
    session.reset();
    ASSERT_EQ(logger.kernels, kKernels) << "session " << i;
    ASSERT_EQ(logger.names[name], kKernels) << "session " << i;
    kernels += logger.kernels;
    linked += logger.linked;
    for (int64_t id : logger.ids) EXPECT_TRUE(allIds.insert(id).second) << "id " << id << " reused in session " << i;
    const int threads = threadCount();
    if (i == 0) threadsAfterFirst = threads;
    maxThreads = std::max(maxThreads, threads);
  }
  const msptiSimStats st = sim.stats();
  EXPECT_EQ(st.external_stack_depth, 0u);
  EXPECT_EQ(kernels, uint64_t{kKernels} * sessions);
  EXPECT_EQ(linked, kernels);
  EXPECT_EQ(allIds.size(), static_cast<size_t>(sessions));  // one launch id per session, never reused
  EXPECT_LE(MsptiBufferPool::instance().pooled(), 4u);
  EXPECT_LE(maxThreads, threadsAfterFirst + 2) << "threads grew from " << threadsAfterFirst;
  EXPECT_LE(threadCount(), threadsAfterFirst);
  std::printf("[ LoadTest ] %d sessions, %llu kernels, %zu distinct ids, threads %d..%d, %llu linked\n", sessions,
              static_cast<unsigned long long>(kernels), allIds.size(), threadsAfterFirst, maxThreads,
              static_cast<unsigned long long>(linked));
}

TEST_F(LoadTest, ConcurrentThreadsLinkOnlyToTheirOwnOps) {
  constexpr int kThreads = 8;
  const int launchesPerThread = kSanitized ? 100 : 500;
  const SimControl& sim = simControl();
  Ops ops;
  auto session = newSession(Config::instance().snapshot());
  session->start();
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint32_t tid = gettidNow();
      // Kernel names carry the launching thread's tid: CountingLogger checks each link against it.
      const std::string name = std::to_string(tid) + "_t" + std::to_string(t);
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < launchesPerThread; ++i) {
        const int32_t op = ops.add(tid, nowNs(), 0);
        session->pushCorrelationId(static_cast<uint64_t>(op));
        if (i % 2) std::this_thread::yield();  // let other threads push onto MSPTI's global stack
        sim.launchKernel(name.c_str(), nullptr, static_cast<uint32_t>(0), static_cast<uint32_t>(t + 1), 100);
        session->popCorrelationId();
        ops.setEnd(op, nowNs());
      }
    });
  }
  for (auto& th : threads) th.join();
  sim.synchronize(-1);
  session->stop();
  CountingLogger logger;
  session->processTrace(logger, ops.callback(), 0, 0);
  EXPECT_EQ(logger.kernels, uint64_t{kThreads} * launchesPerThread);
  EXPECT_EQ(logger.wrongThreadLinks, 0u);
  EXPECT_GT(logger.linked, 0u);
  EXPECT_EQ(logger.launches, logger.linked);  // one launch event per linked (single-kernel) launch
  EXPECT_EQ(sim.stats().external_stack_depth, 0u);
  EXPECT_EQ(MsptiBufferPool::instance().outstanding(), 0u);
  std::printf("[ LoadTest ] %d threads x %d launches: %llu linked, %llu unlinked (foreign stack top rejected)\n",
              kThreads, launchesPerThread, static_cast<unsigned long long>(logger.linked),
              static_cast<unsigned long long>(logger.kernels - logger.linked));
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

// Any MSPTI call in a forked child ends it with exit code 20: every entry point of the loaded
// table (the forwarder uses the same table) is replaced by a tripwire. Test-only: the table is a
// plain member of MsptiLibrary, const only through its accessor.
void armTripwires() {
  auto& f = const_cast<MsptiFunctions&>(MsptiLibrary::instance().functions());
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
  f.flushPeriod = [](uint32_t) -> msptiResult { _exit(20); };
  f.isEnabled = [](msptiActivityKind) -> bool { _exit(20); };
}

// Child side of the fork tests: exit code 0 when everything holds, else the first failed check.
int childChecks(MsptiActivityProfilerSession* inherited) {
  if (!forkedFromMsptiParent()) return 10;
  armTripwires();
  if (MsptiLibrary::instance().ensureLoaded()) return 11;
  const LibraryReport r = MsptiLibrary::instance().report();
  if (r.available || r.reason != kForkedChildReason) return 12;
  // Op hooks in the child reach no MSPTI stack.
  CorrelationForwarder::instance().push(CorrelationForwarder::kOps, 77);
  CorrelationForwarder::instance().pop(CorrelationForwarder::kOps);
  if (inherited) {
    inherited->pushCorrelationId(78);
    inherited->popCorrelationId();
    inherited->stop();  // must not drain (MSPTI's threads are the parent's)
    CountingLogger logger;
    inherited->processTrace(logger);
    if (logger.kernels != 0) return 13;
    bool named = false;
    for (const auto& e : inherited->errors()) named |= e.find(kForkedChildReason) != std::string::npos;
    if (!named) return 14;
  }
  auto fresh = std::make_unique<MsptiActivityProfilerSession>(Config::instance().snapshot(),
                                                              std::set<ActivityType>{ActivityType::CONCURRENT_KERNEL});
  fresh->start();
  bool named = false;
  for (const auto& e : fresh->errors()) named |= e.find(kForkedChildReason) != std::string::npos;
  if (!named) return 15;
  fresh->stop();
  fresh.reset();
  return 0;
}

TEST_F(LoadTest, ForkDuringAndAfterASession) {
  const SimControl& sim = simControl();
  Ops ops;
  auto session = newSession(Config::instance().snapshot());
  session->start();
  sim.launchKernels("before_fork", nullptr, 0, 1, 100, 3);
  const int32_t op = ops.add(gettidNow(), nowNs(), 0);
  session->pushCorrelationId(static_cast<uint64_t>(op));  // an op open across the fork
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(childChecks(session.get()));
  int status = waitChild(pid, 20);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  // The parent is unaffected: its op is still forwarded, its kernels all collected.
  sim.launchKernels("after_fork", nullptr, 0, 1, 100, 2);
  session->popCorrelationId();
  ops.setEnd(op, nowNs());
  sim.synchronize(-1);
  session->stop();
  CountingLogger logger;
  session->processTrace(logger, ops.callback(), 0, 0);
  EXPECT_EQ(logger.names["before_fork"], 3u);
  EXPECT_EQ(logger.names["after_fork"], 2u);
  EXPECT_EQ(logger.linked, 2u);  // after_fork launched inside the forwarded op
  EXPECT_FALSE(forkedFromMsptiParent());
  EXPECT_EQ(sim.stats().external_stack_depth, 0u);

  // After the session: same rules.
  std::fflush(nullptr);
  pid = fork();
  if (pid == 0) _exit(childChecks(nullptr));
  status = waitChild(pid, 20);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST_F(LoadTest, StopWithKernelsInFlightEndsAtTheDrainTimeout) {
  const SimControl& sim = simControl();
  ConfigSnapshot cfg = Config::instance().snapshot();
  cfg.drainTimeoutMs = 100;
  auto session = newSession(cfg);
  session->start();
  for (int i = 0; i < 4; ++i) sim.launchKernel("long", nullptr, 0, 7, 600'000'000);  // 4 x 600 ms, serial
  sim.launchKernel("short", nullptr, 0, 8, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  session->stop();  // no synchronize
  const double stopMs = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  CountingLogger logger;
  session->processTrace(logger);
  const std::string meta = lastState(*session);
  EXPECT_LT(stopMs, 550) << meta;  // the first long kernel has not ended yet
  EXPECT_NE(meta.find("\"exit_reason\":\"timeout\""), std::string::npos) << meta;
  EXPECT_NE(meta.find("\"pending_launches\":4"), std::string::npos) << meta;
  EXPECT_EQ(logger.names["short"], 1u);
  EXPECT_EQ(logger.names["long"], 0u);
  EXPECT_EQ(MsptiBufferPool::instance().outstanding(), 0u);

  // The next session starts clean: the late kernels were dropped with the old subscription.
  auto next = newSession(Config::instance().snapshot());
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
