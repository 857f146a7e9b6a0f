// Control API of libmspti_sim.so, torch-mspti's simulated MSPTI.
//
// The simulator exports the real MSPTI C ABI (third_party/mspti/include/mspti/*.h) with the real
// library's behaviour and quirks (docs/mspti.md section 11), and in addition these
// msptiSim* functions, through which host code plays the part of the CANN runtime, HCCL, the ACL
// memory API and the device: it launches kernels and collectives, issues copies, memsets and
// other runtime calls, advances a simulated device timeline that runs in real (wall-clock) time,
// and tunes delivery latency, harsh modes and faults. Nothing in the plugin core calls these
// functions; tests, the simulated NPU device, the simulated hccl backend and benchmarks do
// (ctypes or dlsym on the same loaded library). src/sim/README.md tabulates the behaviour.
//
// Units: times are ns (since the Unix epoch, CLOCK_REALTIME, where a time point is meant), sizes
// bytes. Thread-safety: every function may be called from any thread at any time. None throws.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Launch one kernel as the CANN runtime would on the calling thread:
//  * if MSPTI_ACTIVITY_KIND_KERNEL is enabled and a subscriber exists, a new correlation id is
//    minted (process-wide counter from 1, never reset) and becomes the calling thread's
//    "current" id; one EXTERNAL_CORRELATION record per non-empty external stack (top of stack)
//    is written at once if that kind is enabled; an API/RUNTIME_API record (calling tid, host
//    start/end of this call, the new id, name "LaunchKernelV2") is written if enabled;
//  * the kernel is placed on the device timeline of (device, stream):
//    start = max(now + launch latency, end of the previous kernel on that stream),
//    end = start + duration_ns, and its KERNEL record reaches the activity buffer
//    `delivery delay` after `end` (default 200 ms), from a driver-reader thread.
// `device` is the logical index the runtime user sees; records carry the physical id, mapped
// through ASCEND_RT_VISIBLE_DEVICES as the real runtime does. `name`/`type` are copied
// (interned for the life of the process, as MSPTI's hash caches are). A NULL `type` means
// "KERNEL_AICORE"; a type that does not start with "KERNEL" is a non-kernel task: as in MSPTI
// (mspti.md 4, task-track types) it mints no id and produces no record, but still runs on the
// timeline. A NULL `name` is recorded as "".
// Returns the correlation id, or 0 when no id was minted (kernel collection off): the kernel
// still executes on the timeline.
uint64_t msptiSimLaunchKernel(const char* name, const char* type, uint32_t device, uint32_t stream,
                              uint64_t duration_ns);

// Same as msptiSimLaunchKernel for a launch that covers `count` kernels (one correlation id,
// one external-correlation and API record, `count` KERNEL records back to back on the stream).
uint64_t msptiSimLaunchKernels(const char* name, const char* type, uint32_t device, uint32_t stream,
                               uint64_t duration_ns, uint32_t count);

// One collective as HCCL launches it on the calling thread (a communication node launch,
// mspti.md 4: "Communication ops get an id minted at their node launch"):
//  * while subscribed and MSPTI_ACTIVITY_KIND_COMMUNICATION is enabled, a correlation id is
//    minted (the same process-wide counter as kernels) and becomes the thread's current id; one
//    EXTERNAL_CORRELATION record per non-empty external stack is written at once (as for kernels);
//  * the collective runs on (device, stream) of the timeline for duration_ns, and with an id its
//    msptiActivityCommunication record (dataType, count, ds = {physical device, stream}, start,
//    end, algType, name, commName, correlationId) reaches the buffer `delivery delay` after its
//    end, from the driver-reader thread, under the same drop rules as KERNEL records: it needs the
//    COMMUNICATION device tasks (Enable(COMMUNICATION) while subscribed, option
//    require_enable_after_subscribe), Disable(KERNEL or COMMUNICATION) pulls ended ones when
//    disable_pulls is on (both kinds travel on the SOC log channel), records due while
//    COMMUNICATION is disabled are dropped when drop_after_disable is on, Unsubscribe drops those
//    still in flight;
//  * then, while subscribed, one API record (RUNTIME_API, or API if only that is on) named
//    `api_name` with the host span of the call and the thread's current id. NULL `api_name`:
//    derived from `name` ("hcom_allReduce__360_0_1", "allreduce", "all_reduce" -> "HcclAllReduce";
//    unknown ops -> "Hccl" + CamelCase).
// dataType: a msptiCommunicationDataType value (recorded as given); count: elements. All strings
// are copied (interned for the life of the process); NULL is recorded as "".
// Returns the correlation id, or 0 when none was minted (the collective still runs).
uint64_t msptiSimLaunchCommunication(const char* name, const char* algType, const char* commName, uint32_t dataType,
                                     uint64_t count, uint32_t device, uint32_t stream, uint64_t duration_ns,
                                     const char* api_name);

