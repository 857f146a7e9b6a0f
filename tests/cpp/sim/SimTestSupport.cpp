#include "SimTestSupport.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <thread>

namespace torch_mspti::sim::test {

namespace {

template <typename Fn>
void resolve(void* handle, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (out == nullptr) {
    throw std::runtime_error(std::string("libmspti_sim.so does not export ") + name);
  }
}

SimApi load() {
  SimApi api{};
  api.handle = dlopen(MSPTI_SIM_PATH, RTLD_NOW | RTLD_LOCAL);
  if (api.handle == nullptr) {
    throw std::runtime_error(std::string("dlopen failed: ") + dlerror());
  }
  resolve(api.handle, "msptiSubscribe", api.subscribe);
  resolve(api.handle, "msptiUnsubscribe", api.unsubscribe);
  resolve(api.handle, "msptiActivityRegisterCallbacks", api.registerCallbacks);
  resolve(api.handle, "msptiActivityEnable", api.enable);
  resolve(api.handle, "msptiActivityDisable", api.disable);
  resolve(api.handle, "msptiActivityIsEnabled", api.isEnabled);
  resolve(api.handle, "msptiActivityGetNextRecord", api.getNextRecord);
  resolve(api.handle, "msptiActivityFlushAll", api.flushAll);
  resolve(api.handle, "msptiActivityFlushPeriod", api.flushPeriod);
  resolve(api.handle, "msptiActivityPushExternalCorrelationId", api.pushExternal);
  resolve(api.handle, "msptiActivityPopExternalCorrelationId", api.popExternal);
  resolve(api.handle, "msptiSimLaunchKernel", api.launchKernel);
  resolve(api.handle, "msptiSimLaunchKernels", api.launchKernels);
  resolve(api.handle, "msptiSimSynchronize", api.synchronize);
  resolve(api.handle, "msptiSimStreamTail", api.streamTail);
  resolve(api.handle, "msptiSimSetOption", api.setOption);
  resolve(api.handle, "msptiSimGetOption", api.getOption);
  resolve(api.handle, "msptiSimGetStats", api.getStats);
  resolve(api.handle, "msptiSimReloadEnvironment", api.reloadEnvironment);
  resolve(api.handle, "msptiSimResetOptions", api.resetOptions);
  resolve(api.handle, "msptiSimLaunchCommunication", api.launchCommunication);
  resolve(api.handle, "msptiSimMemcpy", api.memcpy);
  resolve(api.handle, "msptiSimMemset", api.memset);
  resolve(api.handle, "msptiSimRuntimeCall", api.runtimeCall);
  resolve(api.handle, "msptiSimGetCounter", api.getCounter);
  resolve(api.handle, "msptiSimCompleteForeignBuffer", api.completeForeignBuffer);
  return api;
}

template <typename T>
T readAt(const std::vector<uint8_t>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace

const SimApi& SimApi::get() {
  static const SimApi api = load();
  return api;
}

msptiSimStats SimApi::stats() const {
  msptiSimStats s{};
  getStats(&s);
  return s;
}

uint64_t nowNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<uint64_t>(ts.tv_nsec);
}

pid_t currentTid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

size_t threadCount() {
  size_t count = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] != '.') {
        ++count;
      }
    }
    closedir(dir);
  }
  return count;
}

std::string threadNames() {
  std::string names;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(dir)) {
      if (entry->d_name[0] == '.') {
        continue;
      }
      char comm[64] = {};
      const std::string path = std::string("/proc/self/task/") + entry->d_name + "/comm";
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        if (std::fgets(comm, sizeof(comm), f) != nullptr) {
          comm[std::strcspn(comm, "\n")] = '\0';
        }
        std::fclose(f);
      }
      names += std::string(names.empty() ? "" : ", ") + entry->d_name + ":" + comm;
    }
    closedir(dir);
  }
  return names;
}

BufferCollector& BufferCollector::get() {
  static BufferCollector collector;
  return collector;
}

void BufferCollector::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  bufferSize_ = 1 << 20;
  declines_ = 0;
  hook_ = nullptr;
  delivered_.clear();
  requests_.clear();
}

void BufferCollector::setBufferSize(size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  bufferSize_ = size;
}

void BufferCollector::declineRequests(int count) {
  std::lock_guard<std::mutex> lock(mutex_);
  declines_ = count;
}

void BufferCollector::setCompletionHook(std::function<void(const DeliveredBuffer&)> hook) {
  std::lock_guard<std::mutex> lock(mutex_);
  hook_ = std::move(hook);
}

