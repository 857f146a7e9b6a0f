// Portable ABI smoke test: needs neither torch nor GoogleTest, so it can be cross-built for
// aarch64 and run under qemu-user (ci/cross_aarch64.sh) as well as natively (ctest).
//
// Compiling it runs the static_asserts of our MSPTI declarations for the target architecture.
// Running it loads libmspti_sim.so with dlopen, as the plugin loads MSPTI, collects KERNEL and
// EXTERNAL_CORRELATION records for a few simulated launches, then walks every delivered buffer
// twice (by sizeof() strides of the declared structs, and with msptiActivityGetNextRecord) and
// checks that both walks agree and that every field holds what was launched.
//
// Usage: mspti_abi_smoke [path/to/libmspti_sim.so]      exit 0 = pass, 1 = fail
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mspti/mspti.h"
#include "mspti_sim.h"

namespace {

constexpr int kLaunches = 4;
constexpr uint32_t kStream = 3;
constexpr uint64_t kDurationNs = 20000;
constexpr uint64_t kExternalBase = 7000;
constexpr size_t kBufferSize = 64 * 1024;

int gFailures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "AbiSmokeTest: FAIL: %s\n", what.c_str());
  ++gFailures;
}

template <class T>
T* resolve(void* lib, const char* name) {
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    std::fprintf(stderr, "AbiSmokeTest: FAIL: symbol %s missing from the simulator\n", name);
    std::exit(1);
  }
  return reinterpret_cast<T*>(sym);
}

// Delivered buffers, copied into 8-aligned storage (uint64_t elements) on the completing thread.
std::mutex gMutex;
std::vector<std::vector<uint64_t>> gBuffers;
std::vector<size_t> gValidSizes;

void onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferSize));
  *size = *buffer != nullptr ? kBufferSize : 0;
  *maxNumRecords = 0;
}

size_t strideOf(msptiActivityKind kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL: return sizeof(msptiActivityKernel);
    case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(msptiActivityExternalCorrelation);
    default: return 0;
  }
}

std::atomic<int> gKernelRecords{0};  // KERNEL records delivered so far (the drain waits for them)

void onComplete(uint8_t* buffer, size_t /*size*/, size_t validSize) {
  if (buffer == nullptr) {
    return;
  }
  std::vector<uint64_t> copy((validSize + 7) / 8);
  std::memcpy(copy.data(), buffer, validSize);
  std::free(buffer);
  for (size_t offset = 0; offset < validSize;) {
    const auto* record = reinterpret_cast<const msptiActivity*>(reinterpret_cast<const uint8_t*>(copy.data()) + offset);
    const size_t stride = strideOf(record->kind);
    if (stride == 0) break;  // the main walk reports it
    if (record->kind == MSPTI_ACTIVITY_KIND_KERNEL) ++gKernelRecords;
    offset += stride;
  }
  std::lock_guard<std::mutex> lock(gMutex);
  gBuffers.push_back(std::move(copy));
  gValidSizes.push_back(validSize);
}

const char* architecture() {
#if defined(__aarch64__)
  return "aarch64";
#elif defined(__x86_64__)
  return "x86_64";
#else
  return "other";
#endif
}

}  // namespace

int main(int argc, char** argv) {
#ifdef MSPTI_SIM_PATH
  const char* libPath = argc > 1 ? argv[1] : MSPTI_SIM_PATH;
#else
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s path/to/libmspti_sim.so\n", argv[0]);
    return 1;
  }
  const char* libPath = argv[1];
