// stop() latency and completeness against the simulator (B2): the plugin's session versus the
// reference implementation's drain (torch_npu's MsptiActivityProfilerPoc, mspti.md 9) run in the
// same process, arms alternating (ABBA) within each size.
//
// Simulator: kernel records reach the buffer delivery_delay_ns (200 ms) after the kernel ends.
//   variant "pull"   : disable_pulls=1, driver_flush_ns=20 ms (MSPTI 26.1: Disable pulls what
//                      has ended, then the parser stops; drop_after_disable=1)
//   variant "nopull" : disable_pulls=0, drop_after_disable=0 (Disable pulls nothing; records keep
//                      arriving on their own schedule until Unsubscribe), as before MSPTI 26.1;
//                      the plugin runs with drain_order=poll_first, what `auto` picks on such a
//                      library (it lacks msptiActivityIsEnabled; the simulator does not hide it)
//   variant "nopull_isenabled": the same library but with msptiActivityIsEnabled (a 26.1 whose
//                      driver is slow): drain_order=auto picks disable_first, which must still
//                      wait for every late record (stop about the delivery delay, 0 lost)
// Workload per arm: N launches of one short kernel, each inside an op's push/pop (as torch
// brackets every op), then msptiSimSynchronize (torch.profiler synchronizes the device before
// stopping), then the timed stop.
//   plugin   : MsptiActivityProfilerSession (the process context's parts, default settings:
//              KERNEL, COMMUNICATION, EXTERNAL_CORRELATION, RUNTIME_API) configure -> start ->
//              launches -> sync -> stop() timed; processTrace() afterwards; lost = N -
//              CONCURRENT_KERNEL activities built
//   baseline : Subscribe, RegisterCallbacks (the plugin's buffer pool into a fresh RecordStore),
//              Enable KERNEL, COMMUNICATION, ACL_API, EXTERNAL_CORRELATION; push/pop CUSTOM0
//              directly; stop = FlushAll, sleep 25 ms, repeated until three consecutive polls
//              add no record (at most 400 polls), then Disable each kind, Unsubscribe,
//              FlushAll, sleep 25 ms; lost = N - KERNEL records received
//   floor    : (variant "pull" only, first in each repeat) the plugin's kinds enabled; stop =
//              Disable, FlushAll, Unsubscribe, FlushAll and nothing else: what the simulator
//              itself needs to hand over the tail (a driver flush per Disable of KERNEL and of
//              COMMUNICATION, writing the pulled records, our completion callbacks)
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <set>
#include <thread>

#include "ActivityKinds.h"
#include "BenchCommon.h"
#include "BenchLogger.h"
#include "MsptiActivityApi.h"
#include "MsptiActivityProfilerSession.h"
#include "RecordStore.h"

namespace {

using namespace torch_mspti;
constexpr int64_t kMs = 1'000'000;
constexpr uint64_t kKernelNs = 2'000;

struct ArmResult {
  double stopMs = 0;
  int64_t lost = 0;
  std::string detail;  // plugin: drain exit reason; baseline: polls
};

template <typename Push, typename Pop>
void launchAll(const bench::Sim& sim, int64_t n, Push push, Pop pop) {
  for (int64_t i = 0; i < n; ++i) {
    push(static_cast<uint64_t>(i + 1));
    if (sim.launchKernel("bench_kernel", "KERNEL_AIVEC", 0, 1, kKernelNs) == 0)
      throw std::runtime_error("launch minted no correlation id (kernel collection off?)");
    pop();
  }
  sim.synchronize(-1);
}

// A bare consumer on the process context's buffer pool: Subscribe, RegisterCallbacks, Enable
// `kinds`; its records go to a fresh RecordStore.
struct Consumer {
  const MsptiFunctions* f = nullptr;
  MsptiActivityApi api;
  std::shared_ptr<RecordStore> store = std::make_shared<RecordStore>(0);
  msptiSubscriberHandle sub = nullptr;

