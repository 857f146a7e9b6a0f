// Simulated NPU runtime: simulator binding, per-thread device/stream state, launches (kernels,
// copies, collectives) through the task queues, runtime calls, synchronization and events. See
// NpuSimRuntime.h; the queues are NpuSimTaskQueue.cpp, the allocator's bookkeeping NpuSimMemory.cpp.
#include "NpuSimRuntime.h"
#include "NpuSimCann.h"
#include "NpuSimTaskQueue.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

namespace torch_mspti::sim {
namespace {

// The simulator's control API (src/sim/include/mspti_sim.h), resolved with dlsym.
using LaunchFn = uint64_t (*)(const char*, const char*, uint32_t, uint32_t, uint64_t, uint32_t);
using SyncFn = int (*)(int32_t);
using TailFn = uint64_t (*)(uint32_t, uint32_t);
using DeviceTailFn = uint64_t (*)(int32_t);
using MemcpyFn = uint64_t (*)(uint32_t, uint64_t, uint32_t, uint32_t, uint64_t, uint8_t);
using CommunicationFn = uint64_t (*)(const char*, const char*, const char*, uint32_t, uint64_t, uint32_t, uint32_t,
                                     uint64_t, const char*);
using RuntimeCallFn = void (*)(const char*, uint64_t);
using MemoryFn = uint64_t (*)(uint32_t, uint64_t, uint64_t, uint32_t);
// libms_tools_ext's mstx entry points, which the simulator exports (src/sim/MstxExports.cpp).
using DomainCreateFn = void* (*)(const char*);
using DomainRangeStartFn = uint64_t (*)(void*, const char*, void*);
using DomainRangeEndFn = void (*)(void*, uint64_t);
using StreamHandleFn = void* (*)(uint32_t, uint32_t);

constexpr int kMaxDevices = 16;

std::mutex g_config_mu;
Config g_config;  // guarded by g_config_mu; hot fields mirrored in atomics below
std::string g_sim_path;
std::atomic<bool> g_configured{false};
std::atomic<int> g_device_count{2};
std::atomic<int> g_mode{static_cast<int>(LaunchMode::kQueued)};
std::atomic<LaunchFn> g_launch{nullptr};
std::atomic<SyncFn> g_sync{nullptr};
std::atomic<TailFn> g_tail{nullptr};
std::atomic<DeviceTailFn> g_device_tail{nullptr};
std::atomic<MemcpyFn> g_memcpy{nullptr};
std::atomic<CommunicationFn> g_communication{nullptr};
std::atomic<RuntimeCallFn> g_runtime_call{nullptr};
std::atomic<MemoryFn> g_memory{nullptr};
// Optional (nullptr when the simulator lacks them: collectives then open no mstx range).
std::atomic<DomainCreateFn> g_domain_create{nullptr};
std::atomic<DomainRangeStartFn> g_domain_range_start{nullptr};
std::atomic<DomainRangeEndFn> g_domain_range_end{nullptr};
std::atomic<StreamHandleFn> g_stream_handle{nullptr};

std::array<std::atomic<int64_t>, kMaxDevices> g_next_stream{};
std::array<std::atomic<uint32_t>, kMaxDevices> g_pool_cursor{};

std::atomic<uint64_t> c_ops{0}, c_launches{0}, c_kernels{0}, c_housekeeping{0};

thread_local c10::DeviceIndex t_device = 0;
thread_local std::array<int64_t, kMaxDevices> t_stream = [] {
  std::array<int64_t, kMaxDevices> a{};
  a.fill(kDefaultStreamId);
  return a;
}();

void sleep_until_ns(uint64_t t) {
  for (uint64_t n = now_ns(); n < t; n = now_ns()) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(std::min<uint64_t>(t - n, 2000000)));
  }
}

uint64_t stream_tail(int device, int64_t stream) {
  TailFn fn = g_tail.load();
  return fn ? fn(static_cast<uint32_t>(device), static_cast<uint32_t>(stream)) : 0;
}

// Wait from now until `t`, 0 when it has passed.
uint64_t wait_until(uint64_t t) {
  const uint64_t now = now_ns();
  return t > now ? t - now : 0;
}

void do_launch(const char* name, const char* type, int device, int64_t stream, uint64_t dur, uint32_t count) {
  LaunchFn fn = g_launch.load();
  if (fn == nullptr) return;
  fn(name, type, static_cast<uint32_t>(device), static_cast<uint32_t>(stream), dur / count, count);
  cann_launch(name, device, stream, dur, count);  // real-MSPTI mode only (NpuSimCann.h)
  c_launches++;
  c_kernels += count;
}

