// The completion callback's parse of one full 8 MiB MSPTI buffer, in records/s (B4).
//
// The buffer holds what a launch produces, back to back as MSPTI packs it: one CUSTOM0
// EXTERNAL_CORRELATION record (24 B) then one KERNEL record (56 B), repeated until 8 MiB are
// full (209,714 records). Kernel names cycle over `names` distinct strings (each a distinct
// pointer, as MSPTI's name cache hands out), types over 3.
// Arms (interleaved per repeat), each for every names setting:
//   fresh   a new MsptiRecordWalker and WalkResult per buffer: what a completion thread does,
//           since MSPTI starts a new thread per full buffer (mspti.md 5.2); names interned
//           once per distinct pointer per buffer into a table that already holds them (the
//           session's NameTable after its first buffer)
//   reused  the same walker and WalkResult for every buffer (capacity kept)
//   append  fresh walk into a fresh RecordStore's names + RecordStore::append (ledger updates):
//           the whole complete() body for a session's first buffer
// Check: every record is walked and every kernel and external record is kept.
#include <cstring>
#include <iostream>
#include <memory>

#include <mspti/mspti_activity.h>

#include "BenchCommon.h"
#include "MsptiRecordWalker.h"
#include "RecordStore.h"

namespace {

using namespace torch_mspti;

struct Buffer {
  std::vector<uint64_t> words;
  size_t size = 0;
  uint64_t kernels = 0, externals = 0;
  std::vector<std::string> names;
};

std::unique_ptr<Buffer> makeBuffer(size_t bytes, int distinctNames) {
  auto b = std::make_unique<Buffer>();
  b->words.assign(bytes / 8, 0);
  for (int i = 0; i < distinctNames; ++i) b->names.push_back("aclnnKernel_" + std::to_string(i) + "_AiCore");
  static const char* kTypes[] = {"KERNEL_AICORE", "KERNEL_AIVEC", "KERNEL_AICPU"};
  auto* p = reinterpret_cast<uint8_t*>(b->words.data());
  const size_t pair = sizeof(msptiActivityExternalCorrelation) + sizeof(msptiActivityKernel);
  uint64_t corr = 1;
  size_t pos = 0;
  while (pos + pair <= bytes) {
    msptiActivityExternalCorrelation e{};
    e.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e.externalId = corr + 1000;
    e.correlationId = corr;
    std::memcpy(p + pos, &e, sizeof(e));
    pos += sizeof(e);
    msptiActivityKernel k{};
    k.kind = MSPTI_ACTIVITY_KIND_KERNEL;
    k.start = 1'700'000'000'000'000'000ull + corr * 1000;
    k.end = k.start + 500;
    k.ds.deviceId = 0;
    k.ds.streamId = static_cast<uint32_t>(1 + corr % 4);
    k.correlationId = corr;
    k.type = kTypes[corr % 3];
    k.name = b->names[corr % static_cast<uint64_t>(distinctNames)].c_str();
    std::memcpy(p + pos, &k, sizeof(k));
    pos += sizeof(k);
    ++b->kernels;
    ++b->externals;
    ++corr;
  }
  b->size = pos;
  return b;
}

}  // namespace

int runWalk(const bench::Args& args) {
  const int64_t reps = args.i("reps", 21);
  const auto nameCounts = args.list("names", {16, 256});
  const size_t bytes = static_cast<size_t>(args.i("bytes", 8 << 20));
  bench::Json byNames;
  bool ok = true;
  for (int64_t names : nameCounts) {
    auto buf = makeBuffer(bytes, static_cast<int>(names));
    const auto* data = reinterpret_cast<const uint8_t*>(buf->words.data());
    const uint64_t records = buf->kernels + buf->externals;
    std::vector<double> fresh, reused, append;
    MsptiRecordWalker reusedWalker;
    WalkResult reusedBatch;
    NameTable sessionNames;
    auto check = [&](const WalkResult& w) {
      ok = ok && w.records == records && w.devices.size() == buf->kernels && w.externals.size() == buf->externals &&
           !w.abandoned;
    };
    for (int64_t r = -1; r < reps; ++r) {  // r = -1: warm-up
      for (int k = 0; k < 3; ++k) {
        const int arm = static_cast<int>((k + (r < 0 ? 0 : r)) % 3);
        if (arm == 0) {
          const int64_t t0 = bench::nowNs();
          {
            MsptiRecordWalker walker;
            WalkResult batch;
            walker.walk(data, buf->size, &sessionNames, batch);
            check(batch);
          }
          const int64_t t1 = bench::nowNs();
          if (r >= 0) fresh.push_back(static_cast<double>(records) / (static_cast<double>(t1 - t0) / 1e9));
        } else if (arm == 1) {
          reusedBatch.clear();
          const int64_t t0 = bench::nowNs();
          reusedWalker.walk(data, buf->size, &sessionNames, reusedBatch);
          const int64_t t1 = bench::nowNs();
          check(reusedBatch);
          if (r >= 0) reused.push_back(static_cast<double>(records) / (static_cast<double>(t1 - t0) / 1e9));
        } else {
          RecordStore store(0);
          const int64_t t0 = bench::nowNs();
          {
            MsptiRecordWalker walker;
            WalkResult batch;
            walker.walk(data, buf->size, &store.names(), batch);
            check(batch);
            store.append(batch);
          }
          const int64_t t1 = bench::nowNs();
          ok = ok && store.records() == records && store.pendingLaunches(~0u) == 0;
          if (r >= 0) append.push_back(static_cast<double>(records) / (static_cast<double>(t1 - t0) / 1e9));
        }
      }
    }
    bench::Json j;
    j.arr("fresh", fresh).arr("reused", reused).arr("append", append).num("records", static_cast<double>(records));
    byNames.obj(std::to_string(names), j);
  }
  bench::Json params, out;
  std::vector<double> nc(nameCounts.begin(), nameCounts.end());
  params.num("bytes", static_cast<double>(bytes)).num("reps", static_cast<double>(reps)).arr("names", nc);
  out.str("bench", "walk").str("unit", "records/s").obj("params", params).obj("names", byNames).num("ok", ok);
  std::cout << out.str() << std::endl;
  return ok ? 0 : 3;
}
