#include "PluginContext.h"

#include <algorithm>
#include <optional>

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <libkineto.h>

#include "ForkGuard.h"
#include "PeerBackends.h"
#include "Registration.h"

namespace torch_mspti {

const char* const kUnnamedBackendReason =
    "torch-mspti: no NPU activity can be recorded: torch's PrivateUse1 backend is not named, so torch.profiler "
    "drops ProfilerActivity.PrivateUse1 from the activities (torch's \"The privateuseone is not a valid device "
    "option\") and no device session starts. Import torch_npu before profiling (it names the backend \"npu\"), "
    "or call torch_mspti.sim.enable() for the simulated NPU; CPU-only profiles are not affected";
namespace {

void prepareFork(void* self) { static_cast<PluginContext*>(self)->lockForFork(); }

void afterForkInParent(void* self) { static_cast<PluginContext*>(self)->unlockAfterFork(); }

void afterForkInChild(void* self) {
  auto* c = static_cast<PluginContext*>(self);
  // The parent's pushes are on the parent's MSPTI stack: never popped from here.
  c->forwarder.abandon();
  c->unlockAfterFork();
  c->release.forgetAfterFork();
}

}  // namespace

// Outer locks first: the registration takes the settings' and the peer scan's locks while it
// holds its own; no other plugin lock is taken while one of these is held.
void PluginContext::lockForFork() {
  lockRegistrationForFork();
  config.lockForFork();
  lockPeerBackendsForFork();
  library.lockForFork();  // held for the whole first load: a fork then waits for the load to end
  providerMutex_.lock();
  stats.lockForFork();
  pool.lockForFork();  // and the collecting session's store and name table
  release.lockForFork();
}

void PluginContext::unlockAfterFork() {
  release.unlockAfterFork();
  pool.unlockAfterFork();
  stats.unlockAfterFork();
  providerMutex_.unlock();
  library.unlockAfterFork();
  unlockPeerBackendsAfterFork();
  config.unlockAfterFork();
  unlockRegistrationAfterFork();
}

PluginContext& PluginContext::process() {
  static PluginContext* context = new PluginContext();  // never destroyed, see the header
  return *context;
}

PluginContext::PluginContext() { registerForkParticipant({&prepareFork, &afterForkInParent, &afterForkInChild, this}); }

const MsptiFunctions* PluginContext::loadLibrary(const ConfigSnapshot& cfg) {
  if (!library.ensureLoaded({cfg.libraryPath, cfg.allowMissingProfapi})) return nullptr;
  config.lockLibraryPath(library.loadedPath());
  return &library.functions();
}

void PluginContext::setDevicePropertiesProvider(DevicePropertiesProvider provider) {
  {
    std::lock_guard<std::mutex> lock(providerMutex_);
    provider_.swap(provider);
  }
  // `provider` now holds the previous one: released here, outside the lock (releasing it may run
  // the binding's code, e.g. take the GIL and drop a Python object).
}

void PluginContext::setCommunicatorsProvider(CommunicatorsProvider provider) {
  {
    std::lock_guard<std::mutex> lock(providerMutex_);
    communicators_.swap(provider);
  }
  // The previous one is released here, outside the lock (as above).
}

SessionDeps PluginContext::sessionDeps() {
  SessionDeps d;
  d.config = config.snapshot();
  d.loadLibrary = [this](const ConfigSnapshot& c) { return loadLibrary(c); };
  d.libraryReport = [this] { return library.report(); };
  d.pool = &pool;
  d.forwarder = &forwarder;
  d.stats = &stats;
  d.ids = &ids;
  d.release = &release;
  d.staleBelow = &staleBelow;
  d.synchronizeDevices = &synchronizePrivateUse1Devices;
  {
    std::lock_guard<std::mutex> lock(providerMutex_);
    d.deviceProperties = provider_;
    d.communicators = communicators_;
  }
  d.warn = [](const std::string& message) { TORCH_WARN(message); };
  d.processId = libkineto::processId();
  d.collectedFlag = &status.lastTraceOurs;
  d.peer = detectPeerBackend();
  return d;
}

namespace {

// Whether device d has a primary context; nullopt when the backend cannot say.
std::optional<bool> initialised(c10::DeviceIndex d) {
  try {
    if (!at::isPrivateUse1HooksRegistered()) return std::nullopt;
    return at::detail::getPrivateUse1Hooks().hasPrimaryContext(d);
  } catch (...) {
    return std::nullopt;  // the default hooks throw for every query
  }
}

}  // namespace

bool synchronizePrivateUse1Devices(const std::vector<int32_t>& devices) {
  constexpr auto kType = c10::DeviceType::PrivateUse1;
  if (!c10::impl::hasDeviceGuardImpl(kType)) return false;
  const c10::impl::DeviceGuardImplInterface* impl = c10::impl::getDeviceGuardImpl(kType);
  const c10::DeviceIndex count = impl->deviceCount();
  bool complete = true;
  for (c10::DeviceIndex d = 0; d < count; ++d) {
    const std::optional<bool> init = initialised(d);
    if (!init) complete = false;
    if (std::find(devices.begin(), devices.end(), d) != devices.end() || init.value_or(false))
      impl->synchronizeDevice(d);
  }
  return complete;
}

}  // namespace torch_mspti
