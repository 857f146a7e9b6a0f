// The work after collection on N kernels (B3): kernels/s of processTrace, of what stop() prepares
// for it, and our resident bytes per kernel.
//
// A synthetic session as MSPTI, torch and kineto leave it: N ops on one thread (op i spans
// [t_i, t_i + 900 ns] and has torch correlation id i + 1), each launching one kernel. Per launch
// MSPTI's records: one CUSTOM0 EXTERNAL_CORRELATION (the op's id), one RUNTIME_API
// "LaunchKernelV2" on the op's thread at [t_i + 100, t_i + 300] and one KERNEL at
// [t_i + 500, t_i + 800] (64 distinct names, 3 types, 4 streams), appended to a RecordStore in
// batches of 40k records as the completion callback appends them. The forwarder's op log holds
// ids 1..N for the thread; a fake getLinkedActivity looks each id up in a hash map (as kineto's
// does) and returns a CPU op activity with the op's interval. Every kernel is then linked,
// verified (its launch lies in the op the hint names).
// Timed, each repeat on a freshly filled store:
//   prepare  what stop() does after the drain: seal(), the host clock (realtime),
//            LaunchTable::build (timing checks, earlier sessions, duplicates, window, lanes)
//   process  the body of MsptiActivityProfilerSession::processTrace: OpTimeline from the op
//            log and getLinkedActivity, buildActivities (the link rule, the activities), and
//            logging every activity into a logger that keeps pointers (like kineto's
//            MemoryTraceLogger)
//   floor    the same kineto activities (kernel + launch event per kernel, same fields and
//            metadata calls) built in a plain loop: what kineto's GenericTraceActivity costs by
//            itself; interleaved with the repeats
// Memory (one untimed pass):
//   store_bytes     mallinfo2 (uordblks + hblkhd) delta of the filled RecordStore: records,
//                   ledger, vectors' spare capacity; resident until the session dies
//   table_bytes     mallinfo2 delta of LaunchTable::build and the store's release of its device
//                   records (so store + table = resident after stop()): the launches and their rows, resident
//                   until the session dies
//   stop_peak_bytes the filled store plus the peak of what stop() allocates while building the
//                   table (operator-new tracking), before it frees what the table took over: the
//                   most our records take at once
//   log_bytes       the session's copy of the op log (8 B per op; the forwarder keeps as much in
//                   its per-thread chunks for later sessions, not counted here)
//   transient_peak  peak operator-new bytes during process above what exists after it
//                   (OpTimeline, the builder's temporaries), freed on return
//   activity_bytes  bytes of the activities built (kineto's GenericTraceActivity objects with
//                   their metadata maps), for information; kineto owns them
// Each timed pass starts after malloc_trim(0) (the previous pass's activities are freed first), so
// it pays for fresh pages as a first trace does, not for consolidating the previous pass's frees.
// Check: every kernel becomes an activity and every kernel is linked, verified.
#include <malloc.h>

#include <iostream>
#include <memory>
#include <unordered_map>

#include "ActivityBuilder.h"
#include "BenchCommon.h"
#include "BenchLogger.h"
#include "LaunchTable.h"
#include "OpTimeline.h"
#include "RecordStore.h"