void do_memcpy(uint32_t kind, uint64_t bytes, int device, int64_t stream, uint64_t dur) {
  if (MemcpyFn fn = g_memcpy.load()) {
    fn(kind, bytes, static_cast<uint32_t>(device), static_cast<uint32_t>(stream), dur, /*isAsync=*/1);
  }
}

// The "communication" mstx domain's handle, created once per process; nullptr when the simulator
// has no mstx.
void* communication_domain() {
  static void* const handle = [] {
    DomainCreateFn create = g_domain_create.load();
    return create != nullptr ? create("communication") : nullptr;
  }();
  return handle;
}

uint64_t do_communication(const CommunicationTask& c, int device, int64_t stream, uint64_t dur) {
  CommunicationFn fn = g_communication.load();
  if (fn == nullptr) return 0;
  // ProcessGroupHCCL's MstxRange: opened right before the HCCL call, on its stream, and closed
  // after it (docs/torch_npu.md 5); a range the simulator refused has id 0 and is not ended.
  void* domain = c.mstxMessage.empty() ? nullptr : communication_domain();
  DomainRangeStartFn start = g_domain_range_start.load();
  StreamHandleFn handle = g_stream_handle.load();
  uint64_t range = 0;
  if (domain != nullptr && start != nullptr && handle != nullptr) {
    range = start(domain, c.mstxMessage.c_str(), handle(static_cast<uint32_t>(device), static_cast<uint32_t>(stream)));
  }
  const uint64_t correlation =
      fn(c.name.c_str(), c.algType.c_str(), c.commName.c_str(), c.dataType, c.count, static_cast<uint32_t>(device),
         static_cast<uint32_t>(stream), dur, c.apiName.empty() ? nullptr : c.apiName.c_str());
  if (range != 0) {
    if (DomainRangeEndFn end = g_domain_range_end.load()) end(domain, range);
  }
  return correlation;
}

}  // namespace

struct SimEvent {
  std::atomic<uint64_t> time{0};           // device time the stream reaches the event (0: not recorded)
  std::atomic<uint64_t> ticket{0};         // queue ticket of the pending record task (queued mode)
  std::atomic<TaskQueue*> queue{nullptr};  // the queue that ticket belongs to
};

namespace {

void do_event_record(SimEvent* ev, int device, int64_t stream) {
  runtime_call("aclrtRecordEvent");
  ev->time = std::max(now_ns(), stream_tail(device, stream));
}

// Executor of both task queues (worker threads).
void run_task(const Task& t) {
  switch (t.kind) {
    case TaskKind::kKernels: do_launch(t.name, t.type, t.device, t.stream, t.duration, t.count); break;
    case TaskKind::kMemcpy: do_memcpy(t.copyKind, t.bytes, t.device, t.stream, t.duration); break;
    case TaskKind::kCommunication: do_communication(*t.communication, t.device, t.stream, t.duration); break;
    case TaskKind::kEventRecord: do_event_record(t.event, t.device, t.stream); break;
  }
}

bool queued() { return g_mode.load() == static_cast<int>(LaunchMode::kQueued); }

uint64_t pickup_deadline() {
  std::lock_guard<std::mutex> g(g_config_mu);
  return now_ns() + static_cast<uint64_t>(g_config.queue_pickup_ns);
}

// A task for the launch queue: the worker picks it up no earlier than queue_pickup_ns from now.
Task queued_task(TaskKind kind, int device, int64_t stream, uint64_t duration_ns) {
  Task t;
  t.kind = kind;
  t.device = device;
  t.stream = stream;
  t.duration = duration_ns;
  t.notBefore = pickup_deadline();
  return t;
}

// Waits for an event's record task, unless that task belonged to a queue replaced since (fork).
void wait_for_record(SimEvent* ev) {
  const uint64_t t = ev->ticket.load();
  if (t != 0 && ev->queue.load() == &launch_queue()) launch_queue().wait(t);
}

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void configure(const std::string& path, const Config& cfg) {
  TORCH_CHECK(cfg.device_count >= 1 && cfg.device_count <= kMaxDevices, "simulated NPU: device_count must be in [1, ",
              kMaxDevices, "], got ", cfg.device_count);
  init_task_queues(&run_task);
  std::lock_guard<std::mutex> g(g_config_mu);
  if (g_launch.load() == nullptr) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
    TORCH_CHECK(h != nullptr, "simulated NPU: cannot load the MSPTI simulator '", path, "': ", dlerror());
    auto sym = [&](const char* n) {
      void* p = dlsym(h, n);
      TORCH_CHECK(p != nullptr, "simulated NPU: '", path, "' does not export ", n,
                  "; it is not a torch-mspti MSPTI simulator of this version (rebuild or reinstall torch-mspti)");
      return p;
    };
    g_sync = reinterpret_cast<SyncFn>(sym("msptiSimSynchronize"));
    g_tail = reinterpret_cast<TailFn>(sym("msptiSimStreamTail"));
    g_device_tail = reinterpret_cast<DeviceTailFn>(sym("msptiSimDeviceTail"));
    g_memcpy = reinterpret_cast<MemcpyFn>(sym("msptiSimMemcpy"));
    g_communication = reinterpret_cast<CommunicationFn>(sym("msptiSimLaunchCommunication"));
    g_runtime_call = reinterpret_cast<RuntimeCallFn>(sym("msptiSimRuntimeCall"));
    g_memory = reinterpret_cast<MemoryFn>(sym("msptiSimMemory"));
    g_domain_create = reinterpret_cast<DomainCreateFn>(dlsym(h, "mstxDomainCreateA"));
    g_domain_range_start = reinterpret_cast<DomainRangeStartFn>(dlsym(h, "mstxDomainRangeStartA"));
    g_domain_range_end = reinterpret_cast<DomainRangeEndFn>(dlsym(h, "mstxDomainRangeEnd"));
    g_stream_handle = reinterpret_cast<StreamHandleFn>(dlsym(h, "msptiSimStreamHandle"));
    sym("msptiSimLaunchKernel");  // part of the contract, though launches go through the batch form
    g_launch = reinterpret_cast<LaunchFn>(sym("msptiSimLaunchKernels"));
    g_sim_path = path;
  } else {
    TORCH_CHECK(path.empty() || path == g_sim_path, "simulated NPU: already bound to simulator '", g_sim_path,
                "', cannot switch to '", path, "'");
  }
  install_direct_fallbacks();
  install_op_memory_allocator();
  drain_queue();
  g_config = cfg;
  g_device_count = cfg.device_count;
  g_mode = static_cast<int>(cfg.mode);
  g_configured = true;
}