std::vector<DeliveredBuffer> BufferCollector::delivered() {
  std::lock_guard<std::mutex> lock(mutex_);
  return delivered_;
}

std::vector<RequestEvent> BufferCollector::requests() {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

bool BufferCollector::waitUntil(const std::function<bool(const std::vector<DeliveredBuffer>&)>& pred,
                                std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return cv_.wait_for(lock, timeout, [&] { return pred(delivered_); });
}

void BufferCollector::onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  BufferCollector& self = get();
  std::lock_guard<std::mutex> lock(self.mutex_);
  self.requests_.push_back({currentTid(), nowNs()});
  *maxNumRecords = 0;
  if (self.declines_ > 0) {
    --self.declines_;
    *buffer = nullptr;
    *size = 0;
    return;
  }
  const size_t bytes = (self.bufferSize_ + 7) / 8 * 8;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, bytes));
  std::memset(*buffer, 0xAB, bytes);  // poison: stale bytes must never be read as records
  *size = self.bufferSize_;
  self.handedOut_.insert(*buffer);
}

void BufferCollector::onComplete(uint8_t* buffer, size_t size, size_t validSize) {
  BufferCollector& self = get();
  DeliveredBuffer delivered;
  delivered.isNull = buffer == nullptr;
  delivered.size = size;
  delivered.validSize = validSize;
  if (buffer != nullptr) {
    delivered.bytes.assign(buffer, buffer + validSize);
  }
  delivered.tid = currentTid();
  delivered.timeNs = nowNs();
  std::function<void(const DeliveredBuffer&)> hook;
  {
    std::lock_guard<std::mutex> lock(self.mutex_);
    hook = self.hook_;
    delivered.foreign = buffer != nullptr && self.handedOut_.erase(buffer) == 0;
  }
  if (!delivered.foreign) {
    std::free(buffer);
  }
  if (hook) {
    hook(delivered);
  }
  std::lock_guard<std::mutex> lock(self.mutex_);
  self.delivered_.push_back(std::move(delivered));
  self.cv_.notify_all();
}

Records decode(const std::vector<DeliveredBuffer>& buffers) {
  Records out;
  for (const DeliveredBuffer& buffer : buffers) {
    size_t offset = 0;
    while (offset < buffer.validSize) {
      const int kind = readAt<int32_t>(buffer.bytes, offset);
      out.kinds.push_back(kind);
      size_t stride = 0;
      if (kind == MSPTI_ACTIVITY_KIND_KERNEL) {
        stride = sizeof(msptiActivityKernel);
        EXPECT_LE(offset + stride, buffer.validSize);
        const auto k = readAt<msptiActivityKernel>(buffer.bytes, offset);
        out.kernels.push_back({k.start, k.end, k.ds.deviceId, k.ds.streamId, k.correlationId,
                               k.type ? k.type : "<null>", k.name ? k.name : "<null>"});
      } else if (kind == MSPTI_ACTIVITY_KIND_API || kind == MSPTI_ACTIVITY_KIND_RUNTIME_API) {
        stride = sizeof(msptiActivityApi);
        EXPECT_LE(offset + stride, buffer.validSize);
        const auto a = readAt<msptiActivityApi>(buffer.bytes, offset);
        out.apis.push_back(
            {kind, a.start, a.end, a.pt.processId, a.pt.threadId, a.correlationId, a.name ? a.name : "<null>"});
      } else if (kind == MSPTI_ACTIVITY_KIND_COMMUNICATION) {
        stride = sizeof(msptiActivityCommunication);
        EXPECT_LE(offset + stride, buffer.validSize);
        const auto c = readAt<msptiActivityCommunication>(buffer.bytes, offset);
        out.communications.push_back({c.dataType, c.count, c.ds.deviceId, c.ds.streamId, c.start, c.end,
                                      c.algType ? c.algType : "<null>", c.name ? c.name : "<null>",
                                      c.commName ? c.commName : "<null>", c.correlationId});
      } else if (kind == MSPTI_ACTIVITY_KIND_MEMCPY) {
        stride = sizeof(msptiActivityMemcpy);
        EXPECT_LE(offset + stride, buffer.validSize);
        const auto m = readAt<msptiActivityMemcpy>(buffer.bytes, offset);
        out.memcpys.push_back({static_cast<uint32_t>(m.copyKind), m.bytes, m.start, m.end, m.deviceId, m.streamId,
                               m.correlationId, m.isAsync});
      } else if (kind == MSPTI_ACTIVITY_KIND_MEMSET) {
        stride = sizeof(msptiActivityMemset);
        EXPECT_LE(offset + stride, buffer.validSize);
        const auto m = readAt<msptiActivityMemset>(buffer.bytes, offset);
        out.memsets.push_back({m.value, m.bytes, m.start, m.end, m.deviceId, m.streamId, m.correlationId, m.isAsync});
      } else if (kind == MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
        stride = sizeof(msptiActivityExternalCorrelation);
        EXPECT_LE(offset + stride, buffer.validSize);
        const auto e = readAt<msptiActivityExternalCorrelation>(buffer.bytes, offset);
        out.externals.push_back({static_cast<uint32_t>(e.externalKind), e.externalId, e.correlationId});
      } else {
        ADD_FAILURE() << "unexpected record kind " << kind << " at offset " << offset;
        break;
      }
      offset += stride;
    }
    EXPECT_EQ(offset, buffer.validSize) << "records must tile the valid bytes exactly";
  }
  return out;
}

