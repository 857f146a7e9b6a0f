// Test support for libmspti_sim.so: the library loaded with dlopen (as the plugin loads MSPTI),
// a buffer collector behind the two C callbacks, record decoding and a resetting fixture.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mspti/mspti.h"
#include "mspti_sim.h"

namespace torch_mspti::sim::test {

// Every entry point, resolved with dlsym from one dlopen(RTLD_NOW | RTLD_LOCAL), never closed.
struct SimApi {
  decltype(&msptiSubscribe) subscribe;
  decltype(&msptiUnsubscribe) unsubscribe;
  decltype(&msptiActivityRegisterCallbacks) registerCallbacks;
  decltype(&msptiActivityEnable) enable;
  decltype(&msptiActivityDisable) disable;
  decltype(&msptiActivityIsEnabled) isEnabled;
  decltype(&msptiActivityGetNextRecord) getNextRecord;
  decltype(&msptiActivityFlushAll) flushAll;
  decltype(&msptiActivityFlushPeriod) flushPeriod;
  decltype(&msptiActivityPushExternalCorrelationId) pushExternal;
  decltype(&msptiActivityPopExternalCorrelationId) popExternal;
  decltype(&msptiSimLaunchKernel) launchKernel;
  decltype(&msptiSimLaunchKernels) launchKernels;
  decltype(&msptiSimSynchronize) synchronize;
  decltype(&msptiSimStreamTail) streamTail;
  decltype(&msptiSimSetOption) setOption;
  decltype(&msptiSimGetOption) getOption;
  decltype(&msptiSimGetStats) getStats;
  decltype(&msptiSimReloadEnvironment) reloadEnvironment;
  decltype(&msptiSimResetOptions) resetOptions;
  decltype(&msptiSimLaunchCommunication) launchCommunication;
  decltype(&msptiSimMemcpy) memcpy;
  decltype(&msptiSimMemset) memset;
  decltype(&msptiSimRuntimeCall) runtimeCall;
  decltype(&msptiSimGetCounter) getCounter;
  decltype(&msptiSimCompleteForeignBuffer) completeForeignBuffer;

  void* handle;
  static const SimApi& get();
  msptiSimStats stats() const;
};

uint64_t nowNs();  // CLOCK_REALTIME
pid_t currentTid();
size_t threadCount();       // entries of /proc/self/task
std::string threadNames();  // "tid:comm, ..." for failure messages

struct DeliveredBuffer {
  bool isNull = false;
  size_t size = 0;
  size_t validSize = 0;
  std::vector<uint8_t> bytes;  // copy of [0, validSize)
  pid_t tid = 0;               // thread that ran the complete callback
  uint64_t timeNs = 0;
  bool foreign = false;  // not a buffer this collector handed out (never freed by it)
};

struct RequestEvent {
  pid_t tid;
  uint64_t timeNs;
};

// Behind the request/complete callbacks. The buffers it hands out are 8-aligned and freed after
// their bytes are copied; a completed buffer it did not hand out is copied but never freed.
class BufferCollector {
 public:
  static BufferCollector& get();

  void reset();
  void setBufferSize(size_t size);
  void declineRequests(int count);  // the next `count` requests answer NULL
  // Runs on the completing thread before the buffer is recorded; may block.
  void setCompletionHook(std::function<void(const DeliveredBuffer&)> hook);

  std::vector<DeliveredBuffer> delivered();
  std::vector<RequestEvent> requests();
  // Waits (condition variable) until `pred` holds, checked under the collector lock.
  bool waitUntil(const std::function<bool(const std::vector<DeliveredBuffer>&)>& pred,
                 std::chrono::milliseconds timeout);

  static void onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
  static void onComplete(uint8_t* buffer, size_t size, size_t validSize);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t bufferSize_ = 1 << 20;
  int declines_ = 0;
  std::function<void(const DeliveredBuffer&)> hook_;
  std::vector<DeliveredBuffer> delivered_;
  std::vector<RequestEvent> requests_;
  std::set<uint8_t*> handedOut_;
};

// Plain copies of the packed records (packed fields cannot bind to gtest's references).
struct KernelView {
  uint64_t start, end;
  uint32_t deviceId, streamId;
  uint64_t correlationId;
  std::string type, name;
};
struct ApiView {
  int kind;
  uint64_t start, end;
  uint32_t processId, threadId;
  uint64_t correlationId;
  std::string name;
};
struct ExternalView {
  uint32_t externalKind;
  uint64_t externalId, correlationId;
};
struct CommunicationView {
  uint32_t dataType;
  uint64_t count;
  uint32_t deviceId, streamId;
  uint64_t start, end;
  std::string algType, name, commName;
  uint64_t correlationId;
};
// A MEMCPY (kind = copyKind) or MEMSET (kind = value) record.
struct MemoryView {
  uint32_t copyKindOrValue;
  uint64_t bytes, start, end;
  uint32_t deviceId, streamId;
  uint64_t correlationId;
  uint8_t isAsync;
};
struct Records {
  std::vector<int> kinds;  // every record, in buffer order
  std::vector<KernelView> kernels;
  std::vector<ApiView> apis;
  std::vector<ExternalView> externals;
  std::vector<CommunicationView> communications;
  std::vector<MemoryView> memcpys;
  std::vector<MemoryView> memsets;

  // API records named `name`, in buffer order.
  std::vector<ApiView> apisNamed(const std::string& name) const;
};

// Walks each buffer by sizeof() strides from offset 0 to validSize (fails the test on a kind it
// does not know or a record running past validSize).
Records decode(const std::vector<DeliveredBuffer>& buffers);

// Registers the collector, sets short delays; TearDown unsubscribes, disables every kind,
// flushes, empties the external stacks and restores the defaults.
class SimTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  void subscribe();
  // LD_PRELOAD as the simulator sees it (re-read with msptiSimReloadEnvironment); TearDown restores
  // the value the process started with. "libmspti.so" never names a file that could be loaded.
  void setPreload(bool preloaded);
  void enable(std::initializer_list<msptiActivityKind> kinds);
  // FlushAll, then decode everything delivered so far.
  Records flushAndDecode();
  // Sleeps until the last task on (device, stream) has ended on the timeline.
  void waitUntilEnded(uint32_t device, uint32_t stream);
  // Synchronizes every device, then waits until no device record is pending (fails the test
  // after 5 s).
  void waitForDelivery();
  // Polls the simulator's counters (1 ms steps) until `pred` holds or `timeout` passes.
  bool waitForStats(const std::function<bool(const msptiSimStats&)>& pred,
                    std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  const SimApi& api_ = SimApi::get();
  BufferCollector& collector_ = BufferCollector::get();
  msptiSubscriberHandle subscriber_ = nullptr;

 private:
  bool hadPreload_ = false;
  std::string preload_;
};

}  // namespace torch_mspti::sim::test
