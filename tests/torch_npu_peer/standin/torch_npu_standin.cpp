// A stand-in for the MSPTI kineto backend built into libtorch_npu.so (torch_npu 2.12.0.post3, 2.13.0,
// 2.14.0), for the coexistence tests. It reproduces what the released 2.13.0 binary was observed to do
// (tests/torch_npu_peer/FINDINGS.md, sections a-c), defects included, so that torch-mspti can be tested
// against it without downloading the wheel:
//
//  * registration from a static initialiser, straight with libkineto::api().registerProfilerFactory
//    (kineto queues it until its first trace); with -DSTANDIN_VIA_TORCH_REGISTRY through torch's
//    PrivateUse1 profiler registry instead (the branch torch_npu's source prefers when torch has it);
//  * configure(): a session whenever kernels, memcpy, memset or device annotations are requested;
//  * start(): nothing unless $ASCEND_HOME_PATH/lib64/libmspti.so resolves (checked once); loads
//    "libmspti.so" by bare name; Subscribe, then RegisterCallbacks and Enable whatever Subscribe
//    returned (KERNEL, COMMUNICATION, ACL_API, EXTERNAL_CORRELATION for kernels; MEMCPY, MEMSET);
//    a global RecordFunction callback pushes each op's handle as a CUSTOM0 external id, pops on exit;
//  * buffers of 8 MiB from posix_memalign, walked under one mutex and released with free();
//  * stop(): FlushAll every 25 ms until three polls add none of its own events (at most 400), Disable
//    every kind it asked for, Unsubscribe if it holds a handle, FlushAll once more;
//  * trace: kernels on pid = device id, tid = stream id, flow end with the op handle as id, a
//    zero-length PRIVATEUSE1_RUNTIME flow start at the kernel's start on the launching thread,
//    names written as MSPTI gives them; DeviceInfo {0, 0x1000000, "NPU", "Ascend NPU"} always;
//    one "NPU stream <n>" resource per (device, stream) with kernels.
//
// The class names are those of the real backend (torch_npu::profiler::MsptiActivityProfilerPoc for
// the profiler, MsptiActivityProfiler for the session): their RTTI names are what a detector looks for.
// -DSTANDIN_NAMESPACE=other_vendor::profiler builds the same code under another name: a PrivateUse1
// profiler of some other vendor, which must not be mistaken for torch_npu's.
// Thread-safety: buffer callbacks run on MSPTI's threads; all shared state is behind g_mutex.
#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <ATen/record_function.h>
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <mspti/mspti.h>
#include <sys/syscall.h>
#ifdef STANDIN_VIA_TORCH_REGISTRY
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#endif

#ifndef STANDIN_NAMESPACE
#define STANDIN_NAMESPACE torch_npu::profiler
#endif

