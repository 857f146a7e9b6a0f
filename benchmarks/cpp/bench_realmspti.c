/* bench_realmspti: the real MSPTI (libmspti.so) over the fake CANN layer of the realmspti fixture
 * (its README.md), driven from plain C; run by benchmarks/real_mspti.py, which compiles it with gcc
 * at bench time (no CMake target: the fixture is optional).
 *
 *   bench_realmspti drain ROOT N MODE [COMM]
 *       The seed-style consumer (torch_npu's MsptiActivityProfilerPoc, docs/mspti.md 9, with the
 *       plugin's kinds): Subscribe, RegisterCallbacks, Enable KERNEL + EXTERNAL_CORRELATION +
 *       RUNTIME_API (+ COMMUNICATION when COMM is 1, the default), the device opened, N launches,
 *       each inside a CUSTOM0 push/pop; then the timed stop:
 *         MODE seed       FlushAll, Disable each kind, Unsubscribe, FlushAll
 *         MODE seed_poll  torch_npu's own: FlushAll + 25 ms sleep until three polls add no record
 *                         (at most 400), Disable each kind, Unsubscribe, FlushAll + 25 ms sleep
 *       One JSON line: stop_ms, unsubscribe_ms (msptiUnsubscribe alone), the records received.
 *
 *   bench_realmspti launch ROOT LAUNCHES REPEATS
 *       MSPTI's cost per launch on the launching thread by kind set (B1c on the real library).
 *       Each repeat: "no subscriber" (before Subscribe on even repeats, after Unsubscribe on odd
 *       ones), then under one subscription the kind-set arms in rotated order; each arm enables
 *       its kinds, times LAUNCHES launches (wall and thread CPU), waits until every kernel record
 *       has come back (FlushAll, 1 ms sleeps, at most 5 s: the real library drops records its
 *       reader has not parsed when KERNEL is disabled), then disables its kinds. One JSON line:
 *       per arm the ns per launch of every repeat and the records it got.
 *
 * Exit 0 with the JSON on stdout, 1 on a failed MSPTI call (message on stderr). Completeness is
 * judged by the caller (records received against launches). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mspti/mspti.h>

typedef msptiResult (*SubscribeFn)(msptiSubscriberHandle*, msptiCallbackFunc, void*);
typedef msptiResult (*UnsubscribeFn)(msptiSubscriberHandle);
typedef msptiResult (*RegisterFn)(msptiBuffersCallbackRequestFunc, msptiBuffersCallbackCompleteFunc);
typedef msptiResult (*KindFn)(msptiActivityKind);
typedef msptiResult (*FlushFn)(uint32_t);
typedef msptiResult (*NextFn)(uint8_t*, size_t, msptiActivity**);
typedef msptiResult (*PushFn)(msptiExternalCorrelationKind, uint64_t);
typedef msptiResult (*PopFn)(msptiExternalCorrelationKind, uint64_t*);
typedef int (*OpenFn)(uint32_t);
typedef int (*LaunchFn)(uint32_t, uint16_t, uint16_t, const char*, const char*, uint64_t, uint64_t*, uint64_t*);

static SubscribeFn pSubscribe;
static UnsubscribeFn pUnsubscribe;
static RegisterFn pRegister;
static KindFn pEnable, pDisable;
static FlushFn pFlushAll;
static NextFn pNext;
static PushFn pPush;
static PopFn pPop;
static OpenFn pOpen;
static LaunchFn pLaunch;

static atomic_uint_fast64_t gByKind[MSPTI_ACTIVITY_KIND_COUNT + 1];
static atomic_uint_fast64_t gBuffers, gBadRecords;

#define BUFFER_BYTES (8u << 20)
#define STREAM 3
#define KERNEL_NS 5000

static void on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (max_records) *max_records = 0;
  *buffer = (uint8_t*)aligned_alloc(8, BUFFER_BYTES);
  *size = *buffer ? BUFFER_BYTES : 0;
}

/* Walks the buffer with msptiActivityGetNextRecord (one thread per buffer, to its end) and counts
 * the records by kind. */
