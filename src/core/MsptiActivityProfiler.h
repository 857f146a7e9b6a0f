// The kineto child profiler for the PrivateUse1 device ("torch_mspti").
//
// kineto creates it once per process through the registered factory and calls configure() on
// every later trace, CPU-only ones included, with the whole set of requested types
// (kineto.md 1.1-1.2). A session is returned only when a device activity type was requested:
// PRIVATEUSE1_RUNTIME/DRIVER are also part of torch's CPU set and alone must not arm MSPTI.
// Thread-safety: configure() runs on the profiler's thread; the status counters are atomic.
#pragma once

#include <set>
#include <string>

#include <IActivityProfiler.h>

#include "PluginContext.h"

namespace torch_mspti {

class MsptiActivityProfiler : public libkineto::IActivityProfiler {
 public:
  explicit MsptiActivityProfiler(PluginContext& context);
  const std::string& name() const override { return name_; }
  // What a session can produce (kineto itself does not call this, kineto.md 1.2).
  const std::set<libkineto::ActivityType>& availableActivities() const override { return available_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override;
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t tsMs, int64_t durationMs,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override;

  // True when `types` asks for device data.
  static bool wantsDevice(const std::set<libkineto::ActivityType>& types);

 private:
  PluginContext& context_;
  const std::string name_ = "torch_mspti";
  const std::set<libkineto::ActivityType> available_;
};

}  // namespace torch_mspti
