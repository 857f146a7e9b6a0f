#include "Registration.h"

#include <mutex>

#include <fmt/format.h>

#include <c10/core/DeviceType.h>
#include <libkineto.h>

#include "MsptiActivityProfiler.h"
#include "PeerBackends.h"
#include "PluginContext.h"
#include "TorchCompat.h"

namespace torch_mspti {
namespace {
std::mutex gMutex;
RegistrationStatus gStatus;
}  // namespace

const char* profilerModeName(ProfilerMode m) {
  switch (m) {
    case ProfilerMode::kAuto: return "auto";
    case ProfilerMode::kMspti: return "mspti";
    case ProfilerMode::kOff: return "off";
  }
  return "auto";
}

RegistrationStatus registerProfiler(PluginContext& context) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gStatus.attempted) return gStatus;
  gStatus.attempted = true;
  gStatus.mode = context.config.snapshot().profiler;
  // torch's PrivateUse1 registry slot (torch >= 2.12; older torch has none: TorchCompat.h).
  gStatus.otherFactory = compat::privateUse1RegistryHasFactory();
  const PeerBackend peer = detectPeerBackend();
  if (gStatus.mode == ProfilerMode::kOff) {
    gStatus.message = peer.present ? "torch-mspti: not registered (TORCH_MSPTI_PROFILER=off); " + peer.description +
                                         " serves the NPU lane"
                                   : "torch-mspti: not registered (TORCH_MSPTI_PROFILER=off)";
    return gStatus;
  }
  if (gStatus.mode == ProfilerMode::kAuto && gStatus.otherFactory && !peer.present) {
    gStatus.message =
        "torch-mspti: another PrivateUse1 profiler is already registered and serves PrivateUse1 traces; set "
        "TORCH_MSPTI_PROFILER=mspti to use torch-mspti instead";
    return gStatus;
  }
  PluginContext* ctx = &context;
  auto factory = [ctx]() -> std::unique_ptr<libkineto::IActivityProfiler> {
    return std::make_unique<MsptiActivityProfiler>(*ctx);
  };
  if (gStatus.otherFactory) {
    // A factory is in torch's one-slot registry (a torch_npu build registering its MSPTI backend
    // there, or another vendor's profiler with TORCH_MSPTI_PROFILER=mspti): take the slot, so that
    // torch forwards ours instead of it and the other never runs.
    compat::takePrivateUse1RegistrySlot(factory);
  } else {
    // Straight with kineto, which keeps every child profiler: a peer that registers in torch's
    // registry after us (its library loaded later) cannot replace us, and kineto's on-demand
    // tracing, which skips the registry (kineto.md 1.1), sees us too.
    libkineto::api().registerProfilerFactory(factory);
  }
  gStatus.registered = true;
  if (peer.present)
    gStatus.message = "torch-mspti: serves the NPU lane; " + peer.description + " is loaded and kept quiet";
  else if (gStatus.otherFactory)
    gStatus.message = "torch-mspti: replaced the PrivateUse1 profiler registered before it (TORCH_MSPTI_PROFILER=" +
                      std::string(profilerModeName(gStatus.mode)) + ")";
  else gStatus.message = "torch-mspti: serves PrivateUse1 traces";
  return gStatus;
}

void lockRegistrationForFork() { gMutex.lock(); }
void unlockRegistrationAfterFork() { gMutex.unlock(); }

std::string servingMessage(const RegistrationStatus& status, const PeerBackend& peer, int lastTraceOurs) {
  if (!status.registered) {
    if (status.mode == ProfilerMode::kOff && peer.present)
      return "torch-mspti: not registered (TORCH_MSPTI_PROFILER=off); " + peer.description + " serves the NPU lane";
    return status.message;
  }
  if (lastTraceOurs == 0) {
    // Our session ran and collected nothing (diagnostics().last_session.errors say why).
    if (peer.present)
      return "torch-mspti: its session did not collect the last trace (see diagnostics().last_session.errors); the "
             "NPU lane holds what " +
             peer.description + " collected";
    return "torch-mspti: its session did not collect the last trace (see diagnostics().last_session.errors); the "
           "NPU lane is empty";
  }
  const char* tense = lastTraceOurs == 1 ? "served the last trace's NPU lane" : "serves the NPU lane";
  if (peer.present)
    return fmt::format("torch-mspti: {}; {} is loaded and adds nothing (torch-mspti holds the MSPTI subscriber)", tense,
                       peer.description);
  if (status.otherFactory)
    return fmt::format(
        "torch-mspti: {}; it replaced the PrivateUse1 profiler registered before it "
        "(TORCH_MSPTI_PROFILER={})",
        tense, profilerModeName(status.mode));
  return lastTraceOurs == 1 ? "torch-mspti: served the last trace's NPU lane" : status.message;
}

RegistrationStatus registrationStatus() {
  std::lock_guard<std::mutex> lock(gMutex);
  return gStatus;
}

std::string privateUse1BackendName() { return c10::get_privateuse1_backend(); }

}  // namespace torch_mspti
