#include "Registration.h"

#include <mutex>

#include <c10/core/DeviceType.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include "MsptiActivityProfiler.h"

namespace torch_mspti {
namespace {
std::mutex gMutex;
bool gDone = false;
RegistrationStatus gStatus;
}  // namespace

RegistrationStatus registerProfiler(RegistrationMode mode) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (gDone) return gStatus;
  gDone = true;
  auto& registry = torch::profiler::impl::PrivateUse1ProfilerRegistry::instance();
  gStatus.mode = mode == RegistrationMode::kAuto ? "auto" : mode == RegistrationMode::kMspti ? "mspti" : "off";
  gStatus.otherProfiler = registry.hasFactory();
  if (mode == RegistrationMode::kOff) {
    gStatus.message = "torch-mspti: not registered (TORCH_MSPTI_PROFILER=off)";
    return gStatus;
  }
  if (mode == RegistrationMode::kAuto && gStatus.otherProfiler) {
    gStatus.message =
        "torch-mspti: another PrivateUse1 profiler is already registered (e.g. torch_npu's) and serves PrivateUse1 "
        "traces; set TORCH_MSPTI_PROFILER=mspti to use torch-mspti instead";
    return gStatus;
  }
  registry.registerFactory(
      []() -> std::unique_ptr<libkineto::IActivityProfiler> { return std::make_unique<MsptiActivityProfiler>(); });
  gStatus.registered = true;
  gStatus.message =
      gStatus.otherProfiler
          ? "torch-mspti: replaced the PrivateUse1 profiler registered before it (TORCH_MSPTI_PROFILER=mspti)"
          : "torch-mspti: serves PrivateUse1 traces";
  return gStatus;
}

RegistrationStatus registrationStatus() {
  std::lock_guard<std::mutex> lock(gMutex);
  RegistrationStatus s = gStatus;
  s.forwardedToKineto = torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().isRegisteredWithKineto();
  return s;
}

std::string privateUse1BackendName() { return c10::get_privateuse1_backend(); }

namespace {
// Stands in for another vendor's PrivateUse1 profiler: configured, never collects.
class ForeignProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return types_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>&,
                                                                 const libkineto::Config&) override {
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>&,
                                                                 const libkineto::Config&) override {
    return nullptr;
  }

 private:
  const std::string name_ = "foreign_for_testing";
  const std::set<libkineto::ActivityType> types_;
};
}  // namespace

void registerForeignProfilerForTesting() {
  torch::profiler::impl::PrivateUse1ProfilerRegistry::instance().registerFactory(
      []() -> std::unique_ptr<libkineto::IActivityProfiler> { return std::make_unique<ForeignProfiler>(); });
}

void resetRegistrationForTesting() {
  std::lock_guard<std::mutex> lock(gMutex);
  gDone = false;
  gStatus = RegistrationStatus{};
}

}  // namespace torch_mspti