// A host<->device or device<->device copy of `bytes` bytes issued through the ACL memory API
// (mspti.md 4, 5.5: memcpy records "take the thread's current id, minted by the interposed ACL
// memory call, which needs LD_PRELOAD"). The copy always runs on (device, stream) of the timeline
// for duration_ns as a DMA task (never a kernel: no KERNEL record, kernels_launched unchanged).
// Only when LD_PRELOAD named libmspti at load (a process-start preload; msptiSimReloadEnvironment
// re-reads it), a subscriber exists and MSPTI_ACTIVITY_KIND_MEMCPY is enabled: an id is minted
// (the thread's current id), external records are written, and a msptiActivityMemcpy record
// (copyKind, bytes, start, end, deviceId (physical), streamId, correlationId, isAsync) is written:
// with option copies_at_call_end=1 (default, as real MSPTI, mspti.md 5.7) by the calling thread as
// the call returns, start/end = the host call's span (CLOCK_REALTIME); with 0 as a device record
// (the copy's device time) `delivery delay` after the copy ends. Either way dropped if MEMCPY is
// disabled by then and drop_after_disable is on, or on Unsubscribe. Without the preload: no id and no record, silently,
// as the real library (on generations < 26.0 Enable(MEMCPY) even succeeds; 26.x refuses it with
// MSPTI_ERROR_WITHOUT_LD_PRELOAD). While subscribed with an API kind on, an API record named
// "aclrtMemcpyAsync" (isAsync != 0) or "aclrtMemcpy" carries the thread's current id: the new one
// with the preload, a stale one (or 0) without. A synchronous copy (isAsync == 0) returns only
// once the copy has ended on the timeline, so its API record spans it.
// copyKind: a msptiActivityMemcpyKind value (0..5); any other prints an error to stderr and
// copies nothing. Returns the correlation id, or 0 when none was minted.
uint64_t msptiSimMemcpy(uint32_t copyKind, uint64_t bytes, uint32_t device, uint32_t stream, uint64_t duration_ns,
                        uint8_t isAsync);

// Same for aclrtMemset(Async) of `bytes` bytes to `value`: MSPTI_ACTIVITY_KIND_MEMSET, a
// msptiActivityMemset record (value, bytes, start, end, deviceId, streamId, correlationId,
// isAsync), API record "aclrtMemsetAsync" / "aclrtMemset".
uint64_t msptiSimMemset(uint32_t value, uint64_t bytes, uint32_t device, uint32_t stream, uint64_t duration_ns,
                        uint8_t isAsync);

// An aclrtMalloc (operation 0, MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION) or aclrtFree
// (operation 1, RELEASE) of `bytes` bytes at device address `address` on logical device `device`
// (mapped to its physical id as for launches), through MSPTI's interposed ACL allocation hooks:
// with libmspti.so preloaded, while subscribed, the call mints the thread's current id and, if
// MEMORY is on as it returns, writes one msptiActivityMemory record at once with the call's host
// span, address, bytes (a release: the recorded allocation's bytes, 0 for an address allocated
// while MEMORY was off), memoryKind DEVICE, the pid, the physical device and streamId
// MSPTI_INVALID_STREAM_ID (mspti.md 5.8). Without the preload, or on generations before 8.1: no
// id and no record. While subscribed with an API kind on, an API record "aclrtMalloc" /
// "aclrtFree" carries the thread's current id. Another operation prints an error to stderr and
// records nothing. Returns the minted correlation id, or 0.
uint64_t msptiSimMemory(uint32_t operation, uint64_t address, uint64_t bytes, uint32_t device);

// A runtime API call that launches nothing (synchronize, event record, stream wait, malloc, get
// device, ...). It takes host_ns (the calling thread sleeps that long; 0 = just the call). While
// subscribed with RUNTIME_API (or API) on, one API record named `name` (copied) spans
// [call start, call end] and carries the calling thread's CURRENT correlation id (mspti.md 4: API
// records take their thread's current id, the most recent launch on that thread, possibly from
// an earlier session; 0 if none). Mints nothing.
void msptiSimRuntimeCall(const char* name, uint64_t host_ns);

