// The plugin's process-wide parts, created once and handed to whatever needs them: the
// composition root. Components never reach for it themselves: the profiler receives it from the
// registration, sessions receive their parts (SessionDeps), and only the nanobind module, the
// registration and the fork/exit guards start from PluginContext::process().
//
// What is process-wide, and why: the loaded MSPTI (MsptiLibrary: one per process, never
// unloaded), the buffers MSPTI's one callback pair hands out (MsptiBufferPool), the per-thread op
// stacks and logs (CorrelationForwarder: thread_local), the settings (Config), the reports of
// finished sessions (StatsRegistry), the id counter that keeps host correlation ids unique across
// sessions (CorrelationIds), the highest MSPTI correlation id earlier sessions saw, and facts for
// diagnostics (PluginStatus).
//
// Process-wide state outside the context: each is file-scope because something outside the
// plugin's control calls in without a pointer to a context, or because it must outlive it:
//  * MsptiBufferPool.cpp gBound, the pool MSPTI's buffer callbacks reach:
//    msptiActivityRegisterCallbacks takes two plain C functions with no user-data argument, one
//    pair per process (mspti.md 2.3), so the callbacks find their pool through one atomic pointer
//    (bindCallbacks sets it; a test binds its own pool the same way).
//  * CorrelationForwarder.cpp tState (and the StateOwner that marks it dead at thread exit): the
//    per-thread op stacks are reached from kineto's push/pop on the op's thread with no lock and
//    one TLS read (kineto.md 4.1); a thread_local cannot belong to an instance, so there is one
//    forwarder per process: the context's (tests share one, SessionHarness sharedForwarder()).
//  * Registration.cpp gMutex / gStatus: torch's PrivateUse1ProfilerRegistry is itself a process-wide
//    singleton holding one factory (kineto.md 1.1), so whether and how the plugin registered is a
//    fact of the process, not of a context (registerProfiler is idempotent on it).
//  * PeerBackends.cpp gPeerMutex and detectPeerBackend's cache: they mirror the process's loaded
//    objects (dl_iterate_phdr), which are process-wide; the cache is keyed by the loader's
//    add/remove counters.
//  * ForkGuard.cpp gParticipants / gCount / gLoaded / gForked: pthread_atfork handlers are plain
//    functions run by fork() itself, and the child's mark must be readable without any lock.
//  * ExitGuard.cpp gExiting / gMarker: set from Python's atexit and from a static destructor that
//    runs during static destruction, after which no context may be touched.
// PluginContext::process() itself is never destroyed (MSPTI's threads may call the callbacks
// until exit).
// Thread-safety: each part documents its own; the context itself is immutable once built.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "Config.h"
#include "CorrelationForwarder.h"
#include "CorrelationIds.h"
#include "MsptiActivityProfilerSession.h"
#include "MsptiBufferPool.h"
#include "MsptiLibrary.h"
#include "SessionStats.h"
#include "SubscriptionRelease.h"

namespace torch_mspti {

// Facts about the plugin in this process, for diagnostics.
struct PluginStatus {
  std::atomic<bool> factoryCalled{false};   // kineto instantiated our profiler
  std::atomic<uint64_t> configureCalls{0};  // configure() calls (all traces)
  std::atomic<uint64_t> deviceSessions{0};  // sessions returned (device types requested)
  std::atomic<int64_t> lastConfigureNs{0};  // ns since the epoch of the latest configure()
  // Outcome for the latest trace that asked for device data: -1 = none yet, 0 = our session did
  // not collect it (failed, or another profiler served), 1 = our session collected it.
  std::atomic<int> lastTraceOurs{-1};
  // The latest configure() came while torch's PrivateUse1 backend was unnamed: torch then drops
  // ProfilerActivity.PrivateUse1 from the activities, so no device session can start.
  std::atomic<bool> lastTraceUnnamedBackend{false};
};

// Why no device session served the latest trace because the PrivateUse1 backend was unnamed, and
// the fix (one text for the warning and for diagnostics).
extern const char* const kUnnamedBackendReason;

class PluginContext {
 public:
  // The process's context: created on first use, never destroyed (MSPTI's threads may call the
  // buffer callbacks until the process exits).
  static PluginContext& process();

  PluginContext();
  PluginContext(const PluginContext&) = delete;
  PluginContext& operator=(const PluginContext&) = delete;

  // A session's parts, with a snapshot of the settings taken now.
  SessionDeps sessionDeps();
  // Loads MSPTI as the session would (diagnostics, doctor); the library path is locked once loaded.
  const MsptiFunctions* loadLibrary(const ConfigSnapshot& config);

  // Device properties for "deviceProperties": set by the Python package (it knows torch_npu's and
  // the simulator's device objects); called with the logical devices of a trace. The previous
  // provider is destroyed once no session holds a copy (outside the context's lock). Thread-safe.
  using DevicePropertiesProvider = std::function<std::string(const std::vector<int32_t>&)>;
  void setDevicePropertiesProvider(DevicePropertiesProvider provider);
  // This process's HCCL communicators (Communicators.h): set by the Python package (it knows
  // torch.distributed's groups and their backends); asked by each session at start and at stop.
  // Released like the device-properties provider. Thread-safe.
  void setCommunicatorsProvider(CommunicatorsProvider provider);

  // The fork guard's participant: takes every lock of the plugin, outer first — the registration,
  // the settings, the peer-backend scan, the loaded library, the device-properties provider, the
  // session reports, the buffer pool and the collecting session's record store and name table —
  // and releases them (in the parent and, after fork(), in the child). Public for the test.
  void lockForFork();
  void unlockAfterFork();

  Config config;
  MsptiLibrary library;
  MsptiBufferPool pool;
  CorrelationForwarder forwarder;
  StatsRegistry stats;
  CorrelationIds ids;
  SubscriptionRelease release;  // the subscriber of a stopped session, unsubscribed off stop()
  PluginStatus status;
  std::atomic<uint64_t> staleBelow{0};

 private:
  std::mutex providerMutex_;
  DevicePropertiesProvider provider_;
  CommunicatorsProvider communicators_;
};

// Waits until each given logical PrivateUse1 device, and each device the backend reports as
// initialised (PrivateUse1HooksInterface::hasPrimaryContext: torch_npu answers whether the device
// has an ACL context, so an idle device is never initialised by this), is idle, through torch's
// device guard (DeviceGuardImplInterface::synchronizeDevice, which torch_npu and the simulated
// device implement). No-op when no PrivateUse1 backend is registered; a backend without hooks, or
// whose hooks throw, gets the given devices only. True when every device that may hold work of the
// session was synchronised (a backend is registered and told which devices are initialised).
bool synchronizePrivateUse1Devices(const std::vector<int32_t>& devices);

}  // namespace torch_mspti
