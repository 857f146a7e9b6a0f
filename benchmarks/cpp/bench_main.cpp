// torch_mspti_bench <pushpop|drain|process|walk> [--key=value ...]
// Each subcommand prints one JSON object (raw samples per arm; benchmarks/run.py computes
// medians and spreads) on stdout and exits non-zero when a completeness check fails.
#include <dlfcn.h>
#include <malloc.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>

#include "BenchCommon.h"
#include "Config.h"
#include "MsptiLibrary.h"

int runPushPop(const bench::Args& args);
int runDrain(const bench::Args& args);
int runProcess(const bench::Args& args);
int runWalk(const bench::Args& args);

// ---- allocation tracker: replaces the global operator new/delete of the process ----
namespace {
std::atomic<bool> gTrack{false};
std::atomic<int64_t> gBytes{0}, gPeak{0};

void* allocate(size_t n, size_t align) {
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  if (gTrack.load(std::memory_order_relaxed)) {
    const int64_t now = gBytes.fetch_add(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed) +
                        static_cast<int64_t>(malloc_usable_size(p));
    int64_t peak = gPeak.load(std::memory_order_relaxed);
    while (now > peak && !gPeak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  }
  return p;
}
void release(void* p) noexcept {
  if (!p) return;
  if (gTrack.load(std::memory_order_relaxed))
    gBytes.fetch_sub(static_cast<int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
}  // namespace

void* operator new(size_t n) { return allocate(n, 0); }
void* operator new[](size_t n) { return allocate(n, 0); }
void* operator new(size_t n, std::align_val_t a) { return allocate(n, static_cast<size_t>(a)); }
void* operator new[](size_t n, std::align_val_t a) { return allocate(n, static_cast<size_t>(a)); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }

namespace bench {

void trackAllocations(bool on) { gTrack.store(on); }
int64_t trackedBytes() { return gBytes.load(); }
int64_t trackedPeak() { return gPeak.load(); }
void resetTrackedPeak() { gPeak.store(gBytes.load()); }

namespace {
template <typename Fn>
void resolve(void* h, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(h, name));
  if (!out) throw std::runtime_error(std::string("simulator lacks ") + name);
}
}  // namespace

const Sim& loadSim() {
  static const Sim sim = [] {
    auto& lib = torch_mspti::MsptiLibrary::instance();
    if (!lib.loaded()) {
      const std::string err = torch_mspti::Config::instance().setString("library_path", MSPTI_SIM_PATH);
      if (!err.empty()) throw std::runtime_error(err);
      if (!lib.ensureLoaded()) throw std::runtime_error("cannot load the simulator: " + lib.report().reason);
    }
    void* h = dlopen(MSPTI_SIM_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (!h) throw std::runtime_error("simulator not loaded by MsptiLibrary");
    Sim s;
    resolve(h, "msptiSimLaunchKernel", s.launchKernel);
    resolve(h, "msptiSimLaunchKernels", s.launchKernels);
    resolve(h, "msptiSimSynchronize", s.synchronize);
    resolve(h, "msptiSimSetOption", s.setOption);
    resolve(h, "msptiSimGetStats", s.getStats);
    resolve(h, "msptiSimResetOptions", s.resetOptions);
    return s;
  }();
  return sim;
}

}  // namespace bench

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: torch_mspti_bench <pushpop|drain|process|walk> [--key=value ...]\n";
    return 2;
  }
  try {
    const std::string cmd = argv[1];
    bench::Args args(argc, argv, 2);
    if (cmd == "pushpop") return runPushPop(args);
    if (cmd == "drain") return runDrain(args);
    if (cmd == "process") return runProcess(args);
    if (cmd == "walk") return runWalk(args);
    std::cerr << "unknown benchmark " << cmd << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "torch_mspti_bench: " << e.what() << "\n";
    return 1;
  }
}