  static Consumer start(const char* who, const std::vector<msptiActivityKind>& kinds) {
    PluginContext& ctx = bench::context();
    Consumer c{&ctx.library.functions(), MsptiActivityApi(ctx.library.functions())};
    ctx.pool.configure(8u << 20, 64);
    ctx.pool.bindCallbacks();
    if (c.api.subscribe(&c.sub) != MSPTI_SUCCESS) throw std::runtime_error(std::string(who) + ": subscribe failed");
    ctx.pool.setSink(c.store);
    if (c.api.registerCallbacks(&MsptiBufferPool::onRequest, &MsptiBufferPool::onComplete) != MSPTI_SUCCESS)
      throw std::runtime_error(std::string(who) + ": register failed");
    for (auto k : kinds)
      if (c.api.enable(k) != MSPTI_SUCCESS) throw std::runtime_error(std::string(who) + ": enable " + kindName(k));
    return c;
  }
  // Detaches the store from the pool and returns the KERNEL records it received.
  int64_t finish() {
    bench::context().pool.setSink(nullptr);
    store->seal();
    return static_cast<int64_t>(store->recordsByKind()[MSPTI_ACTIVITY_KIND_KERNEL]);
  }
};

// The kinds the plugin's session enables for a CONCURRENT_KERNEL trace (checked against the
// session's report in runPlugin): the floor enables the same, so that it pays the same driver
// flushes on Disable (one per KERNEL and COMMUNICATION in MSPTI 26.1). --communication=0 runs the
// plugin with enable_communication=false (and the floor without COMMUNICATION).
std::vector<msptiActivityKind> gPluginKinds;

ArmResult runPlugin(const bench::Sim& sim, int64_t n) {
  SessionDeps deps = bench::context().sessionDeps();
  uint64_t warnings = 0;
  deps.warn = [&](const std::string&) { ++warnings; };  // counted, not printed: no ops in this trace
  auto s = std::make_unique<MsptiActivityProfilerSession>(
      std::move(deps), std::set<libkineto::ActivityType>{libkineto::ActivityType::CONCURRENT_KERNEL});
  s->start();
  if (!s->errors().empty()) throw std::runtime_error("session start: " + s->errors().front());
  // The same kinds (the floor lists them in the drain's Disable order, the report in enabling order).
  std::vector<std::string> kinds, enabled = s->report().enabledKinds;
  for (auto k : gPluginKinds) kinds.push_back(kindName(k));
  std::sort(kinds.begin(), kinds.end());
  std::sort(enabled.begin(), enabled.end());
  if (enabled != kinds) throw std::runtime_error("the session enabled other kinds than the floor");
  launchAll(sim, n, [&](uint64_t id) { s->pushCorrelationId(id); }, [&] { s->popCorrelationId(); });
  const int64_t t0 = bench::nowNs();
  s->stop();
  const int64_t t1 = bench::nowNs();
  bench::CollectingLogger logger;
  s->processTrace(logger);
  bench::context().release.waitIdle();  // the next arm subscribes: the session's Unsubscribe must be done
  ArmResult r;
  r.stopMs = static_cast<double>(t1 - t0) / kMs;
  r.lost = n - static_cast<int64_t>(logger.kernels);
  const auto report = s->report();
  r.detail = report.drain ? report.drain->exitReason : "none";
  return r;
}

ArmResult runBaseline(const bench::Sim& sim, int64_t n) {
  const std::vector<msptiActivityKind> kinds = {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION,
                                                MSPTI_ACTIVITY_KIND_ACL_API, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  Consumer c = Consumer::start("baseline", kinds);
  const MsptiFunctions& f = *c.f;
  MsptiActivityApi& api = c.api;
  auto& store = c.store;
  launchAll(
      sim, n, [&](uint64_t id) { f.pushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id); },
      [&] {
        uint64_t last = 0;
        f.popExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
      });

  const int64_t t0 = bench::nowNs();
  int quiet = 0, polls = 0;
  uint64_t prev = store->records();
  while (polls < 400) {
    f.flushAll(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    ++polls;
    const uint64_t cur = store->records();
    quiet = cur == prev ? quiet + 1 : 0;
    prev = cur;
    if (quiet >= 3) break;
  }
  for (auto k : kinds) api.disable(k);
  api.unsubscribe(c.sub);
  f.flushAll(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(25));
  const int64_t t1 = bench::nowNs();

  ArmResult r;
  r.stopMs = static_cast<double>(t1 - t0) / kMs;
  r.lost = n - c.finish();
  r.detail = std::to_string(polls) + " polls";
  return r;
}

// The floor of any complete drain for this library: COMMUNICATION's Disable pulls what has ended
// (26.1; without COMMUNICATION nothing can pull without losing kernels), FlushAll every 1 ms until
// every kernel record came (the reader parses after the Disable, docs/mspti.md 2.3), then the other
// Disables in the session's order, FlushAll, Unsubscribe, one more FlushAll; nothing else. Same pool
// and store as the plugin. Its time is what the simulator itself takes to hand over the tail.
ArmResult runFloor(const bench::Sim& sim, int64_t n) {
  const std::vector<msptiActivityKind>& kinds = gPluginKinds;
  Consumer c = Consumer::start("floor", kinds);
  const MsptiFunctions& f = *c.f;
  MsptiActivityApi& api = c.api;
  launchAll(
      sim, n, [&](uint64_t id) { f.pushExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id); },
      [&] {
        uint64_t last = 0;
        f.popExternalCorrelationId(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
      });
  const int64_t t0 = bench::nowNs();
  const bool pull = kinds.front() == MSPTI_ACTIVITY_KIND_COMMUNICATION;
  if (pull) api.disable(MSPTI_ACTIVITY_KIND_COMMUNICATION);
  const int64_t deadline = t0 + 2000 * kMs;
  while (static_cast<int64_t>(c.store->recordsOfKind(MSPTI_ACTIVITY_KIND_KERNEL)) < n && bench::nowNs() < deadline) {
    f.flushAll(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto k : kinds)
    if (!pull || k != MSPTI_ACTIVITY_KIND_COMMUNICATION) api.disable(k);
  f.flushAll(1);
  api.unsubscribe(c.sub);
  f.flushAll(1);
  const int64_t t1 = bench::nowNs();
  ArmResult r;
  r.stopMs = static_cast<double>(t1 - t0) / kMs;
  r.lost = n - c.finish();
  return r;
}

}  // namespace

int runDrain(const bench::Args& args) {
  const auto sizes = args.list("sizes", {1000, 10000, 100000});
  const int64_t reps = args.i("reps", 5);
  const int64_t delayMs = args.i("delay_ms", 200);
  const int64_t flushMs = args.i("driver_flush_ms", 20);
  const bool communication = args.i("communication", 1) != 0;
  // The session's kinds, in the order its drain disables them (DrainPolicy.cpp: COMMUNICATION
  // first, whose Disable flushes both driver channels, then KERNEL and MARKER, then the host
  // kinds): MARKER is on by default (enable_markers), MEMORY and the copy kinds need the preload,
  // which this process does not have.
  gPluginKinds.clear();
  if (communication) gPluginKinds.push_back(MSPTI_ACTIVITY_KIND_COMMUNICATION);
  gPluginKinds.insert(gPluginKinds.end(), {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_MARKER,
                                           MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API});
  const std::string err = bench::context().config.setBool("enable_communication", communication);
  if (!err.empty()) throw std::runtime_error(err);
  const bench::Sim& sim = bench::loadSim();

  bench::Json variantsJson;
  bool ok = true;
  for (const std::string variant : {"pull", "nopull", "nopull_isenabled"}) {
    bench::Json sizesJson;
    for (int64_t n : sizes) {
      sim.resetOptions();
      sim.set("delivery_delay_ns", delayMs * kMs);
      sim.set("driver_flush_ns", flushMs * kMs);
      sim.set("disable_pulls", variant == "pull" ? 1 : 0);
      sim.set("drop_after_disable", variant == "pull" ? 1 : 0);
      // A library whose Disable does not pull (before 26.1) has no msptiActivityIsEnabled, so
      // drain_order=auto polls first there; the simulator keeps the symbol, so say it.
      const std::string err =
          bench::context().config.setText("drain_order", variant == "nopull" ? "poll_first" : "auto");
      if (!err.empty()) throw std::runtime_error(err);
      std::vector<double> stopP, stopB, lostP, lostB, stopF, lostF;
      std::string reasons, polls;
      for (int64_t r = 0; r < reps; ++r) {
        if (variant == "pull") {  // the floor only means something when Disable pulls
          ArmResult a = runFloor(sim, n);
          stopF.push_back(a.stopMs);
          lostF.push_back(static_cast<double>(a.lost));
        }
        for (int k = 0; k < 2; ++k) {
          const bool pluginFirst = r % 2 == 0;
          if ((k == 0) == pluginFirst) {
            ArmResult a = runPlugin(sim, n);
            stopP.push_back(a.stopMs);
            lostP.push_back(static_cast<double>(a.lost));
            reasons += (reasons.empty() ? "" : " ") + a.detail;
          } else {
            ArmResult a = runBaseline(sim, n);
            stopB.push_back(a.stopMs);
            lostB.push_back(static_cast<double>(a.lost));
            polls = a.detail;
          }
        }
      }
      for (double l : lostP) ok = ok && l == 0;
      bench::Json j;
      j.arr("plugin_stop_ms", stopP)
          .arr("baseline_stop_ms", stopB)
          .arr("plugin_lost", lostP)
          .arr("baseline_lost", lostB);
      j.arr("floor_stop_ms", stopF).arr("floor_lost", lostF);
      j.str("plugin_exit_reasons", reasons).str("baseline_last_polls", polls);
      sizesJson.obj(std::to_string(n), j);
      std::cerr << "drain " << variant << " n=" << n << " done\n";
    }
    variantsJson.obj(variant, sizesJson);
  }
  sim.resetOptions();
  bench::Json params, out;
  std::vector<double> sz(sizes.begin(), sizes.end());
  params.arr("sizes", sz)
      .num("reps", static_cast<double>(reps))
      .num("delivery_delay_ms", static_cast<double>(delayMs))
      .num("driver_flush_ms", static_cast<double>(flushMs))
      .num("communication", communication)
      .num("kernel_ns", kKernelNs);
  out.str("bench", "drain").obj("params", params).obj("variants", variantsJson).num("ok", ok);
  std::cout << out.str() << std::endl;
  return ok ? 0 : 3;
}
