/* A logging libmspti.so for the torch_npu coexistence tests.
 *
 * Exports the MSPTI entry points of one generation (src/sim/README.md "Generations"): all of 26.1 by
 * default; built with -DSHIM_NO_IS_ENABLED without msptiActivityIsEnabled (8.1 to 26.0), and with
 * -DSHIM_NO_EXTERNAL_CORRELATION also without FlushPeriod and Push/PopExternalCorrelationId
 * (8.0.RC3), so that callers see the symbol set of the library it wraps. Forwards each call to the
 * library named by MSPTI_TRACE_TARGET (an absolute path, normally torch_mspti.simulator_library()),
 * after appending one line to MSPTI_TRACE_LOG:
 *
 *   <seq> <tid> <caller library> <function> <arguments> -> <result>
 *
 * The caller is the basename of the object that contains the return address (dladdr), so calls
 * made by libtorch_npu.so and by torch-mspti's extension are told apart. Function pointers given
 * to msptiActivityRegisterCallbacks are named by the object that contains them.
 *
 * The buffer callbacks are interposed: the target library is handed this file's trampolines, which
 * call whatever pair was registered last (the same overwrite rule as MSPTI, mspti.md 2.3) and log
 * each request and completion with the owner of the callback that served it and the owner of the
 * callback that had supplied the buffer, so a buffer handed from one tool to another is visible.
 * msptiActivityGetNextRecord is not logged per call (one line per record would drown the rest);
 * the completion line counts the records and their kinds instead.
 *
 * Thread-safety: every entry point may be called from any thread; log lines are written whole
 * under one mutex. Build: gcc -shared -fPIC -O1 -o libmspti.so mspti_trace_shim.c -ldl -lpthread
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int msptiResult;
typedef void (*RequestFn)(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
typedef void (*CompleteFn)(uint8_t* buffer, size_t size, size_t validSize);

static pthread_mutex_t g_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_state_mutex = PTHREAD_MUTEX_INITIALIZER;
static unsigned long g_seq;
static void* g_target;
static RequestFn g_request; /* last registered pair (what MSPTI would call) */
static CompleteFn g_complete;

/* Which request callback supplied each buffer still outstanding (small fixed table). */
#define MAX_BUFFERS 256
static struct {
  uint8_t* buffer;
  RequestFn by;
} g_buffers[MAX_BUFFERS];

static const char* owner(const void* addr) {
  Dl_info info;
  if (addr == NULL) return "null";
  if (dladdr(addr, &info) == 0 || info.dli_fname == NULL) return "?";
  const char* slash = strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

static void logf_(const char* caller, const char* fmt, ...) {
  const char* path = getenv("MSPTI_TRACE_LOG");
  if (path == NULL || *path == '\0') return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_log_mutex);
  FILE* f = fopen(path, "a");
  if (f != NULL) {
    fprintf(f, "%lu %ld %s %s\n", ++g_seq, (long)syscall(SYS_gettid), caller, line);
    fclose(f);
  }
  pthread_mutex_unlock(&g_log_mutex);
}

static void* target_symbol(const char* name) {
  pthread_mutex_lock(&g_state_mutex);
  if (g_target == NULL) {
    const char* path = getenv("MSPTI_TRACE_TARGET");
    if (path != NULL && *path != '\0') g_target = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (g_target == NULL) {
      fprintf(stderr, "mspti_trace_shim: cannot load MSPTI_TRACE_TARGET=%s: %s\n", path ? path : "(unset)", dlerror());
      abort();
    }
  }
  pthread_mutex_unlock(&g_state_mutex);
  void* sym = dlsym(g_target, name);
  if (sym == NULL) {
    fprintf(stderr, "mspti_trace_shim: %s missing from MSPTI_TRACE_TARGET\n", name);
    abort();
  }
  return sym;
}

#define CALLER owner(__builtin_return_address(0))
#define FORWARD(type, name) ((type)target_symbol(#name))

static void remember_buffer(uint8_t* buffer, RequestFn by) {
  pthread_mutex_lock(&g_state_mutex);
  for (int i = 0; i < MAX_BUFFERS; ++i) {
    if (g_buffers[i].buffer == NULL) {
      g_buffers[i].buffer = buffer;
      g_buffers[i].by = by;
      break;
    }
  }
  pthread_mutex_unlock(&g_state_mutex);
}

static RequestFn forget_buffer(uint8_t* buffer) {
  RequestFn by = NULL;
  pthread_mutex_lock(&g_state_mutex);
  for (int i = 0; i < MAX_BUFFERS && buffer != NULL; ++i) {
    if (g_buffers[i].buffer == buffer) {
      by = g_buffers[i].by;
      g_buffers[i].buffer = NULL;
      break;
    }
  }
  pthread_mutex_unlock(&g_state_mutex);
  return by;
}

static void trampoline_request(uint8_t** buffer, size_t* size, size_t* maxNumRecords) {
  pthread_mutex_lock(&g_state_mutex);
  RequestFn fn = g_request;
  pthread_mutex_unlock(&g_state_mutex);
  fn(buffer, size, maxNumRecords);
  if (*buffer != NULL) remember_buffer(*buffer, fn);
  logf_("libmspti", "bufferRequested served_by=%s size=%zu", owner((void*)fn), *size);
}