namespace STANDIN_NAMESPACE {
namespace {

using libkineto::ActivityType;

struct Mspti {
  decltype(&msptiSubscribe) subscribe = nullptr;
  decltype(&msptiUnsubscribe) unsubscribe = nullptr;
  decltype(&msptiActivityRegisterCallbacks) registerCallbacks = nullptr;
  decltype(&msptiActivityEnable) enable = nullptr;
  decltype(&msptiActivityDisable) disable = nullptr;
  decltype(&msptiActivityFlushAll) flushAll = nullptr;
  decltype(&msptiActivityGetNextRecord) nextRecord = nullptr;
  decltype(&msptiActivityPushExternalCorrelationId) push = nullptr;
  decltype(&msptiActivityPopExternalCorrelationId) pop = nullptr;
};

// The library is looked for once: a path check under ASCEND_HOME_PATH, then a bare-name dlopen.
const Mspti* mspti() {
  static const Mspti* loaded = []() -> const Mspti* {
    const char* home = std::getenv("ASCEND_HOME_PATH");
    if (home == nullptr) return nullptr;
    char resolved[PATH_MAX];
    if (realpath((std::string(home) + "/lib64/libmspti.so").c_str(), resolved) == nullptr) return nullptr;
    void* h = dlopen("libmspti.so", RTLD_LAZY);
    if (h == nullptr) return nullptr;
    auto* m = new Mspti();
    auto get = [h](auto& slot, const char* name) {
      slot = reinterpret_cast<std::decay_t<decltype(slot)>>(dlsym(h, name));
    };
    get(m->subscribe, "msptiSubscribe");
    get(m->unsubscribe, "msptiUnsubscribe");
    get(m->registerCallbacks, "msptiActivityRegisterCallbacks");
    get(m->enable, "msptiActivityEnable");
    get(m->disable, "msptiActivityDisable");
    get(m->flushAll, "msptiActivityFlushAll");
    get(m->nextRecord, "msptiActivityGetNextRecord");
    get(m->push, "msptiActivityPushExternalCorrelationId");
    get(m->pop, "msptiActivityPopExternalCorrelationId");
    return m;
  }();
  return loaded;
}

struct DeviceEvent {
  std::string name;
  std::string kernelType;
  int64_t startNs = 0, endNs = 0;
  uint32_t device = 0, stream = 0;
  uint64_t msptiCorrelation = 0;
  ActivityType type = ActivityType::CONCURRENT_KERNEL;
};

struct LaunchSite {
  int32_t pid = 0, tid = 0;
};

std::mutex g_mutex;
std::vector<DeviceEvent> g_events;
std::map<uint64_t, uint64_t> g_externalOf;  // MSPTI correlation id -> op handle
std::map<uint64_t, LaunchSite> g_sites;     // op handle -> launching process/thread
msptiSubscriberHandle g_subscriber = nullptr;
bool g_active = false;
at::CallbackHandle g_callback = 0;
std::atomic<uint64_t> g_pushes{0}, g_pops{0};

constexpr size_t kBufferBytes = 8u << 20;

void onRequest(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  void* p = nullptr;
  const bool ok = posix_memalign(&p, 8, kBufferBytes) == 0;
  *buffer = ok ? static_cast<uint8_t*>(p) : nullptr;
  *size = ok ? kBufferBytes : 0;
  *maxRecords = 0;
}

void onComplete(uint8_t* buffer, size_t, size_t valid) {
  std::lock_guard<std::mutex> lock(g_mutex);
  msptiActivity* record = nullptr;
  const Mspti* m = mspti();
  while (m != nullptr && m->nextRecord(buffer, valid, &record) == MSPTI_SUCCESS && record != nullptr) {
    if (record->kind == MSPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<msptiActivityKernel*>(record);
      DeviceEvent e;
      e.name = k->name ? k->name : (k->type ? k->type : "mspti_kernel");
      e.kernelType = k->type ? k->type : "";
      e.startNs = static_cast<int64_t>(k->start);
      e.endNs = static_cast<int64_t>(k->end);
      e.device = k->ds.deviceId;
      e.stream = k->ds.streamId;
      e.msptiCorrelation = k->correlationId;
      g_events.push_back(std::move(e));
    } else if (record->kind == MSPTI_ACTIVITY_KIND_COMMUNICATION) {
      auto* c = reinterpret_cast<msptiActivityCommunication*>(record);
      DeviceEvent e;
      e.name = c->name ? c->name : "mspti_communication";
      e.startNs = static_cast<int64_t>(c->start);
      e.endNs = static_cast<int64_t>(c->end);
      e.device = c->ds.deviceId;
      e.stream = c->ds.streamId;
      e.type = ActivityType::COLLECTIVE_COMM;
      g_events.push_back(std::move(e));
    } else if (record->kind == MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      auto* x = reinterpret_cast<msptiActivityExternalCorrelation*>(record);
      g_externalOf[x->correlationId] = x->externalId;
    }
  }
  std::free(buffer);
}

struct PushedOp : at::ObserverContext {
  explicit PushedOp(uint64_t h) : handle(h) {}
  uint64_t handle;
};

void installOpCallback() {
  if (g_callback != 0) return;
  auto enter = [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      if (!g_active) return nullptr;
    }
    const auto handle = static_cast<uint64_t>(fn.handle());
    const Mspti* m = mspti();
    if (m == nullptr || m->push(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, handle) != MSPTI_SUCCESS) return nullptr;
    g_pushes++;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_sites[handle] = LaunchSite{static_cast<int32_t>(getpid()), static_cast<int32_t>(syscall(SYS_gettid))};
    return std::make_unique<PushedOp>(handle);
  };
  auto exit = [](const at::RecordFunction&, at::ObserverContext* ctx) {
    if (ctx == nullptr) return;
    uint64_t popped = 0;
    if (mspti()->pop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &popped) == MSPTI_SUCCESS) g_pops++;
  };
  g_callback = at::addGlobalCallback(at::RecordFunctionCallback(enter, exit).needsIds(true));
}

std::vector<msptiActivityKind> kindsFor(const std::set<ActivityType>& types) {
  std::vector<msptiActivityKind> kinds;
  if (types.count(ActivityType::CONCURRENT_KERNEL))
    kinds = {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_COMMUNICATION, MSPTI_ACTIVITY_KIND_ACL_API,
             MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
  if (types.count(ActivityType::GPU_MEMCPY)) kinds.push_back(MSPTI_ACTIVITY_KIND_MEMCPY);
  if (types.count(ActivityType::GPU_MEMSET)) kinds.push_back(MSPTI_ACTIVITY_KIND_MEMSET);
  return kinds;
}

}  // namespace

class MsptiActivityProfiler : public libkineto::IActivityProfilerSession {
 public:
  explicit MsptiActivityProfiler(std::set<ActivityType> types) : types_(std::move(types)) {}

