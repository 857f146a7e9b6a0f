// Simulated NPU runtime: simulator binding, per-thread device/stream state, the launch task queue,
// the housekeeping thread, synchronization and events. See NpuSimRuntime.h.
#include "NpuSimRuntime.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace torch_mspti::sim {
namespace {

using LaunchFn = uint64_t (*)(const char*, const char*, uint32_t, uint32_t, uint64_t, uint32_t);
using SyncFn = int (*)(int32_t);
using TailFn = uint64_t (*)(uint32_t, uint32_t);

constexpr int kMaxDevices = 16;
constexpr int kPoolSize = 4;

std::mutex g_config_mu;
Config g_config;  // guarded by g_config_mu; hot fields mirrored in atomics below
std::string g_sim_path;
std::atomic<bool> g_configured{false};
std::atomic<int> g_device_count{2};
std::atomic<int> g_mode{static_cast<int>(LaunchMode::kQueued)};
std::atomic<LaunchFn> g_launch{nullptr};
std::atomic<SyncFn> g_sync{nullptr};
std::atomic<TailFn> g_tail{nullptr};

std::array<std::atomic<int64_t>, kMaxDevices> g_next_stream{};
std::array<std::atomic<uint32_t>, kMaxDevices> g_pool_cursor{};
std::array<std::atomic<uint64_t>, kMaxDevices> g_allocations{};

std::atomic<uint64_t> c_ops{0}, c_launches{0}, c_kernels{0}, c_housekeeping{0}, c_depth{0};

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

void do_launch(const char* name, const char* type, int device, int64_t stream, uint64_t dur, uint32_t count) {
  LaunchFn fn = g_launch.load();
  if (fn == nullptr) return;
  fn(name, type, static_cast<uint32_t>(device), static_cast<uint32_t>(stream), dur / count, count);
  c_launches++;
  c_kernels += count;
}

uint64_t stream_tail(int device, int64_t stream) {
  TailFn fn = g_tail.load();
  return fn ? fn(static_cast<uint32_t>(device), static_cast<uint32_t>(stream)) : 0;
}

}  // namespace

struct SimEvent {
  std::atomic<uint64_t> time{0};    // device time the stream reaches the event (0: not recorded)
  std::atomic<uint64_t> ticket{0};  // queue ticket of the pending record task (queued mode)
};

namespace {

// A FIFO of tasks served by one detached thread. Tickets increase by one per task; a caller can
// wait until every task up to a ticket has run. Never destroyed (threads outlive static dtors).
struct Task {
  const char* name = nullptr;
  const char* type = nullptr;
  int device = 0;
  int64_t stream = 0;
  uint64_t duration = 0;
  uint32_t count = 1;
  SimEvent* event = nullptr;  // non-null: record this event instead of launching
  uint64_t not_before = 0;
};

class Worker {
 public:
  Worker() {
    std::thread([this] { loop(); }).detach();
  }

  uint64_t push(Task t) {
    std::lock_guard<std::mutex> g(mu_);
    tasks_.push_back(t);
    const uint64_t depth = tasks_.size();
    if (depth > c_depth.load()) c_depth = depth;
    cv_.notify_all();
    return ++pushed_;
  }
  void wait(uint64_t ticket) {
    std::unique_lock<std::mutex> g(mu_);
    done_cv_.wait(g, [&] { return done_ >= ticket; });
  }
  void drain() {
    std::unique_lock<std::mutex> g(mu_);
    const uint64_t target = pushed_;
    done_cv_.wait(g, [&] { return done_ >= target; });
  }
  bool done(uint64_t ticket) {
    std::lock_guard<std::mutex> g(mu_);
    return done_ >= ticket;
  }