namespace {

using namespace torch_mspti;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr uint32_t kTid = 777;
constexpr int64_t kOpNs = 1000;

int64_t heapBytes() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

struct Synthetic {
  NameTable names;
  std::vector<WalkResult> batches;
  std::vector<std::unique_ptr<libkineto::GenericTraceActivity>> ops;
  std::unordered_map<int32_t, const libkineto::ITraceActivity*> byId;
  std::vector<ThreadOps> log;
  libkineto::TraceSpan span{0, 0, "ops"};
  Window window;
};

std::unique_ptr<Synthetic> makeSynthetic(int64_t n) {
  auto s = std::make_unique<Synthetic>();
  std::vector<const std::string*> names, types;
  for (int i = 0; i < 64; ++i) names.push_back(s->names.intern(("Kernel_" + std::to_string(i)).c_str()));
  for (const char* t : {"KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_AICPU"}) types.push_back(s->names.intern(t));
  const std::string* api = s->names.intern("LaunchKernelV2");
  const int64_t perBatch = 40'000 / 3;
  s->ops.reserve(static_cast<size_t>(n));
  s->byId.reserve(static_cast<size_t>(n));
  ThreadOps& log = s->log.emplace_back();
  log.threadId = kTid;
  log.ids.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (i % perBatch == 0) s->batches.emplace_back();
    WalkResult& b = s->batches.back();
    const uint64_t corr = static_cast<uint64_t>(i + 1);
    const int32_t opId = static_cast<int32_t>(i + 1);
    const int64_t t = kT0 + i * kOpNs;
    auto& op = *s->ops.emplace_back(
        std::make_unique<libkineto::GenericTraceActivity>(s->span, libkineto::ActivityType::CPU_OP, "aten::op"));
    op.startTime = t;
    op.endTime = t + 900;
    op.id = opId;
    op.device = 4242;
    op.resource = kTid;
    op.threadId = kTid;
    s->byId.emplace(opId, &op);
    log.ids.push_back(static_cast<uint64_t>(opId));

    b.externals.push_back({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(opId), corr});
    ApiRecord& a = b.apis.emplace_back();
    a.start = t + 100;
    a.end = t + 300;
    a.processId = 4242;
    a.threadId = kTid;
    a.correlationId = corr;
    a.kind = MSPTI_ACTIVITY_KIND_RUNTIME_API;
    a.name = api;
    DeviceRecord& k = b.devices.emplace_back();
    k.start = t + 500;
    k.end = t + 800;
    k.correlationId = corr;
    k.name = names[static_cast<size_t>(i % 64)];
    k.detail = types[static_cast<size_t>(i % 3)];
    k.streamId = static_cast<uint32_t>(1 + i % 4);
    k.kind = MSPTI_ACTIVITY_KIND_KERNEL;
    ++b.recordsByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION];
    ++b.recordsByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API];
    ++b.recordsByKind[MSPTI_ACTIVITY_KIND_KERNEL];
    b.records += 3;
  }
  s->window = {kT0 - kOpNs, kT0 + (n + 1) * kOpNs, kT0 + (n + 1) * kOpNs};
  return s;
}

std::unique_ptr<RecordStore> fill(const Synthetic& s) {
  auto store = std::make_unique<RecordStore>(0);
  for (const auto& b : s.batches) {
    WalkResult copy = b;
    store->append(copy);
  }
  return store;
}

LaunchTable prepare(RecordStore& store, const Synthetic& s, SessionCounters& counters) {
  store.seal();
  Admission admission(HostClock::realtime(), s.window, store.ledger(), counters);
  LaunchTable t = LaunchTable::build(store, admission, {}, counters);
  store.releaseConsumed();  // as the session does: the table holds the kept rows and launches from here on
  return t;
}

struct Processed {
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer = std::make_unique<libkineto::CpuTraceBuffer>();
  bench::CollectingLogger logger;
  SessionCounters counters;
};

void process(const LaunchTable& table, const Synthetic& s, const libkineto::getLinkedActivityCallback& linked,
             CorrelationIds& ids, Processed& out) {
  {  // as the session: the timeline is gone before the logger grows
    const OpTimeline ops(s.log, &linked, out.counters);
    DeviceLanes lanes;
    const BuildContext in{&table, &ops, &ids, 4242};
    buildActivities(in, *out.buffer, lanes, out.counters);
  }
  for (const auto& a : out.buffer->activities) out.logger.handleActivity(*a);
}

// The same kineto activities as buildActivities makes for these kernels, in a plain loop.
double floorSeconds(const Synthetic& s) {
  malloc_trim(0);
  auto buffer = std::make_unique<libkineto::CpuTraceBuffer>();
  bench::CollectingLogger logger;
  const std::string launch = "LaunchKernelV2", link = "verified";
  const std::string kDevice = "device", kStream = "stream", kCorrelation = "correlation", kLink = "link",
                    kType = "type";
  const int64_t t0 = bench::nowNs();
  for (const auto& b : s.batches) {
    for (const auto& k : b.devices) {
      const auto id = static_cast<int32_t>(k.correlationId);
      auto& rt = *buffer->activities.emplace_back(std::make_unique<libkineto::GenericTraceActivity>(
          buffer->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME, launch));
      rt.startTime = k.start - 400;
      rt.endTime = k.start - 200;
      rt.id = id;
      rt.addMetadata(kCorrelation, id);
      rt.addMetadataQuoted(kLink, link);
      auto& act = *buffer->activities.emplace_back(std::make_unique<libkineto::GenericTraceActivity>(
          buffer->span, libkineto::ActivityType::CONCURRENT_KERNEL, *k.name));
      act.startTime = k.start;
      act.endTime = k.end;
      act.id = id;
      act.addMetadata(kDevice, static_cast<int32_t>(k.deviceId));
      act.addMetadata(kStream, static_cast<int32_t>(k.streamId));
      act.addMetadata(kCorrelation, id);
      act.addMetadataQuoted(kLink, link);
      act.addMetadataQuoted(kType, *k.detail);
    }
  }
  for (const auto& a : buffer->activities) logger.handleActivity(*a);
  return static_cast<double>(bench::nowNs() - t0) / 1e9;
}