static void on_complete(uint8_t* buffer, size_t size, size_t valid) {
  (void)size;
  if (!buffer) return;
  atomic_fetch_add(&gBuffers, 1);
  msptiActivity* rec = NULL;
  for (;;) {
    msptiResult r = pNext(buffer, valid, &rec);
    if (r == MSPTI_ERROR_MAX_LIMIT_REACHED) break;
    if (r != MSPTI_SUCCESS || !rec) {
      atomic_fetch_add(&gBadRecords, 1);
      break;
    }
    uint32_t k = (uint32_t)rec->kind;
    atomic_fetch_add(&gByKind[k < MSPTI_ACTIVITY_KIND_COUNT ? k : MSPTI_ACTIVITY_KIND_COUNT], 1);
  }
  free(buffer);
}

static void die(const char* what, int r) {
  fprintf(stderr, "bench_realmspti: %s failed (%d)\n", what, r);
  exit(1);
}

static void load(const char* root) {
  char path[4096];
  /* The fake CANN first, global: libmspti.so dlopens it under the CANN names and shares this copy. */
  snprintf(path, sizeof path, "%s/lib64/libprofapi.so", root);
  void* fake = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!fake) die(dlerror(), -1);
  snprintf(path, sizeof path, "%s/lib64/libmspti.so", root);
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) die(dlerror(), -1);
  pSubscribe = (SubscribeFn)dlsym(h, "msptiSubscribe");
  pUnsubscribe = (UnsubscribeFn)dlsym(h, "msptiUnsubscribe");
  pRegister = (RegisterFn)dlsym(h, "msptiActivityRegisterCallbacks");
  pEnable = (KindFn)dlsym(h, "msptiActivityEnable");
  pDisable = (KindFn)dlsym(h, "msptiActivityDisable");
  pFlushAll = (FlushFn)dlsym(h, "msptiActivityFlushAll");
  pNext = (NextFn)dlsym(h, "msptiActivityGetNextRecord");
  pPush = (PushFn)dlsym(h, "msptiActivityPushExternalCorrelationId");
  pPop = (PopFn)dlsym(h, "msptiActivityPopExternalCorrelationId");
  pOpen = (OpenFn)dlsym(fake, "fakecann_open_device");
  pLaunch = (LaunchFn)dlsym(fake, "fakecann_launch_kernel");
  if (!(pSubscribe && pUnsubscribe && pRegister && pEnable && pDisable && pFlushAll && pNext && pPush && pPop &&
        pOpen && pLaunch))
    die("dlsym", -1);
}

static int64_t now_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

static uint64_t records(void) {
  uint64_t n = 0;
  for (int k = 0; k <= MSPTI_ACTIVITY_KIND_COUNT; ++k) n += atomic_load(&gByKind[k]);
  return n;
}

static void reset_counts(void) {
  for (int k = 0; k <= MSPTI_ACTIVITY_KIND_COUNT; ++k) atomic_store(&gByKind[k], 0);
}

static void launch(uint64_t i, int bracket) {
  if (bracket) {
    msptiResult r = pPush(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, i + 1);
    if (r != MSPTI_SUCCESS) die("push", r);
  }
  int rc = pLaunch(0, STREAM, (uint16_t)(i & 0xffff), "MatMulV2", "aclnnMatmul", KERNEL_NS, NULL, NULL);
  if (rc) die("fakecann_launch_kernel", rc);
  if (bracket) {
    uint64_t last = 0;
    msptiResult r = pPop(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
    if (r != MSPTI_SUCCESS) die("pop", r);
  }
}

static void subscribe(msptiSubscriberHandle* sub) {
  msptiResult r = pSubscribe(sub, NULL, NULL);
  if (r != MSPTI_SUCCESS) die("msptiSubscribe", r);
  r = pRegister(on_request, on_complete);
  if (r != MSPTI_SUCCESS) die("msptiActivityRegisterCallbacks", r);
}

static void print_counts(void) {
  printf(
      "\"records\": {\"KERNEL\": %llu, \"EXTERNAL_CORRELATION\": %llu, \"RUNTIME_API\": %llu, \"all\": %llu}, "
      "\"buffers\": %llu, \"bad_records\": %llu",
      (unsigned long long)atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_KERNEL]),
      (unsigned long long)atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]),
      (unsigned long long)atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API]), (unsigned long long)records(),
      (unsigned long long)atomic_load(&gBuffers), (unsigned long long)atomic_load(&gBadRecords));
}

/* ------------------------------------------------------------------ drain */