 private:
  void loop() {
    for (;;) {
      Task t;
      {
        std::unique_lock<std::mutex> g(mu_);
        cv_.wait(g, [&] { return !tasks_.empty(); });
        t = tasks_.front();
        tasks_.pop_front();
      }
      sleep_until_ns(t.not_before);
      if (t.event != nullptr) {
        t.event->time = std::max(now_ns(), stream_tail(t.device, t.stream));
      } else {
        do_launch(t.name, t.type, t.device, t.stream, t.duration, t.count);
      }
      std::lock_guard<std::mutex> g(mu_);
      done_++;
      done_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<Task> tasks_;
  uint64_t pushed_ = 0, done_ = 0;
};

Worker& launch_queue() {
  static Worker* w = new Worker();
  return *w;
}
Worker& housekeeper() {
  static Worker* w = new Worker();
  return *w;
}

bool queued() { return g_mode.load() == static_cast<int>(LaunchMode::kQueued); }

}  // namespace

uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void configure(const std::string& path, const Config& cfg) {
  TORCH_CHECK(cfg.device_count >= 1 && cfg.device_count <= kMaxDevices, "simulated NPU: device_count must be in [1, ",
              kMaxDevices, "], got ", cfg.device_count);
  std::lock_guard<std::mutex> g(g_config_mu);
  if (g_launch.load() == nullptr) {
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);  // never closed
    TORCH_CHECK(h != nullptr, "simulated NPU: cannot load the MSPTI simulator '", path, "': ", dlerror());
    auto sym = [&](const char* n) {
      void* p = dlsym(h, n);
      TORCH_CHECK(p != nullptr, "simulated NPU: '", path, "' does not export ", n);
      return p;
    };
    g_sync = reinterpret_cast<SyncFn>(sym("msptiSimSynchronize"));
    g_tail = reinterpret_cast<TailFn>(sym("msptiSimStreamTail"));
    sym("msptiSimLaunchKernel");  // part of the contract, though launches go through the batch form
    g_launch = reinterpret_cast<LaunchFn>(sym("msptiSimLaunchKernels"));
    g_sim_path = path;
  } else {
    TORCH_CHECK(path.empty() || path == g_sim_path, "simulated NPU: already bound to simulator '", g_sim_path,
                "', cannot switch to '", path, "'");
  }
  install_direct_fallbacks();
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
              static_cast<int>(index), " (device_count=", g_device_count.load(), ")");
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
  return 2 + g_next_stream[index]++;
}
int64_t pooled_stream_id(c10::DeviceIndex index) {
  check_device(index);
  // The pool is ids 2..(1+kPoolSize); new streams taken after it was first used come after.
  int64_t expected = 0;
  g_next_stream[index].compare_exchange_strong(expected, kPoolSize);
  return 2 + static_cast<int64_t>(g_pool_cursor[index]++ % kPoolSize);
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
  int64_t pickup;
  {
    std::lock_guard<std::mutex> g(g_config_mu);
    pickup = g_config.queue_pickup_ns;
  }
  launch_queue().push(
      Task{name, type, device, stream, duration_ns, count, nullptr, now_ns() + static_cast<uint64_t>(pickup)});
}

void launch_housekeeping(const char* name, const char* type, c10::DeviceIndex device) {
  if (!g_configured.load()) return;
  c_housekeeping++;
  housekeeper().push(Task{name, type, device, kDefaultStreamId, 3000, 1, nullptr, 0});
}

void note_allocation(c10::DeviceIndex device) {
  if (device < 0 || device >= kMaxDevices) return;
  const uint64_t n = g_allocations[device]++;
  int64_t every;
  {
    std::lock_guard<std::mutex> g(g_config_mu);
    every = g_config.housekeeping_every;
  }
  // The first allocation on a device initialises its memory pool; later ones clear blocks now
  // and then, as the allocator of a real device does, on its own thread.
  if (n == 0 || (every > 0 && n % static_cast<uint64_t>(every) == 0)) {
    launch_housekeeping("MemSet", "KERNEL_AIVEC", device);
  }
}

void drain_queue() {
  launch_queue().drain();
  housekeeper().drain();
}

void synchronize_device(int device) {
  drain_queue();
  if (SyncFn fn = g_sync.load()) fn(device);
}

void synchronize_stream(c10::DeviceIndex device, int64_t stream) {
  drain_queue();
  sleep_until_ns(stream_tail(device, stream));
}

bool stream_idle(c10::DeviceIndex device, int64_t stream) {
  drain_queue();
  return stream_tail(device, stream) <= now_ns();
}

SimEvent* event_create() { return new SimEvent(); }

void event_destroy(SimEvent* ev) {
  if (ev == nullptr) return;
  if (uint64_t t = ev->ticket.load()) launch_queue().wait(t);
  delete ev;
}

void event_record(SimEvent* ev, c10::DeviceIndex device, int64_t stream) {
  if (!queued() || !g_configured.load()) {
    ev->ticket = 0;
    ev->time = std::max(now_ns(), stream_tail(device, stream));
    return;
  }
  ev->time = 0;
  ev->ticket = launch_queue().push(Task{nullptr, nullptr, device, stream, 0, 1, ev, 0});
}

bool event_query(SimEvent* ev) {
  if (uint64_t t = ev->ticket.load(); t != 0 && !launch_queue().done(t)) return false;
  return ev->time.load() <= now_ns();
}

void event_synchronize(SimEvent* ev) {
  if (uint64_t t = ev->ticket.load()) launch_queue().wait(t);
  sleep_until_ns(ev->time.load());
}

double event_elapsed_ms(SimEvent* start, SimEvent* end) {
  event_synchronize(start);
  event_synchronize(end);
  TORCH_CHECK(start->time.load() != 0 && end->time.load() != 0,
              "simulated NPU: both events must be recorded before elapsed_time()");
  return (static_cast<double>(end->time.load()) - static_cast<double>(start->time.load())) / 1e6;
}

DeviceCounters counters() {
  return DeviceCounters{c_ops.load(), c_launches.load(), c_kernels.load(), c_housekeeping.load(), c_depth.load()};
}
void count_op() { c_ops++; }

}  // namespace torch_mspti::sim