bool configured() { return g_configured.load(); }

Config config() {
  std::lock_guard<std::mutex> g(g_config_mu);
  return g_config;
}

void check_device(c10::DeviceIndex index) {
  TORCH_CHECK(index >= 0 && index < g_device_count.load(), "simulated NPU: invalid device index ",
              static_cast<int>(index), " (device_count=", g_device_count.load(),
              "). The simulated NPU has as many devices as torch_mspti.sim.enable(device_count=N) was "
              "given (1 to 16, default 2): pass N at the first enable() of the process, e.g. "
              "device_count=int(os.environ['LOCAL_WORLD_SIZE']) under torchrun");
}

c10::DeviceIndex current_device() { return t_device; }
void set_current_device(c10::DeviceIndex index) {
  check_device(index);
  t_device = index;
}
int64_t current_stream_id(c10::DeviceIndex index) { return t_stream.at(index); }
void set_current_stream_id(c10::DeviceIndex index, int64_t id) {
  TORCH_CHECK(id >= 1, "simulated NPU: stream ids start at 1, got ", id);
  t_stream.at(index) = id;
}
int64_t new_stream_id(c10::DeviceIndex index) {
  check_device(index);
  const int64_t id = 2 + g_next_stream[index]++;
  return id >= kCommunicationStreamId ? id + 1 : id;  // the communication stream is nobody else's
}
int64_t pooled_stream_id(c10::DeviceIndex index) {
  check_device(index);
  // The pool is ids 2..(1+kPoolSize); new streams taken after it was first used come after.
  int64_t expected = 0;
  g_next_stream[index].compare_exchange_strong(expected, kPoolSize);
  return 2 + static_cast<int64_t>(g_pool_cursor[index]++ % kPoolSize);
}
int64_t communication_stream_id(c10::DeviceIndex device) {
  check_device(device);
  return kCommunicationStreamId;
}

uint64_t kernel_duration(uint64_t measured_ns) {
  std::lock_guard<std::mutex> g(g_config_mu);
  if (g_config.fixed_duration_ns > 0) return static_cast<uint64_t>(g_config.fixed_duration_ns);
  const auto d = static_cast<uint64_t>(static_cast<double>(measured_ns) * g_config.duration_scale);
  return std::max<uint64_t>(d, static_cast<uint64_t>(g_config.min_duration_ns));
}

void launch(const char* name, const char* type, c10::DeviceIndex device, int64_t stream, uint64_t duration_ns,
            uint32_t count) {
  if (!g_configured.load() || count == 0) return;
  if (!queued()) {
    do_launch(name, type, device, stream, duration_ns, count);
    return;
  }
  Task t = queued_task(TaskKind::kKernels, device, stream, duration_ns);
  t.name = name;
  t.type = type;
  t.count = count;
  launch_queue().push(std::move(t));
}

