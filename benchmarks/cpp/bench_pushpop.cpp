// The per-op path: kineto's push/popCorrelationId on the session, in ns per op (one push + one
// pop, as every profiled op does), and the heap and lock calls it makes on the op's thread.
// Built into libbench_pushpop.so (benchmarks/cpp/CMakeLists.txt): the core's thread-locals are
// then reached as in the _C module.
//
// Arms, order rotated within each repeat after one warm-up round:
//   plugin_noop   session->push/pop (virtual, as kineto calls it), the forwarder armed with
//                 libmspti_noop.so: the plugin's own cost plus an empty call each way    (B1a)
//   plugin_sim    the same, armed with the simulator's push/pop (process-global stack behind a
//                 mutex, as the real library)                                             (B1c)
//   direct_noop   the no-op library's push/pop called directly: the call alone; plugin share =
//                 plugin_noop - direct_noop, per repeat
//   direct_sim    the simulator's push/pop called directly (MSPTI's share of plugin_sim)
//   disarmed      session->push/pop while the forwarder is not armed (CPU-only sessions)
// Per arm and repeat: heap calls and lock calls made by this thread during the timed loop
// (BenchProbe.cpp counts them for the whole process). The plugin arms' steady state (a session on
// a thread whose op log already has room, as in every profiling cycle after the first) must make
// none; the simulator's arms take its mutex and show that locks are seen. The first armed session
// on the thread is reported apart (warm-up round): it allocates the thread's state and grows the
// op log by one chunk per CorrelationForwarder::kLogChunkIds ids.
// Also MSPTI's own per-launch cost on the launching thread by the kinds enabled (ns per launch,
// launches of one 2 us kernel, records delivered 1 ms later; arms interleaved), and what each
// configuration leaves the link rule (LinkResolver.h):
//   launch_kernel_only     KERNEL, no push/pop (what the overhead benchmark's bare consumer
//                          enables): rows without any link evidence
//   launch_kernel_pushpop  KERNEL, each launch inside a CUSTOM0 push/pop: MSPTI's stack alone
//   launch_hints           + EXTERNAL_CORRELATION: the op's id per launch (a hint: unverified)
//   launch_calls           KERNEL + RUNTIME_API inside push/pop: the launch call's thread and
//                          time (the op by time: recovered, not verified)
//   launch_plugin_kinds    KERNEL + EXTERNAL_CORRELATION + RUNTIME_API inside push/pop (what
//                          the plugin enables): both, so every link is verified
// Checks (exit 3 when one fails): plugin_noop and disarmed make no heap call and take no lock in
// any timed round, while the probes do see calls (the first session's log growth, the
// simulator's mutex); after every plugin arm the thread's op log holds exactly the ids pushed, in
// order; the forwarder counts no error, overflow or lost log entry; MSPTI's stack is left as
// found; every launched kernel's record arrives.
#include <dlfcn.h>

#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "ActivityKinds.h"
#include "BenchCommon.h"
#include "CorrelationForwarder.h"
#include "MsptiActivityApi.h"
#include "MsptiActivityProfilerSession.h"
#include "RecordStore.h"

