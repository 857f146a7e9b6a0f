// The launch path msptiSimLaunchKernel(s) drives: what the CANN runtime, libprofapi and MSPTI's
// kernel parser do together for one kernel launch on the calling thread (mspti.md 4, 5.4).
#pragma once

#include <atomic>
#include <cstdint>

#include "ActivityBuffers.h"
#include "ActivitySwitches.h"
#include "DeliveryThread.h"
#include "DeviceTimeline.h"
#include "Environment.h"
#include "ExternalCorrelation.h"
#include "NameTable.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "Subscriber.h"

namespace torch_mspti::sim {

struct LaunchContext {
  const SimOptions& options;
  SimCounters& counters;
  const Environment& environment;
  const ActivitySwitches& switches;
  const Subscriber& subscriber;
  const ExternalCorrelation& externalCorrelation;
  DeviceTimeline& timeline;
  ActivityBuffers& buffers;
  NameTable& names;
  DeliveryThread& delivery;
};

class KernelLauncher {
 public:
  explicit KernelLauncher(const LaunchContext& context) : ctx_(context) {}
  KernelLauncher(const KernelLauncher&) = delete;
  KernelLauncher& operator=(const KernelLauncher&) = delete;

  // One launch covering `count` kernels; returns the minted correlation id or 0.
  uint64_t launch(const char* name, const char* type, uint32_t device, uint32_t stream, uint64_t durationNs,
                  uint32_t count);
  // DeliveryThread sink: the kernel parser writing a device-reported record (reader thread, or
  // the Disable caller during a driver flush).
  void writeKernelRecord(const PendingKernel& kernel);

 private:
  void writeExternalCorrelations(uint64_t correlationId);
  void writeExternalRecord(uint32_t kind, uint64_t externalId, uint64_t correlationId);
  void writeApiRecord(uint64_t hostStartNs);

  // The calling thread's "current" correlation id (MSPTI ContextManager, mspti.md 4): set by
  // each minting launch, read by API records, never reset.
  static uint64_t& threadCurrentId();

  LaunchContext ctx_;
  std::atomic<uint64_t> nextCorrelationId_{1};
  std::atomic<uint64_t> kernelWrites_{0};  // KERNEL records written (fault-injection cadence)
};

}  // namespace torch_mspti::sim
