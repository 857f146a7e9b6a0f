// What the simulated NPU reports about itself (torch.npu.get_device_properties and
// get_device_name; the profiler plugin can report the same as the trace's deviceProperties).
// Every simulated device is modelled on an Ascend 910B3 (Atlas 800T A2 class): 64 GiB HBM, 20 AI
// (cube) cores, 40 vector cores, 192 MiB L2. The fields are those of torch_npu's
// _NPUDeviceProperties (torch_npu/csrc/npu/Module.cpp: name, total_memory, cube_core_num,
// vector_core_num, L2_cache_size). The name says "(simulated)" so that no trace passes for one
// taken on hardware.
#include "NpuSimRuntime.h"

namespace torch_mspti::sim {
namespace {

constexpr const char* kName = "Ascend910B3 (simulated)";
constexpr uint64_t kTotalMemory = 64ull << 30;
constexpr int64_t kCubeCores = 20;
constexpr int64_t kVectorCores = 40;
constexpr uint64_t kL2CacheSize = 192ull << 20;

}  // namespace

DeviceProperties device_properties(c10::DeviceIndex device) {
  check_device(device);
  return DeviceProperties{kName, kTotalMemory, kCubeCores, kVectorCores, kL2CacheSize};
}

}  // namespace torch_mspti::sim
