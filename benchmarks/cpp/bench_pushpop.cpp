// B1a / B1c: the per-op hot path, kineto's push/popCorrelationId on the session, in ns per op
// (one push + one pop, as every profiled op does).
//
// Arms, interleaved round-robin within each repeat:
//   plugin_noop   session->push/pop (virtual, as kineto calls it), forwarder armed with
//                 libmspti_noop.so                                           -> B1a (target <= 50 ns)
//   plugin_sim    the same, armed with the simulator's push/pop (global stack behind a mutex, as
//                 the real library)                                          -> B1c
//   direct_noop   the no-op library's push/pop called directly (call cost alone)
//   direct_sim    the simulator's push/pop called directly (MSPTI's share of B1c)
//   disarmed      session->push/pop while the forwarder is not armed (CPU-only sessions)
// Also, MSPTI's own per-launch cost on the launching thread for the kinds each side enables
// (ns per launch, launches of one 2 us kernel, records delivered 1 ms later):
//   launch_kernel_only  KERNEL only (what B1b's bare consumer enables)
//   launch_plugin_kinds KERNEL + EXTERNAL_CORRELATION + RUNTIME_API, each launch inside a
//                       push/pop (what the plugin enables): MSPTI writes two records per launch
//                       on the launching thread
// Check: the forwarder reports no error, no overflow, and MSPTI's stack is left as found; every
// launched kernel's record arrives.
#include <dlfcn.h>

#include <iostream>
#include <memory>
#include <set>

#include "BenchCommon.h"
#include "Config.h"
#include "CorrelationForwarder.h"
#include "MsptiActivityApi.h"
#include "MsptiActivityProfilerSession.h"
#include "MsptiBufferPool.h"
#include "MsptiLibrary.h"
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

double viaSession(libkineto::IActivityProfilerSession* s, int64_t iters) {
  const int64_t t0 = bench::nowNs();
  for (int64_t i = 0; i < iters; ++i) {
    s->pushCorrelationId(static_cast<uint64_t>(i + 1));
    s->popCorrelationId();
  }
  return static_cast<double>(bench::nowNs() - t0) / static_cast<double>(iters);
}

double direct(const MsptiFunctions& f, int64_t iters) {
  auto* push = f.pushExternalCorrelationId;
  auto* pop = f.popExternalCorrelationId;
  const int64_t t0 = bench::nowNs();
  for (int64_t i = 0; i < iters; ++i) {
    uint64_t last = 0;
    push(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(i + 1));
    pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  }
  return static_cast<double>(bench::nowNs() - t0) / static_cast<double>(iters);
}

// ns per launch with `kinds` enabled; `bracket`: each launch inside a CUSTOM0 push/pop. Returns
// -1 when a kernel record is missing.
double launchCost(const bench::Sim& sim, const std::vector<msptiActivityKind>& kinds, bool bracket, int64_t n) {
  const MsptiFunctions& f = torch_mspti::MsptiLibrary::instance().functions();
  torch_mspti::MsptiActivityApi api(f);
  auto& pool = torch_mspti::MsptiBufferPool::instance();
  auto store = std::make_shared<torch_mspti::RecordStore>(0);
  pool.configure(8u << 20, 64);
  msptiSubscriberHandle sub = nullptr;
  if (api.subscribe(&sub) != MSPTI_SUCCESS) throw std::runtime_error("launch: subscribe failed");
  pool.setSink(store);
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
  for (auto k : kinds) api.disable(k);  // pulls what has ended
  f.flushAll(1);
  api.unsubscribe(sub);
  f.flushAll(1);
  pool.setSink(nullptr);
  if (static_cast<int64_t>(store->kernels().size()) != n) return -1;
  return static_cast<double>(t1 - t0) / static_cast<double>(n);
}

}  // namespace

