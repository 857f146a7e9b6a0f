#include "ForeignBuffer.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "SimClock.h"

namespace torch_mspti::sim {

namespace {

// Unused space after the records, as in a partly filled buffer. Small, so that a one-record buffer
// stays in glibc's tcache range, where a double free is always detected.
constexpr size_t kSlackBytes = 256;
constexpr size_t kCanaryBytes = 64;
constexpr uint8_t kCanary = 0xC5;

}  // namespace

int completeForeignBuffer(ActivityBuffers& buffers, CorrelationIds& ids, NameTable& names,
                          const Environment& environment, SimCounters& counters, uint32_t kernels, bool onNewThread,
                          uint64_t fixedId) {
  std::vector<uint8_t> records;
  auto append = [&records](const auto& record) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&record);
    records.insert(records.end(), bytes, bytes + sizeof(record));
  };
  const uint64_t now = realtimeNs();
  for (uint32_t i = 0; i < kernels; ++i) {
    msptiActivityKernel record{};
    record.kind = MSPTI_ACTIVITY_KIND_KERNEL;
    record.start = now - (static_cast<uint64_t>(kernels - i) * 2000);
    record.end = record.start + 1000;
    record.ds.deviceId = environment.physicalDevice(0);
    record.ds.streamId = 1;
    record.correlationId = fixedId != 0 ? fixedId : ids.mint();
    record.type = names.intern("KERNEL_AICORE");
    record.name = names.intern("ForeignKernel");
    if (fixedId != 0) {
      // The launch as the other tool's (or a misread) buffer has it: external record, launch call.
      msptiActivityExternalCorrelation external{};
      external.kind = MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
      external.externalKind = MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
      external.externalId = 1;
      external.correlationId = fixedId;
      append(external);
      msptiActivityApi api{};
      api.kind = MSPTI_ACTIVITY_KIND_RUNTIME_API;
      api.start = record.start - 500;
      api.end = record.start - 100;
      api.pt.processId = static_cast<uint32_t>(getpid());
      api.pt.threadId = 1;
      api.correlationId = fixedId;
      api.name = names.intern("LaunchKernelV2");
      append(api);
    }
    append(record);
  }
  const size_t validSize = records.size();
  const size_t size = validSize + kSlackBytes;
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(8, size + kCanaryBytes));
  if (data == nullptr) {
    return -1;
  }
  if (validSize > 0) std::memcpy(data, records.data(), validSize);
  std::memset(data + validSize, kCanary, size + kCanaryBytes - validSize);
  if (!buffers.completeForeign(ActivityBuffer{data, size, validSize}, onNewThread)) {
    std::free(data);
    return -1;
  }
  SimCounters::add(counters.foreignBuffers);
  // Reading the canary after a callback that freed the buffer is a use-after-free ASan reports.
  for (size_t i = validSize; i < size + kCanaryBytes; ++i) {
    if (data[i] != kCanary) {
      std::fprintf(stderr,
                   "libmspti_sim: the complete callback wrote into a foreign buffer it does not own (byte %zu of %zu, "
                   "past the %zu valid bytes)\n",
                   i, size, validSize);
      std::fflush(stderr);
      std::abort();
    }
  }
  std::free(data);  // a callback that freed it makes this a double free
  return 0;
}

}  // namespace torch_mspti::sim