  void start() override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_events.clear();
      g_externalOf.clear();
      g_sites.clear();
    }
    const Mspti* m = mspti();
    if (m == nullptr) {
      errors_.push_back("libmspti.so not available - mspti session inactive");
      return;
    }
    if (m->subscribe(&g_subscriber, nullptr, nullptr) != MSPTI_SUCCESS) errors_.push_back("msptiSubscribe failed");
    if (m->registerCallbacks(onRequest, onComplete) != MSPTI_SUCCESS)
      errors_.push_back("msptiActivityRegisterCallbacks failed");
    for (auto kind : kindsFor(types_))
      if (m->enable(kind) != MSPTI_SUCCESS) errors_.push_back("msptiActivityEnable failed");
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_active = true;
    }
    g_pushes = 0;
    g_pops = 0;
    installOpCallback();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    {
      std::lock_guard<std::mutex> lock(g_mutex);
      g_active = false;
    }
    if (g_callback != 0) {
      at::removeCallback(g_callback);
      g_callback = 0;
    }
    const Mspti* m = mspti();
    if (m == nullptr) return;
    auto count = [] {
      std::lock_guard<std::mutex> lock(g_mutex);
      return g_events.size();
    };
    size_t seen = count();
    for (int polls = 0, quiet = 0; polls < 400 && quiet < 3; ++polls) {
      m->flushAll(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
      const size_t now = count();
      quiet = now == seen ? quiet + 1 : 0;
      seen = now;
    }
    for (auto kind : kindsFor(types_)) m->disable(kind);
    if (g_subscriber != nullptr) {
      m->unsubscribe(g_subscriber);
      g_subscriber = nullptr;
    }
    m->flushAll(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { emit(logger, 0, 0); }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback, int64_t startNs,
                    int64_t endNs) override {
    emit(logger, startNs, endNs);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0x1000000, "NPU", "Ascend NPU"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::set<std::pair<uint32_t, uint32_t>> lanes;
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& e : g_events)
      if (e.type == ActivityType::CONCURRENT_KERNEL && lanes.emplace(e.device, e.stream).second)
        out.push_back({e.stream, e.stream, e.device, "NPU stream " + std::to_string(e.stream)});
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  void emit(libkineto::ActivityLogger& logger, int64_t startNs, int64_t endNs) {
    std::lock_guard<std::mutex> lock(g_mutex);
    const bool window = startNs > 0 && endNs > startNs;
    std::set<uint64_t> flowStarted;
    int64_t nextId = int64_t{1} << 30;
    for (const auto& e : g_events) {
      if (window && (e.endNs < startNs || e.startNs > endNs)) continue;
      libkineto::GenericTraceActivity act;
      act.activityType = e.type;
      act.activityName = e.name;
      act.startTime = e.startNs;
      act.endTime = e.endNs;
      act.id = static_cast<int32_t>(nextId++);
      act.device = static_cast<int32_t>(e.device);
      act.resource = static_cast<int32_t>(e.stream);
      auto ext = g_externalOf.find(e.msptiCorrelation);
      if (e.msptiCorrelation != 0 && ext != g_externalOf.end()) {
        const uint64_t op = ext->second;
        act.flow.id = static_cast<uint32_t>(op);
        act.flow.type = libkineto::kLinkAsyncCpuGpu;
        act.flow.start = 0;
        auto site = g_sites.find(op);
        if (site != g_sites.end() && flowStarted.insert(op).second) {
          libkineto::GenericTraceActivity tail;
          tail.activityType = ActivityType::PRIVATEUSE1_RUNTIME;
          tail.activityName = e.name;
          tail.startTime = tail.endTime = e.startNs;
          tail.id = static_cast<int32_t>(op);
          tail.device = site->second.pid;
          tail.resource = site->second.tid;
          tail.flow.id = static_cast<uint32_t>(op);
          tail.flow.type = libkineto::kLinkAsyncCpuGpu;
          tail.flow.start = 1;
          tail.log(logger);
        }
      }
      if (!e.kernelType.empty()) act.addMetadataQuoted("type", e.kernelType);
      act.addMetadata("streamId", std::to_string(e.stream));
      act.log(logger);
    }
  }

  std::set<ActivityType> types_;
  std::vector<std::string> errors_;
};

class MsptiActivityProfilerPoc : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return available_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    const bool device = types.count(ActivityType::CONCURRENT_KERNEL) || types.count(ActivityType::GPU_MEMCPY) ||
                        types.count(ActivityType::GPU_MEMSET) || types.count(ActivityType::GPU_USER_ANNOTATION);
    if (!device) return nullptr;
    return std::make_unique<MsptiActivityProfiler>(types);
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t, const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  const std::string name_ = "mspti";
  const std::set<ActivityType> available_{ActivityType::CONCURRENT_KERNEL};
};

#ifdef STANDIN_VIA_TORCH_REGISTRY
REGISTER_PRIVATEUSE1_PROFILER(MsptiActivityProfilerPoc);
#else
namespace {
struct RegisterWithKineto {
  RegisterWithKineto() {
    libkineto::api().registerProfilerFactory(
        []() -> std::unique_ptr<libkineto::IActivityProfiler> { return std::make_unique<MsptiActivityProfilerPoc>(); });
  }
} g_registerWithKineto;
}  // namespace
#endif

}  // namespace STANDIN_NAMESPACE