std::vector<ApiView> Records::apisNamed(const std::string& name) const {
  std::vector<ApiView> named;
  for (const ApiView& api : apis) {
    if (api.name == name) {
      named.push_back(api);
    }
  }
  return named;
}

void SimTest::SetUp() {
  const char* preload = std::getenv("LD_PRELOAD");
  hadPreload_ = preload != nullptr;
  preload_ = preload != nullptr ? preload : "";
  collector_.reset();
  ASSERT_EQ(api_.resetOptions(), 0);
  ASSERT_EQ(api_.registerCallbacks(&BufferCollector::onRequest, &BufferCollector::onComplete), MSPTI_SUCCESS);
  // Short latencies keep the suite fast; tests that need the defaults set them.
  ASSERT_EQ(api_.setOption("delivery_delay_ns", 5'000'000), 0);
  ASSERT_EQ(api_.setOption("driver_flush_ns", 0), 0);
}

void SimTest::TearDown() {
  api_.setOption("disable_pulls", 0);
  api_.setOption("driver_flush_ns", 0);
  api_.setOption("per_thread_stacks", 0);
  if (subscriber_ != nullptr) {
    EXPECT_EQ(api_.unsubscribe(subscriber_), MSPTI_SUCCESS);
    subscriber_ = nullptr;
  }
  for (int kind = 1; kind < MSPTI_ACTIVITY_KIND_COUNT; ++kind) {
    api_.disable(static_cast<msptiActivityKind>(kind));
  }
  api_.flushPeriod(0);
  collector_.setCompletionHook(nullptr);
  EXPECT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  for (uint32_t kind : {0u, 1u, 2u, 3u, 4u, 5u, 77u}) {
    uint64_t id = 0;
    while (api_.popExternal(static_cast<msptiExternalCorrelationKind>(kind), &id) == MSPTI_SUCCESS) {}
  }
  unsetenv("ASCEND_RT_VISIBLE_DEVICES");
  if (hadPreload_) {
    setenv("LD_PRELOAD", preload_.c_str(), 1);
  } else {
    unsetenv("LD_PRELOAD");
  }
  api_.reloadEnvironment();
  api_.resetOptions();
  collector_.reset();
}

void SimTest::subscribe() { ASSERT_EQ(api_.subscribe(&subscriber_, nullptr, nullptr), MSPTI_SUCCESS); }

void SimTest::setPreload(bool preloaded) {
  if (preloaded) {
    setenv("LD_PRELOAD", "/nonexistent/libmspti.so", 1);
  } else {
    unsetenv("LD_PRELOAD");
  }
  api_.reloadEnvironment();
}

void SimTest::enable(std::initializer_list<msptiActivityKind> kinds) {
  for (msptiActivityKind kind : kinds) {
    ASSERT_EQ(api_.enable(kind), MSPTI_SUCCESS) << "kind " << kind;
  }
}

bool SimTest::waitForStats(const std::function<bool(const msptiSimStats&)>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred(api_.stats())) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

void SimTest::waitUntilEnded(uint32_t device, uint32_t stream) {
  const uint64_t tail = api_.streamTail(device, stream);
  while (nowNs() < tail) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void SimTest::waitForDelivery() {
  api_.synchronize(-1);
  ASSERT_TRUE(waitForStats([](const msptiSimStats& s) { return s.records_pending == 0; }));
}

Records SimTest::flushAndDecode() {
  EXPECT_EQ(api_.flushAll(1), MSPTI_SUCCESS);
  return decode(collector_.delivered());
}

}  // namespace torch_mspti::sim::test
