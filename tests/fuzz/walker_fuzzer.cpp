// libFuzzer target: MsptiRecordWalker::walk over arbitrary bytes (built with ASan + UBSan by
// ci/fuzz.sh; compiles only the walker and the name table, which need no torch).
//
// The fuzzed input is one completed activity buffer: `walk(buffer, validSize)` gets a heap copy
// of exactly validSize bytes, so any read at or past validSize is a heap-buffer-overflow.
// Record contents are the fuzzer's, with one exception: the `const char*` fields (names, types,
// domains) are pointers into MSPTI's own memory in real buffers, and the walker must follow them
// to copy the strings. The harness therefore walks the buffer by the documented layout itself and
// points every such field at one of its strings (or NULL), chosen by the fuzzed pointer value;
// the strings include quotes, control bytes, invalid UTF-8, a 5000-byte name and the input's
// last bytes.
// Checked after every walk (any violation traps, which libFuzzer reports as a crash):
//  * the walker's size table equals sizeof() of each kind's struct (once, at start-up);
//  * every byte is accounted for: walked records' sizes + abandoned bytes == validSize;
//  * the kept records equal, field by field and in order, what the harness read itself;
//  * every copied name is non-empty, at most 4096 bytes, valid UTF-8 and free of '"', '\' and
//    control bytes (NameTable's contract for kineto's unescaped JSON writer).
// TORCH_MSPTI_FUZZ_EXPECT_VALID=1 additionally traps when a walk abandons bytes (ci/fuzz.sh runs
// the seeds named valid_* that way, so a corpus out of step with the layout is noticed).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <mspti/mspti_activity.h>

#include "MsptiRecordWalker.h"

namespace {

using namespace torch_mspti;

[[noreturn]] void fail(const char* what, unsigned long long a = 0, unsigned long long b = 0) {
  std::fprintf(stderr, "walker_fuzzer: %s (%llu, %llu)\n", what, a, b);
  __builtin_trap();
}

// The documented layout (mspti_activity.h), independent of the walker's own table.
size_t layoutSize(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_MARKER: return sizeof(msptiActivityMarker);
    case MSPTI_ACTIVITY_KIND_KERNEL: return sizeof(msptiActivityKernel);
    case MSPTI_ACTIVITY_KIND_API:
    case MSPTI_ACTIVITY_KIND_ACL_API:
    case MSPTI_ACTIVITY_KIND_NODE_API:
    case MSPTI_ACTIVITY_KIND_RUNTIME_API: return sizeof(msptiActivityApi);
    case MSPTI_ACTIVITY_KIND_HCCL: return sizeof(msptiActivityHccl);
    case MSPTI_ACTIVITY_KIND_MEMORY: return sizeof(msptiActivityMemory);
    case MSPTI_ACTIVITY_KIND_MEMSET: return sizeof(msptiActivityMemset);
    case MSPTI_ACTIVITY_KIND_MEMCPY: return sizeof(msptiActivityMemcpy);
    case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(msptiActivityExternalCorrelation);
    case MSPTI_ACTIVITY_KIND_COMMUNICATION: return sizeof(msptiActivityCommunication);
    default: return 0;
  }
}

// Offsets of the string pointers of each kind.
std::vector<size_t> pointerOffsets(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_MARKER:
      return {offsetof(msptiActivityMarker, name), offsetof(msptiActivityMarker, domain)};
    case MSPTI_ACTIVITY_KIND_KERNEL: return {offsetof(msptiActivityKernel, type), offsetof(msptiActivityKernel, name)};
    case MSPTI_ACTIVITY_KIND_API:
    case MSPTI_ACTIVITY_KIND_ACL_API:
    case MSPTI_ACTIVITY_KIND_NODE_API:
    case MSPTI_ACTIVITY_KIND_RUNTIME_API: return {offsetof(msptiActivityApi, name)};
    case MSPTI_ACTIVITY_KIND_HCCL: return {offsetof(msptiActivityHccl, name), offsetof(msptiActivityHccl, commName)};
    case MSPTI_ACTIVITY_KIND_COMMUNICATION:
      return {offsetof(msptiActivityCommunication, algType), offsetof(msptiActivityCommunication, name),
              offsetof(msptiActivityCommunication, commName)};
    default: return {};
  }
}

const std::vector<std::string>& fixedStrings() {
  static const std::vector<std::string> s = {
      "",
      "MatMul_aicore",
      "KERNEL_AICORE",
      "quote\"and\\backslash",
      std::string("ctl\x01\x09\x0a\x1f\x7f", 8),
      "bad utf8 \xc3\x28 \xff \xe2\x82",
      "ok utf8 \xe2\x82\xac \xf0\x9f\x98\x80",
      std::string(5000, 'n'),  // longer than the 4096 bytes NameTable reads
  };
  return s;
}