static int run_drain(const char* root, long n, const char* mode, int comm) {
  const int poll = strcmp(mode, "seed_poll") == 0;
  if (!poll && strcmp(mode, "seed") != 0) die("mode (seed or seed_poll)", -1);
  load(root);
  msptiActivityKind kinds[4] = {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                MSPTI_ACTIVITY_KIND_RUNTIME_API, MSPTI_ACTIVITY_KIND_COMMUNICATION};
  const int nk = comm ? 4 : 3;
  msptiSubscriberHandle sub = NULL;
  subscribe(&sub);
  for (int i = 0; i < nk; ++i) {
    msptiResult r = pEnable(kinds[i]);
    if (r != MSPTI_SUCCESS) die("msptiActivityEnable", r);
  }
  pOpen(0);
  for (long i = 0; i < n; ++i) launch((uint64_t)i, 1);

  const int64_t t0 = now_ns(CLOCK_MONOTONIC);
  int polls = 0;
  if (poll) {
    int quiet = 0;
    uint64_t prev = records();
    while (polls < 400) {
      pFlushAll(1);
      sleep_ms(25);
      ++polls;
      uint64_t cur = records();
      quiet = cur == prev ? quiet + 1 : 0;
      prev = cur;
      if (quiet >= 3) break;
    }
  } else {
    pFlushAll(1);
  }
  const int64_t td = now_ns(CLOCK_MONOTONIC);
  for (int i = 0; i < nk; ++i) pDisable(kinds[i]);
  const int64_t tu0 = now_ns(CLOCK_MONOTONIC);
  msptiResult ru = pUnsubscribe(sub);
  const int64_t tu1 = now_ns(CLOCK_MONOTONIC);
  pFlushAll(1);
  if (poll) sleep_ms(25);
  const int64_t t1 = now_ns(CLOCK_MONOTONIC);
  printf(
      "{\"ok\": true, \"mode\": \"%s\", \"n\": %ld, \"communication\": %d, \"stop_ms\": %.3f, "
      "\"poll_ms\": %.3f, \"disable_ms\": %.3f, \"unsubscribe_ms\": %.3f, \"unsubscribe_result\": %d, "
      "\"polls\": %d, ",
      mode, n, comm, (t1 - t0) / 1e6, (td - t0) / 1e6, (tu0 - td) / 1e6, (tu1 - tu0) / 1e6, (int)ru, polls);
  print_counts();
  printf("}\n");
  fflush(stdout);
  return 0;
}

/* ----------------------------------------------------------------- launch */

struct arm {
  const char* name;
  msptiActivityKind kinds[3];
  int nk;
  int bracket;
};

static const struct arm kArms[] = {
    {"kernel_only", {MSPTI_ACTIVITY_KIND_KERNEL}, 1, 0},
    {"kernel_pushpop", {MSPTI_ACTIVITY_KIND_KERNEL}, 1, 1},
    {"hints", {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}, 2, 1},
    {"calls", {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_RUNTIME_API}, 2, 1},
    {"plugin_kinds",
     {MSPTI_ACTIVITY_KIND_KERNEL, MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, MSPTI_ACTIVITY_KIND_RUNTIME_API},
     3,
     1},
};
#define NARMS (int)(sizeof kArms / sizeof kArms[0])
#define MAX_REPEATS 64

struct result {
  double wall[MAX_REPEATS], cpu[MAX_REPEATS];
  uint64_t kernels[MAX_REPEATS], ext[MAX_REPEATS], calls[MAX_REPEATS];
  double wait_ms[MAX_REPEATS];
};
static struct result gNoSub, gArm[NARMS];

static void timed_loop(long n, int bracket, double* wall, double* cpu) {
  const int64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < n; ++i) launch((uint64_t)i, bracket);
  const int64_t w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
  *wall = (double)(w1 - w0) / (double)n;
  *cpu = (double)(c1 - c0) / (double)n;
}

