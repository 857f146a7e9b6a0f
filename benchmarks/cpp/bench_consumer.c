/* libbench_consumer.so: a bare MSPTI consumer for the small-op overhead benchmark
 * (benchmarks/overhead.py, via ctypes).
 *
 * In that benchmark's CPU-only arm torch-mspti's session does not run, yet the simulator must do the
 * work it does whenever kernel collection is on (mint ids, write kernel records, call buffer
 * callbacks), so that the ratio of the two arms isolates what the plugin adds. This consumer is
 * the minimum that makes MSPTI record: Subscribe -> RegisterCallbacks -> Enable(KERNEL), buffers
 * from malloc, completions that count KERNEL records; stop = FlushAll until the kernels came, then
 * Disable, Unsubscribe, FlushAll.
 * The callbacks are plain C: no Python, no GIL on MSPTI's threads. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mspti/mspti.h>

typedef msptiResult (*SubscribeFn)(msptiSubscriberHandle*, msptiCallbackFunc, void*);
typedef msptiResult (*UnsubscribeFn)(msptiSubscriberHandle);
typedef msptiResult (*RegisterFn)(msptiBuffersCallbackRequestFunc, msptiBuffersCallbackCompleteFunc);
typedef msptiResult (*KindFn)(msptiActivityKind);
typedef msptiResult (*FlushFn)(uint32_t);

static SubscribeFn pSubscribe;
static UnsubscribeFn pUnsubscribe;
static RegisterFn pRegister;
static KindFn pEnable, pDisable;
static FlushFn pFlushAll;
static msptiSubscriberHandle gSubscriber;
static atomic_uint_fast64_t gKernels, gRecords, gAbandoned;

#define BUFFER_BYTES (8u << 20)

static size_t record_size(uint32_t kind) {
  switch (kind) {
    case MSPTI_ACTIVITY_KIND_KERNEL: return sizeof(msptiActivityKernel);
    case MSPTI_ACTIVITY_KIND_API:
    case MSPTI_ACTIVITY_KIND_ACL_API:
    case MSPTI_ACTIVITY_KIND_NODE_API:
    case MSPTI_ACTIVITY_KIND_RUNTIME_API: return sizeof(msptiActivityApi);
    case MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: return sizeof(msptiActivityExternalCorrelation);
    default: return 0;
  }
}

static void on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (max_records) *max_records = 0;
  *buffer = (uint8_t*)aligned_alloc(8, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
}

static void on_complete(uint8_t* buffer, size_t size, size_t valid) {
  if (!buffer) return;
  size_t pos = 0;
  uint64_t kernels = 0, records = 0;
  if (valid > size) valid = size;
  while (pos + sizeof(uint32_t) <= valid) {
    uint32_t kind;
    memcpy(&kind, buffer + pos, sizeof(kind));
    size_t n = record_size(kind);
    if (n == 0 || n > valid - pos) {
      atomic_fetch_add(&gAbandoned, 1);
      break;
    }
    kernels += kind == MSPTI_ACTIVITY_KIND_KERNEL;
    ++records;
    pos += n;
  }
  atomic_fetch_add(&gKernels, kernels);
  atomic_fetch_add(&gRecords, records);
  free(buffer);
}

/* Resolves the MSPTI entry points from the library at `path` (the already loaded copy when the
 * process has one). Returns 0, or -1 when something is missing. */
int bench_consumer_load(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) return -1;
  pSubscribe = (SubscribeFn)dlsym(h, "msptiSubscribe");
  pUnsubscribe = (UnsubscribeFn)dlsym(h, "msptiUnsubscribe");
  pRegister = (RegisterFn)dlsym(h, "msptiActivityRegisterCallbacks");
  pEnable = (KindFn)dlsym(h, "msptiActivityEnable");
  pDisable = (KindFn)dlsym(h, "msptiActivityDisable");
  pFlushAll = (FlushFn)dlsym(h, "msptiActivityFlushAll");
  return pSubscribe && pUnsubscribe && pRegister && pEnable && pDisable && pFlushAll ? 0 : -1;
}

/* Subscribe -> RegisterCallbacks -> Enable(KERNEL). Returns 0 or the first failing result. */
int bench_consumer_start(void) {
  atomic_store(&gKernels, 0);
  atomic_store(&gRecords, 0);
  atomic_store(&gAbandoned, 0);
  msptiResult r = pSubscribe(&gSubscriber, NULL, NULL);
  if (r != MSPTI_SUCCESS) return (int)r;
  r = pRegister(on_request, on_complete);
  if (r == MSPTI_SUCCESS) r = pEnable(MSPTI_ACTIVITY_KIND_KERNEL);
  if (r != MSPTI_SUCCESS) {
    pUnsubscribe(gSubscriber);
    return (int)r;
  }
  return 0;
}

/* FlushAll until `expected` KERNEL records came (at most 2 s), then Disable(KERNEL), Unsubscribe,
 * FlushAll: MSPTI drops what its reader parses after the Disable (docs/mspti.md 2.3), so the records
 * are taken first. Returns the KERNEL records received since start, or -1 when a buffer could not be
 * walked to its end. */
int64_t bench_consumer_stop(int64_t expected) {
  for (int i = 0; i < 2000 && (int64_t)atomic_load(&gKernels) < expected; ++i) {
    pFlushAll(1);
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  pDisable(MSPTI_ACTIVITY_KIND_KERNEL);
  pUnsubscribe(gSubscriber);
  pFlushAll(1);
  if (atomic_load(&gAbandoned)) return -1;
  return (int64_t)atomic_load(&gKernels);
}
