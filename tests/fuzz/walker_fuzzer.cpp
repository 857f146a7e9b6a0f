// libFuzzer target: MsptiRecordWalker::walk over arbitrary bytes (built with ASan + UBSan by
// ci/fuzz.sh; compiles only the walker, the name table and the UTF-8 checks, which need no
// torch).
//
// The fuzzed input is one completed activity buffer: `walk(buffer, validSize)` gets a heap copy
// of exactly validSize bytes, so any read at or past validSize is a heap-buffer-overflow.
// Record contents are the fuzzer's, with one exception: the `const char*` fields (names, types,
// domains) are pointers into MSPTI's own memory in real buffers, and the walker must follow them
// to copy the strings. The harness therefore walks the buffer itself and points every such
// field at one of its strings (or NULL), chosen by the fuzzed pointer value; the strings include
// quotes, control bytes, invalid UTF-8, a 5000-byte name and the input's last bytes.
//
// The oracle is independent of the product: record sizes and field offsets are the literal
// numbers of mspti.md 3.4 (tests/cpp/core/DocumentedLayout.h), never the plugin's declarations,
// sizeof()s or kind table. Checked (any violation traps, which libFuzzer reports as a crash):
//  * at start-up: the kind table's stride of every kind value 0..4095 (and 0xFFFFFFFF) equals the
//    documented size (0 for values MSPTI does not define);
//  * every byte is accounted for: documented sizes of the walked records + abandoned bytes ==
//    validSize, and the walk ends where the documented layout says it must;
//  * the kept records equal, field by field and in order, what the harness read at the
//    documented offsets: device rows (KERNEL, COMMUNICATION, MEMCPY, MEMSET), API records of the
//    four API kinds, EXTERNAL_CORRELATION records;
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

#include "ActivityKinds.h"
#include "DocumentedLayout.h"
#include "MsptiRecordWalker.h"

