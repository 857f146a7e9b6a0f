// What the benchmark executable replaces for the whole process (it exports its symbols, so the
// libraries it loads, libbench_pushpop.so and the simulator included, call these too):
//  * operator new/delete: byte tracking (bytes live and their peak) while tracking is on, for the
//    memory figures of the trace-processing benchmark;
//  * malloc, calloc, realloc, memalign, posix_memalign, aligned_alloc, valloc: a per-thread count
//    of calls, forwarded to glibc's allocator (__libc_*), so a benchmark can show that a code
//    path makes no heap call in its steady state;
//  * pthread_mutex_lock/trylock, pthread_rwlock_rdlock/wrlock: a per-thread count of calls,
//    forwarded to the next definition (glibc's), so a benchmark can show that a path takes no
//    lock. Locks taken inside glibc itself (malloc's arena lock, the dynamic loader's) are not
//    seen: they do not go through these symbols.
// The counters are plain thread-locals of the executable (static TLS, no allocation, no lock).
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <new>

#include "BenchCommon.h"

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void* __libc_valloc(size_t);
}

namespace {

thread_local uint64_t tHeapCalls = 0;
thread_local uint64_t tLockCalls = 0;

template <typename Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" {

void* malloc(size_t n) {
  ++tHeapCalls;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  ++tHeapCalls;
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  ++tHeapCalls;
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  ++tHeapCalls;
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) {
  ++tHeapCalls;
  return __libc_memalign(align, n);
}
void* valloc(size_t n) {
  ++tHeapCalls;
  return __libc_valloc(n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  ++tHeapCalls;
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

// glibc's own locking (the loader's recursive lock, malloc's arena lock) does not call these, so
// resolving the next definition with dlsym cannot recurse.
int pthread_mutex_lock(pthread_mutex_t* m) {
  static auto real = next<int (*)(pthread_mutex_t*)>("pthread_mutex_lock");
  ++tLockCalls;
  return real(m);
}
int pthread_mutex_trylock(pthread_mutex_t* m) {
  static auto real = next<int (*)(pthread_mutex_t*)>("pthread_mutex_trylock");
  ++tLockCalls;
  return real(m);
}
int pthread_rwlock_rdlock(pthread_rwlock_t* l) {
  static auto real = next<int (*)(pthread_rwlock_t*)>("pthread_rwlock_rdlock");
  ++tLockCalls;
  return real(l);
}
int pthread_rwlock_wrlock(pthread_rwlock_t* l) {
  static auto real = next<int (*)(pthread_rwlock_t*)>("pthread_rwlock_wrlock");
  ++tLockCalls;
  return real(l);
}

}  // extern "C"

// ---- operator new/delete: byte tracking ----
namespace {
std::atomic<bool> gTrack{false};
std::atomic<int64_t> gBytes{0}, gPeak{0};

void* allocate(size_t n, size_t align) {
  void* p =
      align > alignof(std::max_align_t) ? aligned_alloc(align, (n + align - 1) / align * align) : malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  if (gTrack.load(std::memory_order_relaxed)) {
    const auto size = static_cast<int64_t>(malloc_usable_size(p));
    const int64_t now = gBytes.fetch_add(size, std::memory_order_relaxed) + size;
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
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, size_t) noexcept { release(p); }
void operator delete[](void* p, size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }

namespace bench {

void trackAllocations(bool on) { gTrack.store(on); }
int64_t trackedBytes() { return gBytes.load(); }
int64_t trackedPeak() { return gPeak.load(); }
void resetTrackedPeak() { gPeak.store(gBytes.load()); }
ThreadCalls threadCalls() { return {tHeapCalls, tLockCalls}; }

}  // namespace bench