#endif
  // Records carry physical device ids mapped through this variable: keep logical == physical.
  unsetenv("ASCEND_RT_VISIBLE_DEVICES");

  void* lib = dlopen(libPath, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "AbiSmokeTest: FAIL: dlopen(%s): %s\n", libPath, dlerror());
    return 1;
  }
  auto subscribe = resolve<decltype(msptiSubscribe)>(lib, "msptiSubscribe");
  auto unsubscribe = resolve<decltype(msptiUnsubscribe)>(lib, "msptiUnsubscribe");
  auto registerCallbacks = resolve<decltype(msptiActivityRegisterCallbacks)>(lib, "msptiActivityRegisterCallbacks");
  auto enable = resolve<decltype(msptiActivityEnable)>(lib, "msptiActivityEnable");
  auto disable = resolve<decltype(msptiActivityDisable)>(lib, "msptiActivityDisable");
  auto getNextRecord = resolve<decltype(msptiActivityGetNextRecord)>(lib, "msptiActivityGetNextRecord");
  auto flushAll = resolve<decltype(msptiActivityFlushAll)>(lib, "msptiActivityFlushAll");
  auto push = resolve<decltype(msptiActivityPushExternalCorrelationId)>(lib, "msptiActivityPushExternalCorrelationId");
  auto pop = resolve<decltype(msptiActivityPopExternalCorrelationId)>(lib, "msptiActivityPopExternalCorrelationId");
  auto launch = resolve<decltype(msptiSimLaunchKernel)>(lib, "msptiSimLaunchKernel");
  auto synchronize = resolve<decltype(msptiSimSynchronize)>(lib, "msptiSimSynchronize");
  auto setOption = resolve<decltype(msptiSimSetOption)>(lib, "msptiSimSetOption");

  // Short delivery delay: the test also runs under qemu, where time is expensive.
  if (setOption("delivery_delay_ns", 1000000) != 0) {
    fail("msptiSimSetOption(delivery_delay_ns)");
  }

  msptiSubscriberHandle subscriber = nullptr;
  if (subscribe(&subscriber, nullptr, nullptr) != MSPTI_SUCCESS) {
    fail("msptiSubscribe");
    return 1;
  }
  if (registerCallbacks(onRequest, onComplete) != MSPTI_SUCCESS ||
      enable(MSPTI_ACTIVITY_KIND_KERNEL) != MSPTI_SUCCESS ||
      enable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) != MSPTI_SUCCESS) {
    fail("register callbacks / enable KERNEL + EXTERNAL_CORRELATION");
    return 1;
  }

  uint64_t correlation[kLaunches] = {};
  std::string names[kLaunches];
  for (int i = 0; i < kLaunches; ++i) {
    names[i] = "abi_smoke_kernel_" + std::to_string(i);
    push(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, kExternalBase + i);
    correlation[i] = launch(names[i].c_str(), nullptr, 0, kStream, kDurationNs);
    uint64_t popped = 0;
    if (pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped) != MSPTI_SUCCESS || popped != kExternalBase + i) {
      fail("pop returned " + std::to_string(popped) + " for push " + std::to_string(kExternalBase + i));
    }
    if (correlation[i] == 0) {
      fail("launch " + std::to_string(i) + " minted no correlation id");
    }
  }

  // Tail drain as MSPTI needs it: FlushAll until every kernel record came, and only then Disable,
  // whose reader would drop what it parses after the switch clears (docs/mspti.md 2.3); a last
  // FlushAll delivers the rest.
  synchronize(-1);
  for (int i = 0; i < 10000 && gKernelRecords.load() < kLaunches; ++i) {
    flushAll(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  disable(MSPTI_ACTIVITY_KIND_KERNEL);
  disable(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  flushAll(1);
  unsubscribe(subscriber);

  int kernels = 0;
  int externals = 0;
  bool seenKernel[kLaunches] = {};
  bool seenExternal[kLaunches] = {};
  auto launchOf = [&](uint64_t id) {
    for (int i = 0; i < kLaunches; ++i) {
      if (correlation[i] == id) return i;
    }
    return -1;
  };

  std::lock_guard<std::mutex> lock(gMutex);
  for (size_t b = 0; b < gBuffers.size(); ++b) {
    uint8_t* base = reinterpret_cast<uint8_t*>(gBuffers[b].data());
    const size_t valid = gValidSizes[b];
    size_t offset = 0;
    msptiActivity* next = nullptr;
    while (offset < valid) {
      auto* record = reinterpret_cast<msptiActivity*>(base + offset);
      // The simulator's own walk must land on the record our stride walk computed.
      if (getNextRecord(base, valid, &next) != MSPTI_SUCCESS || next != record) {
        fail("msptiActivityGetNextRecord disagrees with the sizeof() walk at offset " + std::to_string(offset));
        break;
      }
      if (offset % 8 != 0) {
        fail("record at offset " + std::to_string(offset) + " is not 8-aligned");
      }
      const size_t stride = strideOf(record->kind);
      if (stride == 0) {
        fail("unexpected record kind " + std::to_string(record->kind));
        break;
      }
      if (record->kind == MSPTI_ACTIVITY_KIND_KERNEL) {
        const auto* k = reinterpret_cast<const msptiActivityKernel*>(record);
        const int i = launchOf(k->correlationId);
        ++kernels;
        if (i < 0) {
          fail("kernel record with unknown correlationId " + std::to_string(k->correlationId));
        } else {
          seenKernel[i] = true;
          if (k->name == nullptr || names[i] != k->name) fail("kernel name of launch " + std::to_string(i));
          if (k->type == nullptr || std::strcmp(k->type, "KERNEL_AICORE") != 0) fail("kernel type");
          if (k->ds.deviceId != 0 || k->ds.streamId != kStream) fail("kernel device/stream");
          if (k->end - k->start != kDurationNs) fail("kernel duration " + std::to_string(k->end - k->start));
        }
      } else {
        const auto* e = reinterpret_cast<const msptiActivityExternalCorrelation*>(record);
        const int i = launchOf(e->correlationId);
        ++externals;
        if (i < 0) {
          fail("external-correlation record with unknown correlationId");
        } else {
          seenExternal[i] = true;
          if (e->externalKind != MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) fail("externalKind");
          if (e->externalId != kExternalBase + static_cast<uint64_t>(i))
            fail("externalId of launch " + std::to_string(i));
        }
      }
      offset += stride;
    }
    if (offset == valid && getNextRecord(base, valid, &next) != MSPTI_ERROR_MAX_LIMIT_REACHED) {
      fail("msptiActivityGetNextRecord did not end the buffer at validSize");
    }
  }
  for (int i = 0; i < kLaunches; ++i) {
    if (!seenKernel[i]) fail("no KERNEL record for launch " + std::to_string(i));
    if (!seenExternal[i]) fail("no EXTERNAL_CORRELATION record for launch " + std::to_string(i));
  }

  if (gFailures != 0) {
    std::fprintf(stderr, "AbiSmokeTest: %d failure(s) on %s\n", gFailures, architecture());
    return 1;
  }
  std::printf(
      "AbiSmokeTest: OK on %s: %d KERNEL + %d EXTERNAL_CORRELATION records in %zu buffer(s); "
      "sizeof Kernel %zu, ExternalCorrelation %zu, Api %zu, Communication %zu\n",
      architecture(), kernels, externals, gBuffers.size(), sizeof(msptiActivityKernel),
      sizeof(msptiActivityExternalCorrelation), sizeof(msptiActivityApi), sizeof(msptiActivityCommunication));
  return 0;
}