namespace {

using namespace torch_mspti;
namespace L = torch_mspti::test::layout;

[[noreturn]] void fail(const char* what, unsigned long long a = 0, unsigned long long b = 0) {
  std::fprintf(stderr, "walker_fuzzer: %s (%llu, %llu)\n", what, a, b);
  __builtin_trap();
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Offsets of the string pointers of each kind (mspti.md 3.4).
std::vector<size_t> pointerOffsets(uint32_t kind) {
  switch (kind) {
    case L::kMarker: return {L::marker::kName, L::marker::kDomain};
    case L::kKernel: return {L::kernel::kType, L::kernel::kName};
    case L::kApi:
    case L::kAclApi:
    case L::kNodeApi:
    case L::kRuntimeApi: return {L::api::kName};
    case L::kHccl: return {L::hccl::kName, L::hccl::kCommName};
    case L::kCommunication: return {L::communication::kAlgType, L::communication::kName, L::communication::kCommName};
    default: return {};
  }
}

bool isApiKind(uint32_t k) { return k == L::kApi || k == L::kAclApi || k == L::kNodeApi || k == L::kRuntimeApi; }

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

// Written here rather than with the product's Utf8.h, so that a bug there cannot hide itself.
bool isCleanName(const std::string* p) {
  if (!p) return false;
  const std::string& s = *p;
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

// What the walker must keep of one device record, read at the documented offsets.
struct WantDevice {
  uint32_t kind;
  int64_t start, end;
  uint32_t deviceId, streamId;
  uint64_t correlationId;
  uint32_t subkind = 0;
  uint64_t count = 0;
  bool isAsync = false;
  bool named = false;  // name (and detail) must be set
};

WantDevice readDevice(uint32_t kind, const uint8_t* r) {
  WantDevice w{};
  w.kind = kind;
  switch (kind) {
    case L::kKernel:
      w.start = load<int64_t>(r + L::kernel::kStart);
      w.end = load<int64_t>(r + L::kernel::kEnd);
      w.deviceId = load<uint32_t>(r + L::kernel::kDeviceId);
      w.streamId = load<uint32_t>(r + L::kernel::kStreamId);
      w.correlationId = load<uint64_t>(r + L::kernel::kCorrelationId);
      w.named = true;
      break;
    case L::kCommunication:
      w.start = load<int64_t>(r + L::communication::kStart);
      w.end = load<int64_t>(r + L::communication::kEnd);
      w.deviceId = load<uint32_t>(r + L::communication::kDeviceId);
      w.streamId = load<uint32_t>(r + L::communication::kStreamId);
      w.correlationId = load<uint64_t>(r + L::communication::kCorrelationId);
      w.subkind = load<uint32_t>(r + L::communication::kDataType);
      w.count = load<uint64_t>(r + L::communication::kCount);
      w.named = true;
      break;
    default:  // MEMCPY, MEMSET
      w.start = load<int64_t>(r + L::copy::kStart);
      w.end = load<int64_t>(r + L::copy::kEnd);
      w.deviceId = load<uint32_t>(r + L::copy::kDeviceId);
      w.streamId = load<uint32_t>(r + L::copy::kStreamId);
      w.correlationId = load<uint64_t>(r + L::copy::kCorrelationId);
      w.subkind = load<uint32_t>(r + L::copy::kSubkind);
      w.count = load<uint64_t>(r + L::copy::kBytes);
      w.isAsync = r[L::copy::kIsAsync] != 0;
      break;
  }
  return w;
}

void checkDevice(size_t i, const DeviceRecord& g, const WantDevice& w) {
  if (g.kind != w.kind) fail("device record kind differs", i, g.kind);
  if (g.start != w.start || g.end != w.end) fail("device record times differ", i, w.kind);
  if (g.deviceId != w.deviceId || g.streamId != w.streamId) fail("device record placement differs", i, w.kind);
  if (g.correlationId != w.correlationId) fail("device record correlation id differs", i, w.kind);
  if (g.subkind != w.subkind || g.count != w.count) fail("device record subkind/count differ", i, w.kind);
  if (g.isAsync != w.isAsync) fail("device record isAsync differs", i, w.kind);
  if (w.named && (!isCleanName(g.name) || !isCleanName(g.detail))) fail("device record name not clean", i, w.kind);
  if (w.kind == L::kCommunication && !isCleanName(g.group)) fail("communicator name not clean", i);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (uint32_t kind = 0; kind < 4096; ++kind)
    if (recordSize(kind) != L::recordSize(kind)) fail("kind table differs from mspti.md 3.4", kind, recordSize(kind));
  if (recordSize(0xFFFFFFFFu) != 0) fail("kind 0xFFFFFFFF has a size");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool expectValid = [] {
    const char* v = std::getenv("TORCH_MSPTI_FUZZ_EXPECT_VALID");
    return v && std::strcmp(v, "1") == 0;
  }();
  static MsptiRecordWalker walker;  // reused across buffers, like the completion threads' walkers
  static NameTable names;           // one per session in the plugin; here one for the run

  // The strings this input's pointers may name: fixed ones plus the input's last 3 bytes (any
  // byte values; only 3 because the table keeps every distinct name, so longer fuzzed names
  // would grow the fuzzer's memory without bound over a long run).
  std::vector<std::string> strings = fixedStrings();
  const size_t tail = size < 3 ? size : 3;
  strings.emplace_back(size ? std::string(reinterpret_cast<const char*>(data) + size - tail, tail) : std::string());

  std::unique_ptr<uint8_t[]> buffer(new uint8_t[size ? size : 1]);
  if (size) std::memcpy(buffer.get(), data, size);

  // The harness's own walk by the documented layout: patch pointers, remember what to keep.
  std::vector<WantDevice> wantDevices;
  std::vector<ApiRecord> wantApis;
  std::vector<ExternalCorrelationRecord> wantExternals;
  std::vector<MemoryRecord> wantMemory;
  uint64_t wantByKind[L::kKindCount] = {};
  size_t pos = 0;
  while (size - pos >= 4) {
    const uint32_t kind = load<uint32_t>(buffer.get() + pos);
    const size_t rs = L::recordSize(kind);
    if (rs == 0 || rs > size - pos) break;
    uint8_t* rec = buffer.get() + pos;
    for (size_t off : pointerOffsets(kind)) {
      const uint64_t v = load<uint64_t>(rec + off);
      const char* p = v == 0 ? nullptr : strings[v % strings.size()].c_str();
      std::memcpy(rec + off, &p, sizeof(p));
    }
    if (kind == L::kKernel || kind == L::kCommunication || kind == L::kMemcpy || kind == L::kMemset) {
      wantDevices.push_back(readDevice(kind, rec));
    } else if (isApiKind(kind)) {
      ApiRecord a;
      a.start = load<int64_t>(rec + L::api::kStart);
      a.end = load<int64_t>(rec + L::api::kEnd);
      a.processId = load<uint32_t>(rec + L::api::kProcessId);
      a.threadId = load<uint32_t>(rec + L::api::kThreadId);
      a.correlationId = load<uint64_t>(rec + L::api::kCorrelationId);
      a.kind = kind;
      wantApis.push_back(a);
    } else if (kind == L::kExternalCorrelation) {
      wantExternals.push_back({load<uint32_t>(rec + L::external::kExternalKind),
                               load<uint64_t>(rec + L::external::kExternalId),
                               load<uint64_t>(rec + L::external::kCorrelationId)});
    } else if (kind == L::kMemory) {
      namespace m = L::memory;
      MemoryRecord r;
      r.start = load<int64_t>(rec + m::kStart);
      r.end = load<int64_t>(rec + m::kEnd);
      r.correlationId = load<uint64_t>(rec + m::kCorrelationId);
      r.address = load<uint64_t>(rec + m::kAddress);
      r.bytes = load<uint64_t>(rec + m::kBytes);
      r.deviceId = load<uint32_t>(rec + m::kDeviceId);
      r.streamId = load<uint32_t>(rec + m::kStreamId);
      r.processId = load<uint32_t>(rec + m::kProcessId);
      r.operation = load<uint32_t>(rec + m::kOperationType);
      r.memoryKind = load<uint32_t>(rec + m::kMemoryKind);
      wantMemory.push_back(r);
    }
    ++wantByKind[kind];
    pos += rs;
  }

  WalkResult out;
  walker.walk(buffer.get(), size, &names, out);

  // Every byte accounted for, and the walk stopped where the layout says.
  uint64_t walked = 0, counted = 0;
  for (uint32_t k = 0; k < L::kKindCount; ++k) {
    if (out.recordsByKind[k] != wantByKind[k]) fail("records of a kind differ", k, out.recordsByKind[k]);
    walked += out.recordsByKind[k] * L::recordSize(k);
    counted += out.recordsByKind[k];
  }
  if (counted != out.records) fail("records != sum of recordsByKind", counted, out.records);
  if (walked != pos) fail("walker and layout disagree on the records' extent", walked, pos);
  if (walked + out.abandonedBytes != size) fail("walked + abandoned != validSize", walked + out.abandonedBytes, size);
  if (out.abandoned != (pos != size)) fail("abandoned flag wrong", out.abandoned, size - pos);
  if (out.abandoned && size - pos >= 4 && out.abandonedKind != load<uint32_t>(buffer.get() + pos))
    fail("abandoned kind is not the kind that stopped the walk", out.abandonedKind);
  if (expectValid && out.abandoned) fail("a valid_* seed was abandoned", out.abandonedKind, out.abandonedBytes);

  // The kept records, in order and field by field.
  if (out.devices.size() != wantDevices.size()) fail("device record count", out.devices.size(), wantDevices.size());
  for (size_t i = 0; i < wantDevices.size(); ++i) checkDevice(i, out.devices[i], wantDevices[i]);
  if (out.apis.size() != wantApis.size()) fail("api count", out.apis.size(), wantApis.size());
  for (size_t i = 0; i < wantApis.size(); ++i) {
    const ApiRecord &g = out.apis[i], &w = wantApis[i];
    if (g.start != w.start || g.end != w.end || g.processId != w.processId || g.threadId != w.threadId ||
        g.correlationId != w.correlationId || g.kind != w.kind)
      fail("api fields differ", i, g.correlationId);
    if (!isCleanName(g.name)) fail("api name not clean", i);
  }
  if (out.externals.size() != wantExternals.size()) fail("external count", out.externals.size(), wantExternals.size());
  for (size_t i = 0; i < wantExternals.size(); ++i) {
    const auto &g = out.externals[i], &w = wantExternals[i];
    if (g.externalKind != w.externalKind || g.externalId != w.externalId || g.correlationId != w.correlationId)
      fail("external fields differ", i, g.correlationId);
  }
  if (out.memory.size() != wantMemory.size()) fail("memory record count", out.memory.size(), wantMemory.size());
  for (size_t i = 0; i < wantMemory.size(); ++i) {
    const MemoryRecord &g = out.memory[i], &w = wantMemory[i];
    if (g.start != w.start || g.end != w.end || g.correlationId != w.correlationId || g.address != w.address ||
        g.bytes != w.bytes || g.deviceId != w.deviceId || g.streamId != w.streamId || g.processId != w.processId ||
        g.operation != w.operation || g.memoryKind != w.memoryKind)
      fail("memory fields differ", i, g.correlationId);
  }

  // A NULL buffer is a no-op; a walk without a name table only counts.
  WalkResult none;
  walker.walk(nullptr, size, &names, none);
  if (none.records != 0 || none.abandoned) fail("NULL buffer produced records");
  WalkResult countOnly;
  walker.walk(buffer.get(), size, nullptr, countOnly);
  if (countOnly.records != out.records || !countOnly.devices.empty() || !countOnly.apis.empty() ||
      !countOnly.memory.empty())
    fail("a walk without a name table kept records", countOnly.records, out.records);
  return 0;
}
