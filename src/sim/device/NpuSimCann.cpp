// The fake CANN layer under the real MSPTI: binding and kernel launches. See NpuSimCann.h.
#include "NpuSimCann.h"

#include <c10/util/Exception.h>

#include <dlfcn.h>

#include <array>
#include <atomic>
#include <mutex>

namespace torch_mspti::sim {
namespace {

// libfakecann.so's control API (fakecann.c): the runtime opening a device, and one kernel launch
// as CANN reports it; the device begin/end come back in device ticks (1 ns).
using OpenDeviceFn = int (*)(uint32_t);
using LaunchKernelFn = int (*)(uint32_t, uint16_t, uint16_t, const char*, const char*, uint64_t, uint64_t*, uint64_t*);

constexpr const char* kMakeRoot = "bash make_root.sh DIR (the realmspti fixture's script)";
// Task ids per (device, stream): the fake layer has one device; stream ids are 16 bits there.
constexpr int kDevices = 1;
constexpr int kStreams = 1 << 16;

std::mutex g_mu;
std::string g_root;  // guarded by g_mu
std::atomic<LaunchKernelFn> g_launch_kernel{nullptr};
std::array<std::array<std::atomic<uint16_t>, kStreams>, kDevices> g_next_task{};

}  // namespace

void bind_cann(const std::string& root) {
  std::lock_guard<std::mutex> g(g_mu);
  if (g_launch_kernel.load() != nullptr) {
    TORCH_CHECK(root == g_root, "simulated NPU: already bound to the CANN root '", g_root, "', cannot switch to '",
                root, "'");
    return;
  }
  const std::string path = root + "/lib64/libprofapi.so";
  // RTLD_GLOBAL: the mstx front end (mstxMarkA & co.) that torch.npu.mstx calls lives here too.
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);  // never closed
  TORCH_CHECK(h != nullptr, "simulated NPU: cannot load the fake CANN layer '", path, "': ", dlerror(),
              "; make the CANN root with ", kMakeRoot);
  auto sym = [&](const char* n) {
    void* p = dlsym(h, n);
    TORCH_CHECK(p != nullptr, "simulated NPU: '", path, "' does not export ", n,
                "; it is not the fake CANN layer (libfakecann.so); make the CANN root with ", kMakeRoot);
    return p;
  };
  auto open_device = reinterpret_cast<OpenDeviceFn>(sym("fakecann_open_device"));
  auto launch_kernel = reinterpret_cast<LaunchKernelFn>(sym("fakecann_launch_kernel"));
  open_device(0);
  g_root = root;
  g_launch_kernel = launch_kernel;
}

std::string cann_root() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_root;
}

bool cann_bound() { return g_launch_kernel.load() != nullptr; }

void cann_launch(const char* name, int device, int64_t stream, uint64_t duration_ns, uint32_t count) {
  LaunchKernelFn fn = g_launch_kernel.load();
  if (fn == nullptr || count == 0 || device < 0 || device >= kDevices || stream < 0 || stream >= kStreams) return;
  const uint64_t each = duration_ns / count;
  auto& next = g_next_task[device][stream];
  for (uint32_t i = 0; i < count; ++i) {
    const uint16_t task = next.fetch_add(1);  // wraps at 65536
    uint64_t begin = 0, end = 0;
    fn(static_cast<uint32_t>(device), static_cast<uint16_t>(stream), task, name, name, each, &begin, &end);
  }
}

}  // namespace torch_mspti::sim
