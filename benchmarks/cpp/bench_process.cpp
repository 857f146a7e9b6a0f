// B3 (C++ level): processTrace's work on N kernels: kernels/s and our resident bytes per kernel.
//
// A RecordStore is filled directly with what MSPTI would have delivered for N launches of one
// kernel each, inside ops (per launch: one CUSTOM0 EXTERNAL_CORRELATION, one RUNTIME_API and one
// KERNEL record; 64 distinct kernel names, 3 types, 4 streams), in batches of 40k records as the
// completion callback appends them. Then, timed: buildActivities() (links through a fake
// getLinkedActivity callback that looks the op id up in a hash map, as kineto's does) and the
// logging of every activity into a logger that keeps pointers (kineto's MemoryTraceLogger does
// the same), i.e. the body of MsptiActivityProfilerSession::processTrace.
// Memory (one untimed pass per size):
//   store_bytes     mallinfo2 (uordblks + hblkhd) delta of the filled RecordStore: records,
//                   launch ledger, vectors' spare capacity; resident until the session dies
//   transient_peak  peak operator-new bytes during buildActivities above what exists after it
//                   (lookup maps and sort vector, freed on return)
//   activity_bytes  bytes of the activities built (kineto's GenericTraceActivity objects with
//                   their metadata maps), for information; kineto owns them
// Each timed pass starts after malloc_trim(0) (the previous pass's activities are freed first), so
// it pays for fresh pages as a first trace does, not for consolidating the previous pass's frees.
// Check: every kernel becomes an activity and every kernel links.
#include <malloc.h>

#include <iostream>
#include <memory>
#include <unordered_map>

#include "ActivityBuilder.h"
#include "BenchCommon.h"
#include "BenchLogger.h"
#include "NameTable.h"
#include "RecordStore.h"

namespace {

using namespace torch_mspti;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;
constexpr int kOps = 4096;
constexpr uint32_t kTid = 777;

int64_t heapBytes() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

struct Synthetic {
  std::vector<WalkResult> batches;
  std::vector<std::unique_ptr<libkineto::GenericTraceActivity>> ops;
  std::unordered_map<int32_t, const libkineto::ITraceActivity*> byId;
  libkineto::TraceSpan span{0, 0, "ops"};
};

std::unique_ptr<Synthetic> makeSynthetic(int64_t n) {
  auto s = std::make_unique<Synthetic>();
  const int64_t end = kT0 + n * 1000 + 1'000'000;
  for (int i = 0; i < kOps; ++i) {
    auto a = std::make_unique<libkineto::GenericTraceActivity>(s->span, libkineto::ActivityType::CPU_OP, "aten::op");
    a->startTime = kT0;
    a->endTime = end;
    a->device = 4242;
    a->resource = kTid;
    a->threadId = kTid;
    s->ops.push_back(std::move(a));
  }
  std::vector<const std::string*> names, types;
  for (int i = 0; i < 64; ++i) names.push_back(NameTable::instance().intern(("Kernel_" + std::to_string(i)).c_str()));
  for (const char* t : {"KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_AICPU"})
    types.push_back(NameTable::instance().intern(t));
  const std::string* api = NameTable::instance().intern("LaunchKernelV2");
  const int64_t perBatch = 40'000 / 3;
  s->byId.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (i % perBatch == 0) s->batches.emplace_back();
    WalkResult& b = s->batches.back();
    const uint64_t corr = static_cast<uint64_t>(i + 1);
    const int32_t opId = static_cast<int32_t>(i + 1);
    const int64_t t = kT0 + i * 1000;
    b.externals.push_back({MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, static_cast<uint64_t>(opId), corr});
    b.apis.push_back({t + 100, t + 300, 4242, kTid, corr, api});
    b.kernels.push_back({t + 500, t + 800, corr, 0, static_cast<uint32_t>(1 + i % 4), names[i % 64], types[i % 3]});
    b.records += 3;
    s->byId.emplace(opId, s->ops[static_cast<size_t>(i % kOps)].get());
  }
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

}  // namespace

