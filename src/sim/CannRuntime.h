// The simulated CANN runtime behind the msptiSim* launch entry points: what the runtime, HCCL and
// the ACL memory API hand to MSPTI for each kind of call (mspti.md 4, 5.4, 5.5). Each call is
// turned into a DeviceTask (TaskLauncher) or a plain API record (HostRecords):
//   kernels        minted while KERNEL is on, only for task types starting with "KERNEL";
//                  API record "LaunchKernelV2" (what 26.x reports at RUNTIME level), with
//                  api_records_per_launch runtime calls around it
//   collectives    minted at the communication node launch while COMMUNICATION is on; API record
//                  named after the HCCL call ("HcclAllReduce", ...)
//   copies/memsets minted by the interposed ACL memory call, which exists only when libmspti was
//                  preloaded at process start; API record "aclrtMemcpy(Async)"/"aclrtMemset(Async)"
//   runtime calls  an API record with the thread's current id; mint nothing
#pragma once

#include <cstdint>
#include <string>

#include "Environment.h"
#include "HostRecords.h"
#include "NameTable.h"
#include "SimOptions.h"
#include "TaskLauncher.h"

namespace torch_mspti::sim {

class CannRuntime {
 public:
  CannRuntime(const SimOptions& options, TaskLauncher& launcher, HostRecords& hostRecords, NameTable& names,
              const Environment& environment)
      : options_(options), launcher_(launcher), hostRecords_(hostRecords), names_(names), environment_(environment) {}
  CannRuntime(const CannRuntime&) = delete;
  CannRuntime& operator=(const CannRuntime&) = delete;

  uint64_t launchKernels(const char* name, const char* type, uint32_t device, uint32_t stream, uint64_t durationNs,
                         uint32_t count);
  uint64_t launchCommunication(const char* name, const char* algType, const char* commName, uint32_t dataType,
                               uint64_t count, uint32_t device, uint32_t stream, uint64_t durationNs,
                               const char* apiName);
  uint64_t memcpy(uint32_t copyKind, uint64_t bytes, uint32_t device, uint32_t stream, uint64_t durationNs,
                  bool isAsync);
  uint64_t memset(uint32_t value, uint64_t bytes, uint32_t device, uint32_t stream, uint64_t durationNs, bool isAsync);
  void runtimeCall(const char* name, uint64_t hostNs) { hostRecords_.runtimeCall(name, hostNs); }

 private:
  const SimOptions& options_;
  TaskLauncher& launcher_;
  HostRecords& hostRecords_;
  NameTable& names_;
  const Environment& environment_;
};

// The HCCL API an op name stands for: "hcom_allReduce__360_0_1", "allreduce" or "all_reduce" ->
// "HcclAllReduce"; an op HCCL does not have -> "Hccl" + its CamelCase ("my_op" -> "HcclMyOp").
std::string hcclApiNameFor(const char* opName);

}  // namespace torch_mspti::sim