bool allVerified(const Processed& p, int64_t n) {
  const auto u = static_cast<uint64_t>(n);
  return p.logger.kernels == u && p.counters.kernels == u && p.counters.linkedVerified == u;
}

}  // namespace

int runProcess(const bench::Args& args) {
  const auto sizes = args.list("sizes", {100000, 1000000});
  const int64_t reps = args.i("reps", 5);
  bench::Json sizesJson;
  bool ok = true;
  CorrelationIds ids;
  for (int64_t n : sizes) {
    auto syn = makeSynthetic(n);
    const libkineto::getLinkedActivityCallback linked = [&](int32_t id) -> const libkineto::ITraceActivity* {
      auto it = syn->byId.find(id);
      return it == syn->byId.end() ? nullptr : it->second;
    };

    // Memory pass.
    malloc_trim(0);
    const int64_t h0 = heapBytes();
    auto store = fill(*syn);
    const int64_t storeBytes = heapBytes() - h0;
    SessionCounters stopCounters;
    const int64_t h1 = heapBytes();
    bench::trackAllocations(true);
    bench::resetTrackedPeak();
    const int64_t s0 = bench::trackedBytes();
    LaunchTable table = prepare(*store, *syn, stopCounters);
    const int64_t stopPeak = bench::trackedPeak() - s0;  // above the filled store, while both exist
    bench::trackAllocations(false);
    const int64_t tableBytes = heapBytes() - h1;
    int64_t logBytes = 0;
    for (const ThreadOps& t : syn->log) logBytes += static_cast<int64_t>(t.ids.capacity() * sizeof(uint64_t));
    int64_t activityBytes = 0, transientPeak = 0;
    {
      const int64_t g0 = bench::trackedBytes();
      bench::trackAllocations(true);
      bench::resetTrackedPeak();
      Processed p;
      process(table, *syn, linked, ids, p);
      const int64_t after = bench::trackedBytes();
      bench::trackAllocations(false);
      activityBytes = after - g0;
      transientPeak = bench::trackedPeak() - after;
      ok = ok && allVerified(p, n);
    }
    table = LaunchTable();
    store.reset();

    std::vector<double> prepSeconds, seconds, floor;
    uint64_t activities = 0;
    for (int64_t r = 0; r < reps; ++r) {
      if (r % 2 == 1) floor.push_back(floorSeconds(*syn));
      // The previous pass freed ~2N activities into malloc's fast bins; without a trim the first
      // large allocation of this pass would pay for consolidating them (the benchmark's own debris).
      malloc_trim(0);
      auto st = fill(*syn);
      SessionCounters c;
      const int64_t t0 = bench::nowNs();
      LaunchTable t = prepare(*st, *syn, c);
      const int64_t t1 = bench::nowNs();
      Processed p;
      const int64_t t2 = bench::nowNs();
      process(t, *syn, linked, ids, p);
      const int64_t t3 = bench::nowNs();
      prepSeconds.push_back(static_cast<double>(t1 - t0) / 1e9);
      seconds.push_back(static_cast<double>(t3 - t2) / 1e9);
      activities = p.logger.activities.size();
      ok = ok && allVerified(p, n);
      if (r % 2 == 0) floor.push_back(floorSeconds(*syn));
    }
    bench::Json j;
    j.arr("seconds", seconds)
        .arr("prepare_seconds", prepSeconds)
        .arr("floor_seconds", floor)
        .num("activities", static_cast<double>(activities))
        .num("store_bytes", static_cast<double>(storeBytes))
        .num("table_bytes", static_cast<double>(tableBytes))
        .num("stop_peak_bytes", static_cast<double>(storeBytes + stopPeak))
        .num("log_bytes", static_cast<double>(logBytes))
        .num("transient_peak_bytes", static_cast<double>(transientPeak))
        .num("activity_bytes", static_cast<double>(activityBytes))
        .num("sizeof_generic_activity", sizeof(libkineto::GenericTraceActivity));
    sizesJson.obj(std::to_string(n), j);
    std::cerr << "process n=" << n << " done\n";
  }
  bench::Json params, out;
  std::vector<double> sz(sizes.begin(), sizes.end());
  params.arr("sizes", sz).num("reps", static_cast<double>(reps)).num("distinct_names", 64);
  out.str("bench", "process").obj("params", params).obj("sizes", sizesJson).num("ok", ok);
  std::cout << out.str() << std::endl;
  return ok ? 0 : 3;
}
