#include "CannRuntime.h"

#include <cctype>
#include <cstdio>
#include <cstring>
#include <string>

namespace torch_mspti::sim {

namespace {

constexpr const char* kDefaultKernelType = "KERNEL_AICORE";
// The runtime API the CANN runtime reports for a kernel launch at RUNTIME level (mspti.md 4).
constexpr const char* kLaunchApiName = "LaunchKernelV2";

// HCCL's collective API names (HcclAllReduce, ...), keyed by the lower-case op name without
// underscores.
struct HcclApi {
  const char* key;
  const char* api;
};
constexpr HcclApi kHcclApis[] = {
    {"allreduce", "HcclAllReduce"},
    {"allgather", "HcclAllGather"},
    {"allgatherv", "HcclAllGatherV"},
    {"reducescatter", "HcclReduceScatter"},
    {"reducescatterv", "HcclReduceScatterV"},
    {"broadcast", "HcclBroadcast"},
    {"alltoall", "HcclAlltoAll"},
    {"alltoallv", "HcclAlltoAllV"},
    {"alltoallvc", "HcclAlltoAllVC"},
    {"reduce", "HcclReduce"},
    {"scatter", "HcclScatter"},
    {"send", "HcclSend"},
    {"recv", "HcclRecv"},
    {"barrier", "HcclBarrier"},
    {"batchsendrecv", "HcclBatchSendRecv"},
};

}  // namespace

std::string hcclApiNameFor(const char* opName) {
  std::string op = opName == nullptr ? "" : opName;
  for (const char* prefix : {"hcom_", "hccl_", "lccl_"}) {
    if (op.rfind(prefix, 0) == 0) {
      op = op.substr(std::strlen(prefix));
      break;
    }
  }
  if (const size_t suffix = op.find("__"); suffix != std::string::npos) {
    op.resize(suffix);  // "allReduce__360_0_1": the op's instance suffix
  }
  std::string key;
  for (char c : op) {
    if (c != '_') key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (const HcclApi& known : kHcclApis) {
    if (key == known.key) return known.api;
  }
  std::string camel = "Hccl";
  bool upper = true;
  for (char c : op) {
    if (c == '_') {
      upper = true;
      continue;
    }
    camel += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return camel;
}

namespace {

// A launch of `count` tasks of `kind` on (device, stream); the caller sets the kind's own fields
// and whether the runtime reports the task to MSPTI.
DeviceTask taskOn(msptiActivityKind kind, uint32_t device, uint32_t stream, uint64_t durationNs, uint32_t count,
                  const char* apiName, bool hostWaits) {
  DeviceTask task{};
  task.prototype = makeDeviceRecord(kind);
  task.device = device;
  task.stream = stream;
  task.durationNs = durationNs;
  task.count = count;
  task.apiName = apiName;
  task.hostWaits = hostWaits;
  return task;
}

}  // namespace

uint64_t CannRuntime::launchKernels(const char* name, const char* type, uint32_t device, uint32_t stream,
                                    uint64_t durationNs, uint32_t count) {
  DeviceTask task = taskOn(MSPTI_ACTIVITY_KIND_KERNEL, device, stream, durationNs, count, kLaunchApiName, false);
  task.prototype.kernel.type = names_.intern(type == nullptr ? kDefaultKernelType : type);
  task.prototype.kernel.name = names_.intern(name);
  // Only task-track reports whose type starts with "KERNEL" reach the kernel parser (mspti.md 4).
  task.reportable = std::strncmp(task.prototype.kernel.type, "KERNEL", 6) == 0;
  const auto calls = static_cast<uint32_t>(options_.get(Option::kApiRecordsPerLaunch));
  task.callsBefore = (calls + 1) / 2;
  task.callsAfter = calls / 2;
  return launcher_.launch(task);
}

uint64_t CannRuntime::launchCommunication(const char* name, const char* algType, const char* commName,
                                          uint32_t dataType, uint64_t count, uint32_t device, uint32_t stream,
                                          uint64_t durationNs, const char* apiName) {
  const char* api = names_.intern(apiName != nullptr ? apiName : hcclApiNameFor(name).c_str());
  DeviceTask task = taskOn(MSPTI_ACTIVITY_KIND_COMMUNICATION, device, stream, durationNs, 1, api, false);
  msptiActivityCommunication& record = task.prototype.communication;
  record.dataType = dataType;
  record.count = count;
  record.algType = names_.intern(algType);
  record.name = names_.intern(name);
  record.commName = names_.intern(commName);
  task.reportable = true;  // an id is minted at the communication node launch (mspti.md 4)
  return launcher_.launch(task);
}

uint64_t CannRuntime::memcpy(uint32_t copyKind, uint64_t bytes, uint32_t device, uint32_t stream, uint64_t durationNs,
                             bool isAsync) {
  if (copyKind > MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT) {
    std::fprintf(stderr,
                 "libmspti_sim: msptiSimMemcpy: copyKind %u is not a msptiActivityMemcpyKind (0..5: UNKNOWN, HTOH, "
                 "HTOD, DTOH, DTOD, DEFAULT); nothing was copied\n",
                 copyKind);
    return MSPTI_INVALID_CORRELATION_ID;
  }
  DeviceTask task = taskOn(MSPTI_ACTIVITY_KIND_MEMCPY, device, stream, durationNs, 1,
                           isAsync ? "aclrtMemcpyAsync" : "aclrtMemcpy", !isAsync);
  task.prototype.memoryCopy.copyKind = static_cast<msptiActivityMemcpyKind>(copyKind);
  task.prototype.memoryCopy.bytes = bytes;
  task.prototype.memoryCopy.isAsync = isAsync ? 1 : 0;
  // The ACL memory API is interposed by libmspti only when it was preloaded (mspti.md 5.5).
  task.reportable = environment_.ldPreloadHasMspti();
  return launcher_.launch(task);
}

uint64_t CannRuntime::memset(uint32_t value, uint64_t bytes, uint32_t device, uint32_t stream, uint64_t durationNs,
                             bool isAsync) {
  DeviceTask task = taskOn(MSPTI_ACTIVITY_KIND_MEMSET, device, stream, durationNs, 1,
                           isAsync ? "aclrtMemsetAsync" : "aclrtMemset", !isAsync);
  task.prototype.memorySet.value = value;
  task.prototype.memorySet.bytes = bytes;
  task.prototype.memorySet.isAsync = isAsync ? 1 : 0;
  task.reportable = environment_.ldPreloadHasMspti();
  return launcher_.launch(task);
}

}  // namespace torch_mspti::sim
