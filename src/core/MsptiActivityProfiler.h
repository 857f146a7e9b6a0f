// The kineto child profiler for the PrivateUse1 device ("torch_mspti").
//
// kineto creates it once per process through the registered factory and calls configure() on
// every later trace, CPU-only ones included, with the whole set of requested types
// (kineto.md 1.1-1.2). A session is returned only when a device activity type was requested:
// PRIVATEUSE1_RUNTIME/DRIVER are also part of torch's CPU set and alone must not arm MSPTI.
// Thread-safety: configure() runs on the profiler's thread; counters are atomic.
#pragma once

#include <atomic>
#include <set>
#include <string>

#include <IActivityProfiler.h>

namespace torch_mspti {

class MsptiActivityProfiler : public libkineto::IActivityProfiler {
 public:
  MsptiActivityProfiler();
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return available_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override;
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t tsMs, int64_t durationMs,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override;

  // True when `types` asks for device data.
  static bool wantsDevice(const std::set<libkineto::ActivityType>& types);

 private:
  const std::string name_ = "torch_mspti";
  const std::set<libkineto::ActivityType> available_;
};

// Process-wide facts about the plugin, for diagnostics.
struct PluginStatus {
  std::atomic<bool> factoryCalled{false};   // kineto instantiated our profiler
  std::atomic<uint64_t> configureCalls{0};  // configure() calls (all traces)
  std::atomic<uint64_t> deviceSessions{0};  // sessions returned (device types requested)
  std::atomic<int64_t> lastConfigureNs{0};  // ns since the epoch of the latest configure()
  static PluginStatus& instance();
};

}  // namespace torch_mspti
