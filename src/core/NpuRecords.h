// Owned, plain copies of the MSPTI records the plugin keeps after a buffer is recycled.
// Times are ns since the Unix epoch (CLOCK_REALTIME), as MSPTI reports them (mspti.md 4).
#pragma once

#include <cstdint>
#include <string>

namespace torch_mspti {

struct KernelRecord {
  int64_t start = 0;
  int64_t end = 0;
  uint64_t correlationId = 0;  // MSPTI launch id (shared with API/external records)
  uint32_t deviceId = 0;       // physical device id as MSPTI reports it
  uint32_t streamId = 0;
  const std::string* name = nullptr;  // interned (NameTable), never null once parsed
  const std::string* type = nullptr;  // interned, e.g. "KERNEL_AICORE"
};

struct ApiRecord {
  int64_t start = 0;  // host time of the runtime call
  int64_t end = 0;
  uint32_t processId = 0;
  uint32_t threadId = 0;  // OS thread id of the launching thread
  uint64_t correlationId = 0;
  const std::string* name = nullptr;  // interned API name, e.g. "LaunchKernelV2"
};

struct ExternalCorrelationRecord {
  uint32_t externalKind = 0;  // msptiExternalCorrelationKind
  uint64_t externalId = 0;    // torch op id (CUSTOM0) or user range id (CUSTOM1)
  uint64_t correlationId = 0;
};

}  // namespace torch_mspti
