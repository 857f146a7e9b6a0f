// Runtime of the simulated NPU: the PrivateUse1 device that torch_mspti.sim.enable() names "npu".
//
// Memory is host memory; "kernels" are placed on the simulated device timeline of libmspti_sim.so,
// which this library reaches only through dlopen/dlsym (never linked), so that the device and the
// profiler plugin drive the very same in-process simulator.
//
// Launch modes (as torch_npu has):
//   direct  the launch happens on the op's own thread, inside the op;
//   queued  the op enqueues the launch and returns; one worker thread launches later, in FIFO
//           order, like torch_npu's task queue (TASK_QUEUE_ENABLE=1, its default).
// Kernel launches, copies (aclrtMemcpyAsync), collectives and event records go through the queue;
// synchronize, allocation and the other runtime calls are made by the calling thread. Each of
// them reports to MSPTI as the CANN runtime does (src/sim/README.md, "Records and threads").
// Every function here is thread-safe.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <string>

namespace torch_mspti::sim {

enum class LaunchMode { kDirect, kQueued };

struct Config {
  int device_count = 2;
  LaunchMode mode = LaunchMode::kQueued;
  double duration_scale = 1.0;      // kernel duration = measured host compute time * scale
  int64_t min_duration_ns = 2000;   // lower bound of a kernel's duration
  int64_t fixed_duration_ns = 0;    // > 0: every kernel lasts exactly this (model instead of measure)
  int64_t queue_pickup_ns = 20000;  // queued mode: worker's delay between dequeue and launch
  int64_t housekeeping_every = 64;  // every Nth allocation on a device triggers a housekeeping kernel
};

// Loads the simulator (dlopen RTLD_NOW|RTLD_LOCAL; never closed) and applies `cfg`.
// May be called again with another config; the simulator path must then be the same.
void configure(const std::string& simulator_path, const Config& cfg);
bool configured();
Config config();

// The host-memory allocator of the npu device (NpuSimGuard.cpp).
c10::Allocator* device_allocator();
// Host memory for one block of `nbytes` on `device`, accounted by note_allocation; free it with
// free_device_block (which also takes memory that is not such a block: std::free). The memory is
// 64-byte aligned; nullptr for nbytes == 0. c10::Error when out of memory.
void* allocate_device_block(c10::DeviceIndex device, size_t nbytes);
void free_device_block(void* ptr);

// While an npu op runs its CPU implementation on this thread (NpuSimCall.h), the CPU allocator
// serves the op's CPU allocations (its results, which become npu tensors, and its temporaries,
// which would be device workspace) as blocks of `device`, so profile_memory sees them as npu
// memory. Installed once by configure() (NpuSimOpMemory.cpp); scopes nest.
class OpMemoryScope {
 public:
  explicit OpMemoryScope(const c10::DeviceIndex* device);  // *device read at each allocation (< 0: current)
  ~OpMemoryScope();
  OpMemoryScope(const OpMemoryScope&) = delete;
  OpMemoryScope& operator=(const OpMemoryScope&) = delete;