/* Record kinds and sizes as in third_party/mspti (mspti.md 3); only the kind field is read. */
static void count_kinds(const uint8_t* buffer, size_t valid, char* out, size_t cap) {
  msptiResult (*next)(uint8_t*, size_t, void**) =
      (msptiResult (*)(uint8_t*, size_t, void**))target_symbol("msptiActivityGetNextRecord");
  unsigned counts[16] = {0};
  void* record = NULL;
  while (buffer != NULL && next((uint8_t*)buffer, valid, &record) == 0 && record != NULL) {
    uint32_t kind = *(const uint32_t*)record;
    counts[kind < 16 ? kind : 15]++;
  }
  size_t used = 0;
  out[0] = '\0';
  for (int k = 0; k < 16 && used < cap; ++k)
    if (counts[k]) used += (size_t)snprintf(out + used, cap - used, "%skind%d=%u", used ? "," : "", k, counts[k]);
}

static void trampoline_complete(uint8_t* buffer, size_t size, size_t validSize) {
  pthread_mutex_lock(&g_state_mutex);
  CompleteFn fn = g_complete;
  pthread_mutex_unlock(&g_state_mutex);
  RequestFn by = forget_buffer(buffer);
  char kinds[256];
  count_kinds(buffer, validSize, kinds, sizeof kinds);
  logf_("libmspti", "bufferCompleted served_by=%s buffer_from=%s valid=%zu records=[%s]", owner((void*)fn),
        owner((void*)by), validSize, kinds);
  fn(buffer, size, validSize);
}

EXPORT msptiResult msptiSubscribe(void** subscriber, void* callback, void* userdata) {
  msptiResult r = FORWARD(msptiResult (*)(void**, void*, void*), msptiSubscribe)(subscriber, callback, userdata);
  logf_(CALLER, "msptiSubscribe(callback=%s) -> %d handle=%p", owner(callback), r, subscriber ? *subscriber : NULL);
  return r;
}

EXPORT msptiResult msptiUnsubscribe(void* subscriber) {
  msptiResult r = FORWARD(msptiResult (*)(void*), msptiUnsubscribe)(subscriber);
  logf_(CALLER, "msptiUnsubscribe(%p) -> %d", subscriber, r);
  return r;
}

EXPORT msptiResult msptiActivityRegisterCallbacks(RequestFn request, CompleteFn complete) {
  const char* caller = CALLER;
  msptiResult r;
  if (request == NULL || complete == NULL) {
    r = FORWARD(msptiResult (*)(RequestFn, CompleteFn), msptiActivityRegisterCallbacks)(request, complete);
  } else {
    pthread_mutex_lock(&g_state_mutex);
    g_request = request;
    g_complete = complete;
    pthread_mutex_unlock(&g_state_mutex);
    r = FORWARD(msptiResult (*)(RequestFn, CompleteFn), msptiActivityRegisterCallbacks)(trampoline_request,
                                                                                        trampoline_complete);
  }
  logf_(caller, "msptiActivityRegisterCallbacks(request=%s, complete=%s) -> %d", owner((void*)request),
        owner((void*)complete), r);
  return r;
}

EXPORT msptiResult msptiActivityEnable(int kind) {
  msptiResult r = FORWARD(msptiResult (*)(int), msptiActivityEnable)(kind);
  logf_(CALLER, "msptiActivityEnable(%d) -> %d", kind, r);
  return r;
}

EXPORT msptiResult msptiActivityDisable(int kind) {
  msptiResult r = FORWARD(msptiResult (*)(int), msptiActivityDisable)(kind);
  logf_(CALLER, "msptiActivityDisable(%d) -> %d", kind, r);
  return r;
}

#ifndef SHIM_NO_IS_ENABLED
EXPORT _Bool msptiActivityIsEnabled(int kind) {
  _Bool r = FORWARD(_Bool (*)(int), msptiActivityIsEnabled)(kind);
  logf_(CALLER, "msptiActivityIsEnabled(%d) -> %d", kind, (int)r);
  return r;
}
#endif

EXPORT msptiResult msptiActivityGetNextRecord(uint8_t* buffer, size_t valid, void** record) {
  return FORWARD(msptiResult (*)(uint8_t*, size_t, void**), msptiActivityGetNextRecord)(buffer, valid, record);
}

EXPORT msptiResult msptiActivityFlushAll(uint32_t flag) {
  const char* caller = CALLER;
  logf_(caller, "msptiActivityFlushAll(%u) ...", flag);
  msptiResult r = FORWARD(msptiResult (*)(uint32_t), msptiActivityFlushAll)(flag);
  logf_(caller, "msptiActivityFlushAll(%u) -> %d", flag, r);
  return r;
}

#ifndef SHIM_NO_EXTERNAL_CORRELATION
EXPORT msptiResult msptiActivityFlushPeriod(uint32_t ms) {
  msptiResult r = FORWARD(msptiResult (*)(uint32_t), msptiActivityFlushPeriod)(ms);
  logf_(CALLER, "msptiActivityFlushPeriod(%u) -> %d", ms, r);
  return r;
}

EXPORT msptiResult msptiActivityPushExternalCorrelationId(int kind, uint64_t id) {
  msptiResult r = FORWARD(msptiResult (*)(int, uint64_t), msptiActivityPushExternalCorrelationId)(kind, id);
  logf_(CALLER, "msptiActivityPushExternalCorrelationId(%d, %llu) -> %d", kind, (unsigned long long)id, r);
  return r;
}

EXPORT msptiResult msptiActivityPopExternalCorrelationId(int kind, uint64_t* last) {
  msptiResult r = FORWARD(msptiResult (*)(int, uint64_t*), msptiActivityPopExternalCorrelationId)(kind, last);
  logf_(CALLER, "msptiActivityPopExternalCorrelationId(%d) -> %d id=%llu", kind, r,
        last ? (unsigned long long)*last : 0ULL);
  return r;
}
#endif
