// Registering the profiler factory with kineto.
//
// Done explicitly when the Python package is imported (never from a static initialiser), so the
// `profiler` setting (TORCH_MSPTI_PROFILER) can decide. The factory goes straight to kineto
// (libkineto::api().registerProfilerFactory: queued until kineto initialises at the first trace,
// then instantiated once, kineto.md 1.1), like torch_npu's built-in MSPTI backend does: kineto
// keeps every such child profiler, while torch's PrivateUse1 registry keeps one, and a peer
// registering there after us would replace us. Only when torch's registry already holds a factory
// do we take its slot instead, so that torch forwards ours and not that one. Modes:
//  * auto: register, unless another vendor's PrivateUse1 profiler (one that is not torch_npu's
//    MSPTI backend) is already in torch's PrivateUse1 registry: that device is not ours;
//  * mspti: register whatever else is registered;
//  * off: never register.
// With auto and mspti torch-mspti serves the NPU lane also when torch_npu's built-in backend is
// loaded, in either import order (PeerBackends.h, MsptiActivityProfilerSession.h).
// Thread-safety: registerProfiler() is serialised by a mutex.
#pragma once

#include <string>

#include "Config.h"

namespace torch_mspti {

class PluginContext;

struct RegistrationStatus {
  ProfilerMode mode = ProfilerMode::kAuto;
  bool attempted = false;
  bool registered = false;    // our factory was handed to kineto
  bool otherFactory = false;  // a factory was in torch's PrivateUse1 registry when we registered
  std::string message;        // one line: which profiler serves PrivateUse1 traces
};

struct PeerBackend;

// Registers once per process (later calls return the first outcome).
RegistrationStatus registerProfiler(PluginContext& context);
// The one line diagnostics show as plugin.message: who serves the NPU lane, from the registration
// outcome, the peer backend loaded now (`peer`, detected at the call: it may have been loaded after
// registration) and whether torch-mspti's session collected the last device trace (`lastTraceOurs`:
// 1 yes, 0 no, -1 no device trace yet). Thread-safe.
std::string servingMessage(const RegistrationStatus& status, const PeerBackend& peer, int lastTraceOurs);
RegistrationStatus registrationStatus();
// For the fork guard (and its test): hold the registration's lock across fork().
void lockRegistrationForFork();
void unlockRegistrationAfterFork();
std::string privateUse1BackendName();
const char* profilerModeName(ProfilerMode m);

}  // namespace torch_mspti
