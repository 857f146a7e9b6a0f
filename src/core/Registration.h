// Registering the profiler factory with torch's PrivateUse1 profiler registry.
//
// Done explicitly when the Python package is imported (never from a static initialiser), so the
// TORCH_MSPTI_PROFILER mode can decide, and so diagnostics can tell whether another PrivateUse1
// profiler (e.g. torch_npu's) was registered before. torch's registry keeps only the last factory
// registered and forwards it to kineto when the first PrivateUse1 trace is prepared
// (kineto.md 1.1).
// Thread-safety: registerProfiler() is serialised by a mutex.
#pragma once

#include <string>

namespace torch_mspti {

enum class RegistrationMode { kAuto, kMspti, kOff };

struct RegistrationStatus {
  std::string mode;            // "auto", "mspti", "off"
  bool registered = false;     // our factory is in torch's registry (as of our call)
  bool otherProfiler = false;  // a PrivateUse1 factory existed before ours
  bool forwardedToKineto = false;
  std::string message;  // one line: which profiler serves PrivateUse1 traces
};

// Registers according to `mode`; idempotent (a second call reports the first outcome).
RegistrationStatus registerProfiler(RegistrationMode mode);
RegistrationStatus registrationStatus();
// The PrivateUse1 backend name ("privateuseone" when never renamed).
std::string privateUse1BackendName();

// Tests only: put a do-nothing PrivateUse1 profiler factory into torch's registry (standing in
// for torch_npu's), and forget our own registration outcome so registerProfiler() runs again.
void registerForeignProfilerForTesting();
void resetRegistrationForTesting();

}  // namespace torch_mspti