// Block until the device timeline of `device` (or of every device when device < 0) has caught up
// with wall-clock time, i.e. every task launched so far has ended. Returns 0.
int msptiSimSynchronize(int32_t device);

// End time (ns since the epoch, true device time) of the last task on any stream of `device`
// (of every device when device < 0); 0 when none. msptiSimSynchronize sleeps until this instant.
uint64_t msptiSimDeviceTail(int32_t device);

// End time (ns since the epoch, true device time) of the last task (kernel, collective, copy,
// memset) on (device, stream); 0 when none.
uint64_t msptiSimStreamTail(uint32_t device, uint32_t stream);

// The aclrtStream handle of (device, stream) that the simulator's mstxMarkA, mstxRangeStartA and
// mstxDomain* entry points accept (never NULL; a NULL stream is a host-only marker, mspti.md 5.9).
void* msptiSimStreamHandle(uint32_t device, uint32_t stream);

// Tunables. Keys (value type int64):
//   "delivery_delay_ns"    delay from kernel end to its record reaching the buffer (200000000)
//   "launch_latency_ns"    host launch to earliest device start (5000)
//   "disable_pulls"        1: Disable(KERNEL) first pulls every kernel record still in flight
//                          into the buffer (MSPTI 26.1 halProfDataFlush); 0: it pulls nothing (1)
//   "driver_flush_ns"      time Disable(KERNEL) spends in the driver flush (20000000)
//   "drop_after_disable"   1: kernel records that become due after their kind was disabled are
//                          discarded (parser stopped); 0: they are still recorded (1)
//   "per_thread_stacks"    1: external-correlation stacks per thread; 0: one process-global
//                          stack per kind, as the real library (0)
//   "buffer_threshold_pct" fill level at which the current buffer is queued (80)
//   "parse_after_pull_ns"  records that a Disable's driver flush pulls (KERNEL and COMMUNICATION
//                          records of ended tasks) are parsed by the reader thread this long after
//                          the flush returns, not by the Disable's thread; one whose kind is disabled
//                          by then (the pulling Disable's own kind included) is dropped, as real
//                          MSPTI does (mspti.md 2.3); 0: parsed on the Disable's thread before its
//                          switch is cleared, a kinder model (1000000)
//   "copies_at_call_end"   1: MEMCPY records are written by the copy call at its end with the host
//                          call's span, as real MSPTI (mspti.md 5.7); 0: as device records (1)
//   "require_enable_after_subscribe"  (added by the simulator) 1: KERNEL records flow only if
//                          KERNEL was enabled while subscribed: MSPTI starts the device tasks in
//                          Enable, Unsubscribe stops them and Subscribe does not restart them
//                          (mspti.md 5.6), so Enable-then-Subscribe yields ids, external and API
//                          records but no kernel records (counted as dropped); 0: lenient (1)
// Harsh modes (behaviour some MSPTI builds or setups have; every default keeps it off):
//   "api_clock"            0: host-clock times are CLOCK_REALTIME ns since the epoch; 1: raw
//                          CLOCK_MONOTONIC_RAW ns, as MSPTI builds without the host oscillator
//                          frequency reported (mspti.md 4, fixes 990582b/7722b61), in every
//                          record MSPTI takes from its host clock: API records, copy and memset
//                          rows, MEMORY records, host markers; kernel, collective and device
//                          marker times keep epoch ns (0)
//   "device_clock_offset_ns"  int64 ns, may be negative (|v| <= 1 h), and
//   "device_clock_drift_ppm"  int64 ppm (|v| <= 100000): start/end of KERNEL, COMMUNICATION, MEMCPY
//                          and MEMSET records are reported as
//                          true + offset + drift_ppm * (true - t0) / 1e6, t0 = when the library
//                          was loaded (MSPTI converts the device syscnt against a base pair its sync
//                          thread refreshes every 7 s, mspti.md 4). The timeline stays on true time:
//                          when tasks run, what msptiSimSynchronize and msptiSimStreamTail give,
//                          what Disable's pull counts as ended (0, 0)
//   "early_start_every"    N > 0: the Nth, 2Nth, ... task placed on each (device, stream) (counted
//                          from the first task on that stream since load, every task kind) is
//                          reported starting early_start_ns before its true start, so on a busy
//                          stream it overlaps the previous record (0)
//   "early_start_ns"       how early, ns (1000)
//   "deliver_after_unsubscribe"  1: Unsubscribe does NOT discard the device records in flight;
//                          they are delivered later into whatever callbacks are registered then,
//                          i.e. into the next session (an MSPTI that keeps delivering after
//                          Unsubscribe). Records due while their kind is disabled still follow
//                          drop_after_disable (0)
//   "kernels_need_preload" 1: without libmspti in LD_PRELOAD (read at load) no device is known, so
//                          no KERNEL or COMMUNICATION record is ever produced (counted as dropped);
//                          ids, external and API records still are: CANN before 9.1 delivers kernels
//                          only with a process-start preload (mspti.md 5.5, TA) (1 in the 8.x
//                          builds, which know devices only through the preload; 0 from 26.0)
//   "destroy_at_exit"      1: when static destruction reaches the simulator at process exit, it
//                          marks itself torn down (as MSPTI's singletons die then); every MSPTI
//                          entry point called afterwards prints "libmspti_sim: <function> called
//                          after the library was torn down at process exit" to stderr and aborts,
//                          and device records due afterwards are dropped (0)
//   "api_records_per_launch"  N (0..64): each kernel launch also writes N runtime API records on the
//                          launching thread: ceil(N/2) BEFORE the launch record, carrying the
//                          thread's then-current (previous launch's) id, named in turn
//                          ContextGetCurrent, KernelArgsInit, KernelArgsApendPlaceHolder,
//                          KernelArgsFinalize; floor(N/2) after it, sharing the new id, named in
//                          turn CacheLastTaskOpInfo, StreamSynchronize (RUNTIME-level API names of
//                          the CANN runtime's profiling table, which also holds LaunchKernelV2) (0)
//   "unsubscribe_poll_ns"  P > 0: Unsubscribe waits, holding the subscriber lock (a concurrent
//                          Subscribe waits for it), until the channel poller's current poll would
//                          time out: P - ((now - max(Subscribe, last hand-over of device records))
//                          mod P), as MSPTI joins a poller sitting in the driver's poll (mspti.md
//                          2.2; over a driver whose poll ignores stopped channels, 1 s) (0)
//   The default of "disable_pulls" is 1 only in the 26.1 build (libmspti_sim.so); the older
//   generations' builds (msptiSimGeneration) default to 0, as their Disable pulled nothing.
// Fault injection (none of these is real MSPTI behaviour; each is a fault the plugin must survive):
//   "throw_in"             bitmask of MSPTI_SIM_THROW_* below: those entry points throw a
//                          std::runtime_error before doing anything, as the real C API can when a
//                          CANN dependency is missing (mspti.md 2, 6 item 7) (0)
//   "reorder_external"     where a launch's EXTERNAL_CORRELATION records go: 0 at launch, before
//                          the device record (real); 1 right after its first device record; 2 in a
//                          later buffer than that record (the current buffer is retired first) (0)
//   "duplicate_kernel_records"  1: every KERNEL record is written twice (0)
//   "bad_timing_every"     N > 0: every Nth KERNEL record written has zero timing (start = end = 0)
//                          or, alternating, inverted timing (end < start) (0)
//   "unknown_kind_every"   N > 0: a 56-byte record of kind 99 (unknown to every MSPTI) is written
//                          just before every Nth KERNEL record (0)
//   "never_deliver"        1: tasks run on the timeline but their device records (KERNEL,
//                          COMMUNICATION, MEMCPY, MEMSET) are never written (counted as dropped);
//                          API/external records still are (0)
//   "foreign_correlation_id" != 0: msptiSimCompleteForeignBuffer's records all carry this id (the
//                          value read as uint64: -2 is 2^64 - 2), each kernel after its launch
//                          (EXTERNAL_CORRELATION CUSTOM0 1, RUNTIME_API "LaunchKernelV2"): a
//                          foreign or misread buffer with a junk correlation id (0)
//   "completion_delay_ns"  a full buffer's completion worker waits this long before it calls the
//                          complete callback (a starved scheduler), so the recorder's next
//                          request finds that buffer still out: a pool of one buffer declines it
//                          deterministically (0)
// Returns 0 on success, -1 for an unknown key or an out-of-range value.
int msptiSimSetOption(const char* key, int64_t value);

