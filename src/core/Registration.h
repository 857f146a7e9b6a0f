// Registering the profiler factory with torch's PrivateUse1 profiler registry.
//
// Done explicitly when the Python package is imported (never from a static initialiser), so the
// `profiler` setting (TORCH_MSPTI_PROFILER) can decide. torch's registry keeps only the last
// factory registered and forwards it to kineto when the first PrivateUse1 trace is prepared
// (kineto.md 1.1). Modes:
//  * auto: register, replacing a factory torch_npu's built-in MSPTI backend put into the registry;
//    keep any other PrivateUse1 profiler that was registered before (a vendor profiler that does
//    not use MSPTI) and do not register;
//  * mspti: register, replacing whatever is in the registry;
//  * off: never register.
// torch_npu releases that register their MSPTI backend straight with kineto are not in torch's
// registry at all: with auto and mspti torch-mspti still serves the NPU lane (see PeerBackends.h
// and MsptiActivityProfilerSession.h for how).
// Thread-safety: registerProfiler() is serialised by a mutex.
#pragma once

#include <string>

#include "Config.h"

namespace torch_mspti {

class PluginContext;

struct RegistrationStatus {
  ProfilerMode mode = ProfilerMode::kAuto;
  bool attempted = false;
  bool registered = false;       // our factory is in torch's registry (as of our call)
  bool otherFactory = false;     // a PrivateUse1 factory was in the registry before ours
  bool forwardedToKineto = false;
  std::string message;           // one line: which profiler serves PrivateUse1 traces
};

// Registers once per process (later calls return the first outcome).
RegistrationStatus registerProfiler(PluginContext& context);
RegistrationStatus registrationStatus();
std::string privateUse1BackendName();
const char* profilerModeName(ProfilerMode m);

}  // namespace torch_mspti
