// Loads libmspti_sim.so like a plugin (dlopen, never dlclose), leaves work in flight and returns
// from main. The process must exit 0 promptly: no hang on lifelong threads, no abort from a
// joinable std::thread or a destroyed mutex. Modes:
//   idle        callbacks registered (ActivityManager thread running), nothing else
//   pending     kernel records scheduled on the driver reader, current buffer partly filled
//   completing  completion worker threads still inside the complete callback at exit
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "mspti/mspti.h"
#include "mspti_sim.h"

namespace {

template <typename Fn>
Fn symbol(void* lib, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) {
    std::fprintf(stderr, "missing %s\n", name);
    std::exit(2);
  }
  return fn;
}

bool gSlowCompletion = false;

void onRequest(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  *size = 1024;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *maxNumRecords = 0;
}

void onComplete(uint8_t* buffer, size_t, size_t) {
  if (gSlowCompletion) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::free(buffer);
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "idle";
  void* lib = dlopen(MSPTI_SIM_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  auto registerCallbacks = symbol<decltype(&msptiActivityRegisterCallbacks)>(lib, "msptiActivityRegisterCallbacks");
  auto subscribe = symbol<decltype(&msptiSubscribe)>(lib, "msptiSubscribe");
  auto enable = symbol<decltype(&msptiActivityEnable)>(lib, "msptiActivityEnable");
  auto launch = symbol<decltype(&msptiSimLaunchKernels)>(lib, "msptiSimLaunchKernels");
  auto setOption = symbol<decltype(&msptiSimSetOption)>(lib, "msptiSimSetOption");

  if (registerCallbacks(&onRequest, &onComplete) != MSPTI_SUCCESS) {
    return 3;
  }
  if (std::strcmp(mode, "idle") == 0) {
    return 0;
  }
  msptiSubscriberHandle handle = nullptr;
  if (subscribe(&handle, nullptr, nullptr) != MSPTI_SUCCESS || enable(MSPTI_ACTIVITY_KIND_KERNEL) != MSPTI_SUCCESS ||
      enable(MSPTI_ACTIVITY_KIND_RUNTIME_API) != MSPTI_SUCCESS) {
    return 4;
  }
  if (std::strcmp(mode, "pending") == 0) {
    setOption("delivery_delay_ns", 5'000'000'000);
    launch("k", nullptr, 0, 0, 1000, 16);
    return 0;
  }
  if (std::strcmp(mode, "completing") == 0) {
    gSlowCompletion = true;
    setOption("delivery_delay_ns", 0);
    for (int i = 0; i < 200; ++i) {
      launch("k", nullptr, 0, 0, 1000, 1);  // fills ~10 buffers of 1 KiB
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // workers are in the callback
    return 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