// Fault injection: a buffer another tool requested is completed into the currently registered
// complete callback (MSPTI keeps one callback pair per process, mspti.md 2.3). The simulator
// allocates the buffer itself (8-aligned, size = valid bytes + 256) and fills it with `kernels`
// valid KERNEL records (fresh correlation ids from the shared counter that become no thread's
// current id, name "ForeignKernel", type "KERNEL_AICORE", ended just before now, physical id of
// logical device 0, stream 1), then calls complete(buffer, size, validSize) on a new thread
// (on_new_thread != 0; joined before returning) or on the caller's thread. The buffer stays the
// simulator's: after the callback it checks a canary behind the buffer (a write into it aborts
// with a message; a callback that freed it is caught as a use-after-free / double free by ASan)
// and frees it. Returns 0, or -1 when no callbacks were ever registered.
int msptiSimCompleteForeignBuffer(uint32_t kernels, int on_new_thread);
// Returns the value, or INT64_MIN for an unknown key.
int64_t msptiSimGetOption(const char* key);

typedef struct {
  uint64_t kernels_launched;      // kernels placed on the timeline
  uint64_t kernel_records;        // KERNEL records written into buffers
  uint64_t external_records;      // EXTERNAL_CORRELATION records written
  uint64_t api_records;           // API/RUNTIME_API records written
  uint64_t records_dropped;       // records lost: declined buffer, disabled kind, no space
  uint64_t records_pending;       // kernel records scheduled but not yet written
  uint64_t buffers_requested;     // request-callback calls
  uint64_t buffers_declined;      // requests answered with NULL/0
  uint64_t buffers_completed;     // complete-callback calls (NULL buffers included)
  uint64_t external_stack_depth;  // current depth of the CUSTOM0 stack (process-global mode)
} msptiSimStats;