bool isCleanName(const std::string& s) {
  if (s.empty() || s.size() > 4096) return false;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\' || c < 0x20 || c == 0x7f) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    const size_t len = c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t j = 1; j < len; ++j)
      if ((static_cast<unsigned char>(s[i + j]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (uint32_t kind = 0; kind < 4096; ++kind)
    if (recordSize(kind) != layoutSize(kind)) fail("walker size table differs from the layout", kind, recordSize(kind));
  if (recordSize(0xFFFFFFFFu) != 0) fail("kind 0xFFFFFFFF has a size");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool expectValid = [] {
    const char* v = std::getenv("TORCH_MSPTI_FUZZ_EXPECT_VALID");
    return v && std::strcmp(v, "1") == 0;
  }();
  static MsptiRecordWalker walker;  // reused across buffers, like the completion threads' walkers

  // The strings this input's pointers may name: fixed ones plus the input's last 3 bytes (any
  // byte values; only 3 because NameTable keeps every distinct name for the life of the process,
  // so longer fuzzed names would grow the fuzzer's memory without bound over a long run).
  std::vector<std::string> strings = fixedStrings();
  const size_t tail = size < 3 ? size : 3;
  strings.emplace_back(size ? std::string(reinterpret_cast<const char*>(data) + size - tail, tail) : std::string());

  std::unique_ptr<uint8_t[]> buffer(new uint8_t[size ? size : 1]);
  if (size) std::memcpy(buffer.get(), data, size);

  // The harness's own walk: patch pointers and remember what the walker must keep.
  std::vector<KernelRecord> wantKernels;
  std::vector<ApiRecord> wantApis;
  std::vector<ExternalCorrelationRecord> wantExternals;
  size_t pos = 0;
  while (size - pos >= sizeof(uint32_t)) {
    const uint32_t kind = load<uint32_t>(buffer.get() + pos);
    const size_t rs = layoutSize(kind);
    if (rs == 0 || rs > size - pos) break;
    uint8_t* rec = buffer.get() + pos;
    for (size_t off : pointerOffsets(kind)) {
      const uint64_t v = load<uint64_t>(rec + off);
      const char* p = v == 0 ? nullptr : strings[v % strings.size()].c_str();
      std::memcpy(rec + off, &p, sizeof(p));
    }
    if (kind == MSPTI_ACTIVITY_KIND_KERNEL) {
      const auto k = load<msptiActivityKernel>(rec);
      KernelRecord r;
      r.start = static_cast<int64_t>(k.start);
      r.end = static_cast<int64_t>(k.end);
      r.correlationId = k.correlationId;
      r.deviceId = k.ds.deviceId;
      r.streamId = k.ds.streamId;
      wantKernels.push_back(r);
    } else if (kind == MSPTI_ACTIVITY_KIND_API || kind == MSPTI_ACTIVITY_KIND_ACL_API ||
               kind == MSPTI_ACTIVITY_KIND_NODE_API || kind == MSPTI_ACTIVITY_KIND_RUNTIME_API) {
      const auto a = load<msptiActivityApi>(rec);
      wantApis.push_back({static_cast<int64_t>(a.start), static_cast<int64_t>(a.end), a.pt.processId, a.pt.threadId,
                          a.correlationId, nullptr});
    } else if (kind == MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      // Fields read as integers: loading an enum member holding an arbitrary value is UB.
      wantExternals.push_back({load<uint32_t>(rec + offsetof(msptiActivityExternalCorrelation, externalKind)),
                               load<uint64_t>(rec + offsetof(msptiActivityExternalCorrelation, externalId)),
                               load<uint64_t>(rec + offsetof(msptiActivityExternalCorrelation, correlationId))});
    }
    pos += rs;
  }

  WalkResult out;
  walker.walk(buffer.get(), size, out);

  // Every byte accounted for.
  uint64_t walked = 0, counted = 0;
  for (uint32_t k = 0; k < MSPTI_ACTIVITY_KIND_COUNT; ++k) {
    walked += out.recordsByKind[k] * recordSize(k);
    counted += out.recordsByKind[k];
  }
  if (counted != out.records) fail("records != sum of recordsByKind", counted, out.records);
  if (walked + out.abandonedBytes != size) fail("walked + abandoned != validSize", walked + out.abandonedBytes, size);
  if (walked != pos) fail("walker and layout disagree on the records' extent", walked, pos);
  if (out.abandoned != (out.abandonedBytes > 0))
    fail("abandoned flag and bytes disagree", out.abandoned, out.abandonedBytes);
  if (expectValid && out.abandoned) fail("a valid_* seed was abandoned", out.abandonedKind, out.abandonedBytes);

  // The kept records, in order and field by field.
  if (out.kernels.size() != wantKernels.size()) fail("kernel count", out.kernels.size(), wantKernels.size());
  for (size_t i = 0; i < wantKernels.size(); ++i) {
    const KernelRecord &g = out.kernels[i], &w = wantKernels[i];
    if (g.start != w.start || g.end != w.end || g.correlationId != w.correlationId || g.deviceId != w.deviceId ||
        g.streamId != w.streamId)
      fail("kernel fields differ", i, g.correlationId);
    if (!g.name || !g.type || !isCleanName(*g.name) || !isCleanName(*g.type)) fail("kernel name/type not clean", i);
  }
  if (out.apis.size() != wantApis.size()) fail("api count", out.apis.size(), wantApis.size());
  for (size_t i = 0; i < wantApis.size(); ++i) {
    const ApiRecord &g = out.apis[i], &w = wantApis[i];
    if (g.start != w.start || g.end != w.end || g.processId != w.processId || g.threadId != w.threadId ||
        g.correlationId != w.correlationId)
      fail("api fields differ", i, g.correlationId);
    if (!g.name || !isCleanName(*g.name)) fail("api name not clean", i);
  }
  if (out.externals.size() != wantExternals.size()) fail("external count", out.externals.size(), wantExternals.size());
  for (size_t i = 0; i < wantExternals.size(); ++i) {
    const auto &g = out.externals[i], &w = wantExternals[i];
    if (g.externalKind != w.externalKind || g.externalId != w.externalId || g.correlationId != w.correlationId)
      fail("external fields differ", i, g.correlationId);
  }

  // A NULL buffer is a no-op.
  WalkResult none;
  walker.walk(nullptr, size, none);
  if (none.records != 0 || none.abandoned) fail("NULL buffer produced records");
  return 0;
}