int runPushPop(const bench::Args& args) {
  const int64_t iters = args.i("iters", 2'000'000);
  const int64_t reps = args.i("reps", 15);
  const bench::Sim& sim = bench::loadSim();
  const MsptiFunctions& simFns = torch_mspti::MsptiLibrary::instance().functions();
  const MsptiFunctions noopFns = loadNoop();
  CorrelationForwarder& fwd = CorrelationForwarder::instance();

  auto session = std::make_unique<torch_mspti::MsptiActivityProfilerSession>(
      torch_mspti::Config::instance().snapshot(),
      std::set<libkineto::ActivityType>{libkineto::ActivityType::CONCURRENT_KERNEL});
  // An opaque pointer: the calls stay virtual, as kineto makes them.
  libkineto::IActivityProfilerSession* volatile opaque = session.get();
  libkineto::IActivityProfilerSession* s = opaque;

  const uint64_t depthBefore = sim.stats().external_stack_depth;
  const uint64_t errorsBefore = fwd.errors(), overflowsBefore = fwd.overflows();
  const char* names[] = {"plugin_noop", "plugin_sim", "direct_noop", "direct_sim", "disarmed"};
  std::vector<double> samples[5];
  auto runArm = [&](int arm) {
    switch (arm) {
      case 0:
        fwd.arm(&noopFns);
        samples[0].push_back(viaSession(s, iters));
        fwd.disarm();
        break;
      case 1:
        fwd.arm(&simFns);
        samples[1].push_back(viaSession(s, iters));
        fwd.disarm();
        break;
      case 2: samples[2].push_back(direct(noopFns, iters)); break;
      case 3: samples[3].push_back(direct(simFns, iters)); break;
      case 4: samples[4].push_back(viaSession(s, iters)); break;
    }
  };
  for (int arm = 0; arm < 5; ++arm) runArm(arm);  // warm-up, discarded
  for (auto& v : samples) v.clear();
  for (int64_t r = 0; r < reps; ++r)
    for (int k = 0; k < 5; ++k) runArm(static_cast<int>((k + r) % 5));  // rotate the order

  // MSPTI's per-launch cost by kind set (interleaved).
  const int64_t launches = args.i("launches", 20000);
  sim.resetOptions();
  sim.set("delivery_delay_ns", 1'000'000);
  std::vector<double> launchBare, launchPlugin;
  bool launchesComplete = true;
  for (int64_t r = 0; r < reps; ++r) {
    for (int k = 0; k < 2; ++k) {
      const bool bare = (k == 0) == (r % 2 == 0);
      const double v = bare ? launchCost(sim, {MSPTI_ACTIVITY_KIND_KERNEL}, false, launches)
                            : launchCost(sim,
                                         {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                          MSPTI_ACTIVITY_KIND_RUNTIME_API},
                                         true, launches);
      launchesComplete = launchesComplete && v > 0;
      (bare ? launchBare : launchPlugin).push_back(v);
    }
  }
  sim.resetOptions();

  const uint64_t depthAfter = sim.stats().external_stack_depth;
  const bool ok = launchesComplete && depthAfter == depthBefore && fwd.errors() == errorsBefore &&
                  fwd.overflows() == overflowsBefore;
  bench::Json params, arms, checks;
  params.num("iters", static_cast<double>(iters))
      .num("reps", static_cast<double>(reps))
      .num("launches", static_cast<double>(launches));
  for (int k = 0; k < 5; ++k) arms.arr(names[k], samples[k]);
  arms.arr("launch_kernel_only", launchBare).arr("launch_plugin_kinds", launchPlugin);
  checks.num("stack_depth_before", static_cast<double>(depthBefore))
      .num("stack_depth_after", static_cast<double>(depthAfter))
      .num("forwarder_errors", static_cast<double>(fwd.errors() - errorsBefore))
      .num("forwarder_overflows", static_cast<double>(fwd.overflows() - overflowsBefore))
      .num("ok", ok);
  bench::Json out;
  out.str("bench", "pushpop")
      .str("unit", "ns/op")
      .obj("params", params)
      .obj("arms", arms)
      .obj("checks", checks)
      .num("ok", ok);
  std::cout << out.str() << std::endl;
  return ok ? 0 : 3;
}