namespace {

using torch_mspti::CorrelationForwarder;
using torch_mspti::MsptiFunctions;

MsptiFunctions loadNoop() {
  void* h = dlopen(MSPTI_NOOP_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error(std::string("cannot load ") + MSPTI_NOOP_PATH);
  MsptiFunctions f;
  f.pushExternalCorrelationId =
      reinterpret_cast<decltype(f.pushExternalCorrelationId)>(dlsym(h, "msptiActivityPushExternalCorrelationId"));
  f.popExternalCorrelationId =
      reinterpret_cast<decltype(f.popExternalCorrelationId)>(dlsym(h, "msptiActivityPopExternalCorrelationId"));
  if (!f.pushExternalCorrelationId || !f.popExternalCorrelationId) throw std::runtime_error("noop lacks push/pop");
  return f;
}

struct Sample {
  double nsPerOp = 0;
  uint64_t heap = 0, locks = 0;
};

template <typename Body>
Sample timed(bench::ThreadCallsFn calls, int64_t iters, Body body) {
  const bench::ThreadCalls c0 = calls();
  const int64_t t0 = bench::nowNs();
  body();
  const int64_t t1 = bench::nowNs();
  const bench::ThreadCalls c1 = calls();
  return {static_cast<double>(t1 - t0) / static_cast<double>(iters), c1.heap - c0.heap, c1.locks - c0.locks};
}

void viaSession(libkineto::IActivityProfilerSession* s, int64_t iters) {
  for (int64_t i = 0; i < iters; ++i) {
    s->pushCorrelationId(static_cast<uint64_t>(i + 1));
    s->popCorrelationId();
  }
}

void direct(const MsptiFunctions& f, int64_t iters) {
  auto* push = f.pushExternalCorrelationId;
  auto* pop = f.popExternalCorrelationId;
  for (int64_t i = 0; i < iters; ++i) {
    uint64_t last = 0;
    push(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(i + 1));
    pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  }
}

// True when this thread's log of `gen` holds exactly 1..iters, in order, and no other thread's.
bool logIsComplete(const CorrelationForwarder& fwd, uint32_t gen, int64_t iters) {
  const auto log = fwd.takeLog(gen);
  if (log.size() != 1 || static_cast<int64_t>(log[0].ids.size()) != iters) return false;
  for (int64_t i = 0; i < iters; ++i)
    if (log[0].ids[static_cast<size_t>(i)] != static_cast<uint64_t>(i + 1)) return false;
  return true;
}

// ns per launch with `kinds` enabled; `bracket`: each launch inside a CUSTOM0 push/pop. Returns
// -1 when a kernel record is missing.
double launchCost(const bench::Sim& sim, const std::vector<msptiActivityKind>& kinds, bool bracket, int64_t n) {
  torch_mspti::PluginContext& ctx = bench::context();
  const MsptiFunctions& f = ctx.library.functions();
  torch_mspti::MsptiActivityApi api(f);
  auto store = std::make_shared<torch_mspti::RecordStore>(0);
  ctx.pool.configure(8u << 20, 64);
  ctx.pool.bindCallbacks();
  msptiSubscriberHandle sub = nullptr;
  if (api.subscribe(&sub) != MSPTI_SUCCESS) throw std::runtime_error("launch: subscribe failed");
  ctx.pool.setSink(store);
  api.registerCallbacks(&torch_mspti::MsptiBufferPool::onRequest, &torch_mspti::MsptiBufferPool::onComplete);
  for (auto k : kinds) api.enable(k);
  const int64_t t0 = bench::nowNs();
  for (int64_t i = 0; i < n; ++i) {
    if (bracket) f.pushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(i + 1));
    sim.launchKernel("bench_kernel", "KERNEL_AIVEC", 0, 1, 2000);
    if (bracket) {
      uint64_t last = 0;
      f.popExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
    }
  }
  const int64_t t1 = bench::nowNs();
  sim.synchronize(-1);
  // Every kernel record first: a Disable drops what MSPTI's reader parses after it (docs/mspti.md 2.3).
  const int64_t deadline = bench::nowNs() + 2'000'000'000;
  while (static_cast<int64_t>(store->recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL]) < n && bench::nowNs() < deadline) {
    f.flushAll(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto k : kinds) api.disable(k);
  f.flushAll(1);
  api.unsubscribe(sub);
  f.flushAll(1);
  ctx.pool.setSink(nullptr);
  store->seal();
  if (static_cast<int64_t>(store->recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL]) != n) return -1;
  return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

std::vector<double> field(const std::vector<Sample>& v, double Sample::* m) {
  std::vector<double> out;
  for (const Sample& s : v) out.push_back(s.*m);
  return out;
}

std::vector<double> count(const std::vector<Sample>& v, uint64_t Sample::* m) {
  std::vector<double> out;
  for (const Sample& s : v) out.push_back(static_cast<double>(s.*m));
  return out;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int torch_mspti_bench_pushpop(int argc, char** argv,
                                                                                bench::ThreadCallsFn calls) {
  try {
    const bench::Args args(argc, argv, 0);
    const int64_t iters = args.i("iters", 2'000'000);
    const int64_t reps = args.i("reps", 15);
    const bench::Sim& sim = bench::loadSim();
    torch_mspti::PluginContext& ctx = bench::context();
    const MsptiFunctions& simFns = ctx.library.functions();
    const MsptiFunctions noopFns = loadNoop();
    CorrelationForwarder& fwd = ctx.forwarder;

    // A session that holds no MSPTI subscriber (no library in its parts): its push/pop are the
    // production code path, driven by the forwarder armed here.
    torch_mspti::SessionDeps deps;
    deps.config = ctx.config.snapshot();
    deps.forwarder = &fwd;
    auto session = std::make_unique<torch_mspti::MsptiActivityProfilerSession>(
        std::move(deps), std::set<libkineto::ActivityType>{libkineto::ActivityType::CONCURRENT_KERNEL});
    // An opaque pointer: the calls stay virtual, as kineto makes them.
    libkineto::IActivityProfilerSession* volatile opaque = session.get();
    libkineto::IActivityProfilerSession* s = opaque;

    const uint64_t depthBefore = sim.stats().external_stack_depth;
    const torch_mspti::SessionCounters before = fwd.counters();
    const char* names[] = {"plugin_noop", "plugin_sim", "direct_noop", "direct_sim", "disarmed"};
    std::vector<Sample> samples[5];
    bool logsComplete = true;
    auto armed = [&](const MsptiFunctions* fns) {
      const uint32_t gen = fwd.arm(fns);
      Sample r = timed(calls, iters, [&] { viaSession(s, iters); });
      fwd.disarm();
      logsComplete = logsComplete && logIsComplete(fwd, gen, iters);
      return r;
    };
    auto runArm = [&](int arm) {
      switch (arm) {
        case 0: return armed(&noopFns);
        case 1: return armed(&simFns);
        case 2: return timed(calls, iters, [&] { direct(noopFns, iters); });
        case 3: return timed(calls, iters, [&] { direct(simFns, iters); });
        default: return timed(calls, iters, [&] { viaSession(s, iters); });
      }
    };
    // Warm-up round: plugin_noop first, so it is this thread's first armed session.
    std::vector<Sample> warmup;
    for (int arm = 0; arm < 5; ++arm) warmup.push_back(runArm(arm));
    for (int64_t r = 0; r < reps; ++r)
      for (int k = 0; k < 5; ++k) {
        const int arm = static_cast<int>((k + r) % 5);
        samples[arm].push_back(runArm(arm));
      }

    // MSPTI's per-launch cost by kind set (interleaved).
    const int64_t launches = args.i("launches", 20000);
    sim.resetOptions();
    sim.set("delivery_delay_ns", 1'000'000);
    struct LaunchArm {
      const char* name;
      std::vector<msptiActivityKind> kinds;
      bool bracket;
      std::vector<double> ns;
    };
    const msptiActivityKind kKernel = MSPTI_ACTIVITY_KIND_KERNEL, kExt = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                            kRuntime = MSPTI_ACTIVITY_KIND_RUNTIME_API;
    std::vector<LaunchArm> launchArms = {
        {"launch_kernel_only", {kKernel}, false, {}},
        {"launch_kernel_pushpop", {kKernel}, true, {}},
        {"launch_hints", {kKernel, kExt}, true, {}},
        {"launch_calls", {kKernel, kRuntime}, true, {}},
        {"launch_plugin_kinds", {kKernel, kExt, kRuntime}, true, {}},
    };
    bool launchesComplete = true;
    for (int64_t r = 0; r < reps; ++r) {
      for (size_t k = 0; k < launchArms.size(); ++k) {  // rotated
        LaunchArm& arm = launchArms[(k + static_cast<size_t>(r)) % launchArms.size()];
        const double v = launchCost(sim, arm.kinds, arm.bracket, launches);
        launchesComplete = launchesComplete && v > 0;
        arm.ns.push_back(v);
      }
    }
    sim.resetOptions();

    const uint64_t depthAfter = sim.stats().external_stack_depth;
    const torch_mspti::SessionCounters fc = fwd.counters().since(before);
    // The per-op contract: no heap call and no lock in the steady state, armed or not. The probes
    // must see what they count (the first session grows the log; the simulator locks its stack).
    bool steady = true;
    for (int arm : {0, 4})
      for (const Sample& x : samples[arm]) steady = steady && x.heap == 0 && x.locks == 0;
    bool probesSee = warmup[0].heap > 0;
    for (const Sample& x : samples[3]) probesSee = probesSee && x.locks > 0;
    const bool ok = launchesComplete && logsComplete && steady && probesSee && depthAfter == depthBefore &&
                    fc.correlationErrors == 0 && fc.correlationOverflow == 0 && fc.opLogLost == 0;
    bench::Json params, arms, heap, locks, first, checks;
    params.num("iters", static_cast<double>(iters))
        .num("reps", static_cast<double>(reps))
        .num("launches", static_cast<double>(launches))
        .num("log_chunk_ids", CorrelationForwarder::kLogChunkIds);
    for (int k = 0; k < 5; ++k) {
      arms.arr(names[k], field(samples[k], &Sample::nsPerOp));
      heap.arr(names[k], count(samples[k], &Sample::heap));
      locks.arr(names[k], count(samples[k], &Sample::locks));
    }
    for (const LaunchArm& arm : launchArms) arms.arr(arm.name, arm.ns);
    first.num("ns_per_op", warmup[0].nsPerOp)
        .num("heap_calls", static_cast<double>(warmup[0].heap))
        .num("lock_calls", static_cast<double>(warmup[0].locks));
    checks.num("stack_depth_before", static_cast<double>(depthBefore))
        .num("stack_depth_after", static_cast<double>(depthAfter))
        .num("forwarder_errors", static_cast<double>(fc.correlationErrors))
        .num("forwarder_overflows", static_cast<double>(fc.correlationOverflow))
        .num("op_log_lost", static_cast<double>(fc.opLogLost))
        .num("op_logs_complete", logsComplete)
        .num("steady_state_no_heap_no_lock", steady)
        .num("probes_see_calls", probesSee)
        .num("ok", ok);
    bench::Json out;
    out.str("bench", "pushpop")
        .str("unit", "ns/op")
        .obj("params", params)
        .obj("arms", arms)
        .obj("heap_calls", heap)
        .obj("lock_calls", locks)
        .obj("first_session", first)
        .obj("checks", checks)
        .num("ok", ok);
    std::cout << out.str() << std::endl;
    return ok ? 0 : 3;
  } catch (const std::exception& e) {
    std::cerr << "torch_mspti_bench pushpop: " << e.what() << "\n";
    return 1;
  }
}