static void run_arm(const struct arm* a, long n, int rep, struct result* out) {
  reset_counts();
  for (int i = 0; i < a->nk; ++i) {
    msptiResult r = pEnable(a->kinds[i]);
    if (r != MSPTI_SUCCESS) die("msptiActivityEnable", r);
  }
  timed_loop(n, a->bracket, &out->wall[rep], &out->cpu[rep]);
  /* Every kernel back before its kind is switched off (the real library drops what its reader holds). */
  const int64_t t0 = now_ns(CLOCK_MONOTONIC);
  while (atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_KERNEL]) < (uint64_t)n &&
         now_ns(CLOCK_MONOTONIC) - t0 < 5000000000LL) {
    pFlushAll(1);
    sleep_ms(1);
  }
  out->wait_ms[rep] = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e6;
  for (int i = 0; i < a->nk; ++i) pDisable(a->kinds[i]);
  pFlushAll(1);
  out->kernels[rep] = atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_KERNEL]);
  out->ext[rep] = atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION]);
  out->calls[rep] = atomic_load(&gByKind[MSPTI_ACTIVITY_KIND_RUNTIME_API]);
}

static void print_array_d(const char* key, const double* v, int n) {
  printf("\"%s\": [", key);
  for (int i = 0; i < n; ++i) printf("%s%.2f", i ? ", " : "", v[i]);
  printf("]");
}

static void print_array_u(const char* key, const uint64_t* v, int n) {
  printf("\"%s\": [", key);
  for (int i = 0; i < n; ++i) printf("%s%llu", i ? ", " : "", (unsigned long long)v[i]);
  printf("]");
}

static void print_result(const char* name, const struct result* r, int reps, int with_records) {
  printf("\"%s\": {", name);
  print_array_d("wall_ns", r->wall, reps);
  printf(", ");
  print_array_d("cpu_ns", r->cpu, reps);
  if (with_records) {
    printf(", ");
    print_array_u("kernels", r->kernels, reps);
    printf(", ");
    print_array_u("external_correlation", r->ext, reps);
    printf(", ");
    print_array_u("runtime_api", r->calls, reps);
    printf(", ");
    print_array_d("wait_ms", r->wait_ms, reps);
  }
  printf("}");
}

static int run_launch(const char* root, long n, int reps) {
  if (reps < 1 || reps > MAX_REPEATS) die("repeats (1..64)", reps);
  if (n < 1 || n > 60000) die("launches (1..60000: 16-bit task ids stay unique)", (int)n);
  load(root);
  pOpen(0);
  for (long i = 0; i < 1000; ++i) launch((uint64_t)i, 0); /* warm-up, no subscriber */
  double unsub_ms[MAX_REPEATS];
  for (int rep = 0; rep < reps; ++rep) {
    if (rep % 2 == 0) timed_loop(n, 0, &gNoSub.wall[rep], &gNoSub.cpu[rep]);
    msptiSubscriberHandle sub = NULL;
    subscribe(&sub);
    pOpen(0);
    for (int k = 0; k < NARMS; ++k) {
      const int a = (k + rep) % NARMS;
      run_arm(&kArms[a], n, rep, &gArm[a]);
    }
    const int64_t u0 = now_ns(CLOCK_MONOTONIC);
    msptiResult r = pUnsubscribe(sub);
    unsub_ms[rep] = (double)(now_ns(CLOCK_MONOTONIC) - u0) / 1e6;
    if (r != MSPTI_SUCCESS) die("msptiUnsubscribe", r);
    pFlushAll(1);
    if (rep % 2 == 1) timed_loop(n, 0, &gNoSub.wall[rep], &gNoSub.cpu[rep]);
  }
  printf("{\"ok\": true, \"launches\": %ld, \"repeats\": %d, \"arms\": {", n, reps);
  print_result("no_subscriber", &gNoSub, reps, 0);
  for (int a = 0; a < NARMS; ++a) {
    printf(", ");
    print_result(kArms[a].name, &gArm[a], reps, 1);
  }
  printf("}, ");
  print_array_d("unsubscribe_ms", unsub_ms, reps);
  printf("}\n");
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 5 && strcmp(argv[1], "drain") == 0)
    return run_drain(argv[2], atol(argv[3]), argv[4], argc >= 6 ? atoi(argv[5]) : 1);
  if (argc >= 5 && strcmp(argv[1], "launch") == 0) return run_launch(argv[2], atol(argv[3]), atoi(argv[4]));
  fprintf(stderr,
          "usage: bench_realmspti drain ROOT N seed|seed_poll [COMM]\n"
          "       bench_realmspti launch ROOT LAUNCHES REPEATS\n");
  return 2;
}