void memcpy_async(CopyKind kind, uint64_t bytes, c10::DeviceIndex device, int64_t stream, uint64_t duration_ns) {
  if (!g_configured.load()) return;
  if (!queued()) {
    do_memcpy(static_cast<uint32_t>(kind), bytes, device, stream, duration_ns);
    return;
  }
  Task t = queued_task(TaskKind::kMemcpy, device, stream, duration_ns);
  t.copyKind = static_cast<uint32_t>(kind);
  t.bytes = bytes;
  launch_queue().push(std::move(t));
}

uint64_t launch_communication(const std::string& name, const std::string& alg, const std::string& comm_name,
                              uint32_t data_type, uint64_t count, c10::DeviceIndex device, int64_t stream,
                              uint64_t duration_ns, const std::string& api_name, const std::string& mstx_message) {
  check_device(device);
  TORCH_CHECK(stream >= 1, "simulated NPU: stream ids start at 1, got ", stream);
  if (!g_configured.load()) return 0;
  auto collective = std::make_shared<const CommunicationTask>(
      CommunicationTask{name, alg, comm_name, api_name, data_type, count, mstx_message});
  if (!queued()) return do_communication(*collective, device, stream, duration_ns);
  Task t = queued_task(TaskKind::kCommunication, device, stream, duration_ns);
  t.communication = std::move(collective);
  launch_queue().push(std::move(t));
  return 0;
}

void runtime_call(const char* name, uint64_t host_ns) {
  if (RuntimeCallFn fn = g_runtime_call.load()) {
    fn(name, host_ns);
  } else if (host_ns > 0) {
    sleep_until_ns(now_ns() + host_ns);
  }
}

void runtime_memory(bool release, uint64_t address, uint64_t bytes, c10::DeviceIndex device) {
  if (MemoryFn fn = g_memory.load()) fn(release ? 1 : 0, address, bytes, static_cast<uint32_t>(device));
}

void launch_housekeeping(const char* name, const char* type, c10::DeviceIndex device) {
  if (!g_configured.load()) return;
  c_housekeeping++;
  Task t;
  t.name = name;
  t.type = type;
  t.device = device;
  t.stream = kDefaultStreamId;
  t.duration = 3000;
  housekeeping_queue().push(std::move(t));
}

void drain_queue() {
  launch_queue().drain();
  housekeeping_queue().drain();
}

void synchronize_device(int device) {
  drain_queue();
  DeviceTailFn tail = g_device_tail.load();
  runtime_call("aclrtSynchronizeDevice", tail ? wait_until(tail(device)) : 0);
  if (SyncFn fn = g_sync.load()) fn(device);
}

void synchronize_stream(c10::DeviceIndex device, int64_t stream) {
  drain_queue();
  const uint64_t tail = stream_tail(device, stream);
  runtime_call("aclrtSynchronizeStream", wait_until(tail));
  sleep_until_ns(tail);
}

bool stream_idle(c10::DeviceIndex device, int64_t stream) {
  drain_queue();
  return stream_tail(device, stream) <= now_ns();
}

SimEvent* event_create() { return new SimEvent(); }

void event_destroy(SimEvent* ev) {
  if (ev == nullptr) return;
  wait_for_record(ev);
  delete ev;
}

void event_record(SimEvent* ev, c10::DeviceIndex device, int64_t stream) {
  if (!queued() || !g_configured.load()) {
    ev->ticket = 0;
    do_event_record(ev, device, stream);
    return;
  }
  ev->time = 0;
  Task t;
  t.kind = TaskKind::kEventRecord;
  t.device = device;
  t.stream = stream;
  t.event = ev;
  ev->queue = &launch_queue();
  ev->ticket = launch_queue().push(std::move(t));
}

bool event_query(SimEvent* ev) {
  const uint64_t t = ev->ticket.load();
  if (t != 0 && ev->queue.load() == &launch_queue() && !launch_queue().done(t)) return false;
  return ev->time.load() <= now_ns();
}

void event_synchronize(SimEvent* ev) {
  wait_for_record(ev);
  const uint64_t time = ev->time.load();
  runtime_call("aclrtSynchronizeEvent", wait_until(time));
  sleep_until_ns(time);
}

double event_elapsed_ms(SimEvent* start, SimEvent* end) {
  event_synchronize(start);
  event_synchronize(end);
  TORCH_CHECK(start->time.load() != 0 && end->time.load() != 0,
              "simulated NPU: both events must be recorded before elapsed_time()");
  return (static_cast<double>(end->time.load()) - static_cast<double>(start->time.load())) / 1e6;
}

DeviceCounters counters() {
  return DeviceCounters{c_ops.load(), c_launches.load(), c_kernels.load(), c_housekeeping.load(),
                        launch_queue().maxDepth()};
}
void count_op() { c_ops++; }

}  // namespace torch_mspti::sim