// Fill *out (ignored when NULL) with counters since the library was loaded. The struct's layout is
// frozen (ctypes users declare it); newer counters are read with msptiSimGetCounter.
// records_dropped and records_pending cover every device record kind.
void msptiSimGetStats(msptiSimStats* out);

// One counter since load by name: every msptiSimStats field name, and
//   "device_tasks"           tasks placed on the timeline (kernels, collectives, copies, memsets)
//   "communication_records"  COMMUNICATION records written
//   "memcpy_records"         MEMCPY records written
//   "memory_records"         MEMORY records written
//   "memset_records"         MEMSET records written
//   "foreign_buffers"        buffers delivered by msptiSimCompleteForeignBuffer
// Returns UINT64_MAX for an unknown (or NULL) name.
uint64_t msptiSimGetCounter(const char* name);

// Added by the simulator (not part of the first control API draft):

// Re-read the environment the simulator otherwise reads once, when it is loaded:
//   ASCEND_RT_VISIBLE_DEVICES  logical -> physical device map ("2,3": logical 0 -> physical 2)
//   LD_PRELOAD                 cached "contains libmspti" answer for the kinds that need the preload
// Tests use it after setenv(); the real library reads both once (mspti.md 2.3, 4). Returns 0.
int msptiSimReloadEnvironment(void);

// Put every option back to its default value (see msptiSimSetOption). Returns 0.
int msptiSimResetOptions(void);

// Bits of the "throw_in" option: the entry points that throw.
#define MSPTI_SIM_THROW_SUBSCRIBE 0x01
#define MSPTI_SIM_THROW_ENABLE 0x02
#define MSPTI_SIM_THROW_FLUSH_ALL 0x04
#define MSPTI_SIM_THROW_PUSH 0x08
#define MSPTI_SIM_THROW_POP 0x10
#define MSPTI_SIM_THROW_DISABLE 0x20
#define MSPTI_SIM_THROW_UNSUBSCRIBE 0x40
#define MSPTI_SIM_THROW_REGISTER_CALLBACKS 0x80

// The MSPTI generation this build simulates (src/sim/Generation.h): 80 (CANN 8.0.RC3), 81 (8.1),
// 82 (8.2), 260 (MindStudio 26.0) or 261 (26.1, libmspti_sim.so). Its exported MSPTI symbols and
// accepted activity kinds are that generation's (mspti.md 8).
int msptiSimGeneration(void);

#ifdef __cplusplus
}  // extern "C"
#endif