int runProcess(const bench::Args& args) {
  const auto sizes = args.list("sizes", {100000, 1000000});
  const int64_t reps = args.i("reps", 5);
  bench::Json sizesJson;
  bool ok = true;
  for (int64_t n : sizes) {
    auto syn = makeSynthetic(n);
    libkineto::getLinkedActivityCallback linked = [&](int32_t id) -> const libkineto::ITraceActivity* {
      auto it = syn->byId.find(id);
      return it == syn->byId.end() ? nullptr : it->second;
    };

    // Memory pass.
    malloc_trim(0);
    const int64_t h0 = heapBytes();
    const int64_t g0 = bench::trackedBytes();
    bench::trackAllocations(true);
    auto store = fill(*syn);
    const int64_t storeBytes = heapBytes() - h0;
    const int64_t trackedStore = bench::trackedBytes() - g0;
    bench::resetTrackedPeak();
    int64_t activityBytes = 0, transientPeak = 0;
    {
      auto buffer = std::make_unique<libkineto::CpuTraceBuffer>();
      DeviceLanes lanes;
      SessionCounters counters;
      BuildInput in{store.get(), &linked, 0, 0, {}};
      buildActivities(in, *buffer, lanes, counters);
      const int64_t after = bench::trackedBytes();
      activityBytes = after - g0 - trackedStore;
      transientPeak = bench::trackedPeak() - after;
      ok = ok && counters.kernels == static_cast<uint64_t>(n) && counters.linkedKernels == static_cast<uint64_t>(n);
    }
    bench::trackAllocations(false);
    store.reset();

    // Timing passes (each on a freshly filled store), interleaved with the floor: the same
    // activities (kernel + launch per kernel, same fields and metadata calls) built in a plain
    // loop with no lookup, sort or link, i.e. what kineto's GenericTraceActivity costs by itself.
    std::vector<double> seconds, floorSeconds;
    uint64_t activities = 0;
    auto runFloor = [&] {
      malloc_trim(0);
      auto buffer = std::make_unique<libkineto::CpuTraceBuffer>();
      bench::CollectingLogger logger;
      const std::string* launch = NameTable::instance().intern("LaunchKernelV2");
      const std::string kDevice = "device", kStream = "stream", kCorrelation = "correlation", kType = "type";
      const int64_t t0 = bench::nowNs();
      for (const auto& b : syn->batches) {
        for (const auto& k : b.kernels) {
          auto& rt = *buffer->activities.emplace_back(std::make_unique<libkineto::GenericTraceActivity>(
              buffer->span, libkineto::ActivityType::PRIVATEUSE1_RUNTIME, *launch));
          rt.startTime = k.start - 400;
          rt.endTime = k.start - 200;
          rt.addMetadata(kCorrelation, static_cast<int32_t>(k.correlationId));
          auto& act = *buffer->activities.emplace_back(std::make_unique<libkineto::GenericTraceActivity>(
              buffer->span, libkineto::ActivityType::CONCURRENT_KERNEL, *k.name));
          act.startTime = k.start;
          act.endTime = k.end;
          act.addMetadata(kDevice, static_cast<int32_t>(k.deviceId));
          act.addMetadata(kStream, static_cast<int32_t>(k.streamId));
          act.addMetadata(kCorrelation, static_cast<int32_t>(k.correlationId));
          act.addMetadataQuoted(kType, *k.type);
        }
      }
      for (const auto& a : buffer->activities) logger.handleActivity(*a);
      const int64_t t1 = bench::nowNs();
      floorSeconds.push_back(static_cast<double>(t1 - t0) / 1e9);
    };
    for (int64_t r = 0; r < reps; ++r) {
      if (r % 2 == 1) runFloor();
      // The previous pass freed ~2N activities into malloc's fast bins; without a trim the first
      // large allocation of this pass would pay for consolidating them (the benchmark's own debris).
      malloc_trim(0);
      auto st = fill(*syn);
      auto buffer = std::make_unique<libkineto::CpuTraceBuffer>();
      DeviceLanes lanes;
      SessionCounters counters;
      bench::CollectingLogger logger;
      const int64_t t0 = bench::nowNs();
      BuildInput in{st.get(), &linked, 0, 0, {}};
      buildActivities(in, *buffer, lanes, counters);
      for (const auto& a : buffer->activities) logger.handleActivity(*a);
      const int64_t t1 = bench::nowNs();
      seconds.push_back(static_cast<double>(t1 - t0) / 1e9);
      activities = logger.activities.size();
      ok = ok && logger.kernels == static_cast<uint64_t>(n) && counters.linkedKernels == static_cast<uint64_t>(n);
      if (r % 2 == 0) runFloor();
    }
    bench::Json j;
    j.arr("seconds", seconds)
        .arr("floor_seconds", floorSeconds)
        .num("activities", static_cast<double>(activities))
        .num("store_bytes", static_cast<double>(storeBytes))
        .num("store_bytes_tracked", static_cast<double>(trackedStore))
        .num("transient_peak_bytes", static_cast<double>(transientPeak))
        .num("activity_bytes", static_cast<double>(activityBytes))
        .num("sizeof_generic_activity", sizeof(libkineto::GenericTraceActivity));
    sizesJson.obj(std::to_string(n), j);
    std::cerr << "process n=" << n << " done\n";
  }
  bench::Json params, out;
  std::vector<double> sz(sizes.begin(), sizes.end());
  params.arr("sizes", sz).num("reps", static_cast<double>(reps)).num("distinct_names", 64).num("ops", kOps);
  out.str("bench", "process").obj("params", params).obj("sizes", sizesJson).num("ok", ok);
  std::cout << out.str() << std::endl;
  return ok ? 0 : 3;
}