 private:
  const c10::DeviceIndex* previous_;
};
void install_op_memory_allocator();

// Registers the CPU fallback as the npu kernel of ops whose composite kernel would otherwise
// route them through their out= variant (NpuSimFallback.cpp). Called once by configure().
void install_direct_fallbacks();

// Wall clock (CLOCK_REALTIME, ns since the epoch): the simulator's time base.
uint64_t now_ns();

// Per-thread current device and current stream (stream ids >= 1; 1 is a device's default stream).
// Stream ids per device: 1 default, 2..5 the pool (getStreamFromGlobalPool), 6 the communication
// stream, then new streams (getNewStream) count up from 2 and skip 6.
constexpr int64_t kDefaultStreamId = 1;
constexpr int64_t kPoolSize = 4;
constexpr int64_t kCommunicationStreamId = 2 + kPoolSize;
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
int64_t current_stream_id(c10::DeviceIndex index);
void set_current_stream_id(c10::DeviceIndex index, int64_t id);
int64_t new_stream_id(c10::DeviceIndex index);     // 2, 3, ... per device
int64_t pooled_stream_id(c10::DeviceIndex index);  // round robin over a small pool
void check_device(c10::DeviceIndex index);

// Kernel launch on (device, stream). `name`/`type` must be string literals or interned strings.
// duration_ns is the total device time; `count` kernels share it back to back.
void launch(const char* name, const char* type, c10::DeviceIndex device, int64_t stream, uint64_t duration_ns,
            uint32_t count = 1);
// Launch on a helper thread that never runs an op (allocator/housekeeping work).
void launch_housekeeping(const char* name, const char* type, c10::DeviceIndex device);
// The caching allocator's model (NpuSimMemory.cpp, docs/torch_npu.md 1). A block of an
// allocation of `nbytes` bytes: nbytes + 32 rounded up to a multiple of 512 (at least 512).
uint64_t round_block_size(uint64_t nbytes);
// Accounts the block `ptr` of `block_bytes` bytes to `device` (c10::Error for an index outside
// [0, 16)) and reports it to torch's profiler (c10::reportMemoryUsageToProfiler, npu device,
// totals after the change); an "aclrtMalloc" runtime call on the allocating thread whenever the
// allocated bytes outgrow the reserved segments, which grow in 2 MiB steps and are never given
// back but by empty_cache(); housekeeping cadence.
void note_allocation(c10::DeviceIndex device, void* ptr, uint64_t block_bytes);
// Frees the block `ptr` in the accounts and reports it (negative size). false when `ptr` is not
// a block of the device (nothing done).
bool note_free(void* ptr);
// Per-device statistics with torch_npu's meanings (torch.npu.memory_allocated & co.), bytes.
struct MemoryStats {
  uint64_t allocated = 0;       // bytes of live blocks
  uint64_t reserved = 0;        // bytes of segments held from the runtime
  uint64_t peak_allocated = 0;  // since start or reset_peak_memory_stats
  uint64_t peak_reserved = 0;
  uint64_t allocation_count = 0;  // blocks allocated, ever
  uint64_t free_count = 0;        // blocks freed, ever
};
MemoryStats memory_stats(c10::DeviceIndex device);  // c10::Error for an invalid index
void reset_peak_memory_stats(c10::DeviceIndex device);
// Gives unused reserved segments back ("aclrtFree" once per device that had any).
void empty_cache();

// Copy kinds (msptiActivityMemcpyKind values, mspti.md 3.3).
enum class CopyKind : uint32_t { kHostToHost = 1, kHostToDevice = 2, kDeviceToHost = 3, kDeviceToDevice = 4 };
// An aclrtMemcpyAsync of `bytes` on (device, stream): a DMA task on the timeline (never a kernel)
// that MSPTI reports as a MEMCPY record only with a process-start LD_PRELOAD of libmspti
// (msptiSimMemcpy). Goes through the task queue in queued mode.
void memcpy_async(CopyKind kind, uint64_t bytes, c10::DeviceIndex device, int64_t stream, uint64_t duration_ns);

// A collective as the hccl backend issues it (msptiSimLaunchCommunication): like launch(), through
// the task queue in queued mode (launched later by the worker) or on the calling thread in direct
// mode, normally on communication_stream_id(device). An empty `api_name` lets the simulator derive
// the HCCL API name from `name`. A non-empty `mstx_message` wraps the launch, where it runs (the
// worker in queued mode, as torch_npu's task queue runs its HCCL call), in an mstx range of domain
// "communication" on the launch's stream with that message, as ProcessGroupHCCL does
// (docs/torch_npu.md 5); the simulator writes its MARKER records only while MARKER is enabled.
// Returns the correlation id in direct mode (0 when none was minted), and 0 in queued mode, where
// the worker mints it later.
uint64_t launch_communication(const std::string& name, const std::string& alg, const std::string& comm_name,
                              uint32_t data_type, uint64_t count, c10::DeviceIndex device, int64_t stream,
                              uint64_t duration_ns, const std::string& api_name, const std::string& mstx_message);
int64_t communication_stream_id(c10::DeviceIndex device);

// A runtime API call that launches nothing, made by the calling thread (msptiSimRuntimeCall):
// MSPTI reports an API record carrying the thread's current correlation id. The call takes
// `host_ns` (the thread sleeps that long).
void runtime_call(const char* name, uint64_t host_ns = 0);

// The device memory the runtime hands out, made by the calling thread (msptiSimMemory): an
// aclrtMalloc of `bytes` at `address` on `device`, or (release) the aclrtFree of it. With
// libmspti.so preloaded MSPTI writes a MEMORY record for each; always an API record.
void runtime_memory(bool release, uint64_t address, uint64_t bytes, c10::DeviceIndex device);

// What the device reports about itself (torch.npu.get_device_properties), modelled on an Ascend
// 910B3: see NpuSimProperties.cpp.
struct DeviceProperties {
  std::string name;
  uint64_t total_memory;  // bytes
  int64_t cube_core_num;  // AI cores (cube units)
  int64_t vector_core_num;
  uint64_t l2_cache_size;  // bytes
};
DeviceProperties device_properties(c10::DeviceIndex device);  // c10::Error for an invalid index

// Duration from a measured host time (applies the configured model).
uint64_t kernel_duration(uint64_t measured_ns);

// Waits until every launch enqueued so far has been launched (no-op in direct mode).
void drain_queue();
// Drains the queue, then waits until the timeline of `device` (all devices when < 0) caught up,
// reporting "aclrtSynchronizeDevice" (the wait inside its host span).
void synchronize_device(int device);
// Same for one stream: "aclrtSynchronizeStream".
void synchronize_stream(c10::DeviceIndex device, int64_t stream);
bool stream_idle(c10::DeviceIndex device, int64_t stream);

// Events: a recorded event holds the device time at which the stream reaches it. Recording reports
// "aclrtRecordEvent" from the thread that makes it (the worker in queued mode, when it reaches the
// record), synchronizing "aclrtSynchronizeEvent" from the caller.
struct SimEvent;
SimEvent* event_create();
void event_destroy(SimEvent* ev);
void event_record(SimEvent* ev, c10::DeviceIndex device, int64_t stream);
bool event_query(SimEvent* ev);
void event_synchronize(SimEvent* ev);
double event_elapsed_ms(SimEvent* start, SimEvent* end);

// Counters kept by the device (independent of the simulator's own statistics).
struct DeviceCounters {
  uint64_t ops = 0;               // op executions that launched kernels
  uint64_t launches = 0;          // launch calls made to the simulator
  uint64_t kernels = 0;           // kernels those launches covered
  uint64_t housekeeping = 0;      // launches made outside any op
  uint64_t queued_max_depth = 0;  // deepest the task queue got
};
DeviceCounters counters();
void count_op();

}  // namespace torch_mspti::sim
