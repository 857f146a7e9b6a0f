// torch-mspti's own declaration of the MSPTI activity API: kinds, packed record layouts and
// the functions the plugin resolves with dlsym.
//
// Source of every fact here: MSPTI mspti_activity.h (Ascend/mspti HEAD a389160; branches 26.0.0
// and 26.1.0), with sizes and offsets as measured in docs/mspti.md section 3 (gcc 12,
// x86_64; all fields are LP64, so aarch64 is identical). The declarations are written from those
// facts; the static_asserts at the end pin every size and offset the plugin relies on.
//
// Layout rule (mspti.md 3.1): records are `__packed__` AND `aligned(8)`: no interior padding (an
// 8-byte field may sit at offset 4) while sizeof is rounded up to 8. Records lie back to back in
// a buffer, the stride of a record being sizeof() of its kind's struct.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "mspti_result.h"

#if defined(__GNUC__) || defined(__clang__)
#define TORCH_MSPTI_PACKED_ALIGNMENT __attribute__((__packed__)) __attribute__((aligned(8)))
#else
#error "torch-mspti's MSPTI declarations need GCC or Clang attributes (packed + aligned(8))"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define MSPTI_INVALID_DEVICE_ID ((uint32_t)0xFFFFFFFFU)
#define MSPTI_INVALID_STREAM_ID ((uint32_t)0xFFFFFFFFU)
#define MSPTI_INVALID_CORRELATION_ID ((uint64_t)0)

// Values are fixed; the ABI only grows by appending (mspti.md 3.2, 8).
typedef enum {
  MSPTI_ACTIVITY_KIND_INVALID = 0,
  MSPTI_ACTIVITY_KIND_MARKER = 1,
  MSPTI_ACTIVITY_KIND_KERNEL = 2,
  MSPTI_ACTIVITY_KIND_API = 3,                   // host API records before MSPTI 26.0
  MSPTI_ACTIVITY_KIND_HCCL = 4,                  // from CANN 8.1.RC1
  MSPTI_ACTIVITY_KIND_MEMORY = 5,                // from CANN 8.1.RC1
  MSPTI_ACTIVITY_KIND_MEMSET = 6,                // from CANN 8.1.RC1
  MSPTI_ACTIVITY_KIND_MEMCPY = 7,                // from CANN 8.1.RC1
  MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 8,  // from CANN 8.1.RC1
  MSPTI_ACTIVITY_KIND_COMMUNICATION = 9,         // from CANN 8.2.RC1
  MSPTI_ACTIVITY_KIND_ACL_API = 10,              // from MSPTI 26.0
  MSPTI_ACTIVITY_KIND_NODE_API = 11,             // from MSPTI 26.0
  MSPTI_ACTIVITY_KIND_RUNTIME_API = 12,          // from MSPTI 26.0
  MSPTI_ACTIVITY_KIND_COUNT = 13,
  MSPTI_ACTIVITY_KIND_FORCE_INT = 0x7fffffff
} msptiActivityKind;

typedef enum {
  MSPTI_EXTERNAL_CORRELATION_KIND_INVALID = 0,
  MSPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN = 1,
  MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0 = 2,
  MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1 = 3,
  MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 = 4,
  MSPTI_EXTERNAL_CORRELATION_KIND_SIZE = 5,
  MSPTI_EXTERNAL_CORRELATION_KIND_FORCE_INT = 0x7fffffff
} msptiExternalCorrelationKind;

typedef enum { MSPTI_ACTIVITY_SOURCE_KIND_HOST = 0, MSPTI_ACTIVITY_SOURCE_KIND_DEVICE = 1 } msptiActivitySourceKind;

typedef enum {
  MSPTI_ACTIVITY_FLAG_NONE = 0,
  MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS = 1 << 0,
  MSPTI_ACTIVITY_FLAG_MARKER_START = 1 << 1,
  MSPTI_ACTIVITY_FLAG_MARKER_END = 1 << 2,
  MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE = 1 << 3,
  MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE = 1 << 4,
  MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE = 1 << 5
} msptiActivityFlag;

typedef enum {
  MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN = 0,
  MSPTI_ACTIVITY_MEMCPY_KIND_HTOH = 1,
  MSPTI_ACTIVITY_MEMCPY_KIND_HTOD = 2,
  MSPTI_ACTIVITY_MEMCPY_KIND_DTOH = 3,
  MSPTI_ACTIVITY_MEMCPY_KIND_DTOD = 4,
  MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT = 5
} msptiActivityMemcpyKind;

typedef enum {
  MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION = 0,
  MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE = 1
} msptiActivityMemoryOperationType;

typedef enum { MSPTI_ACTIVITY_MEMORY_UNKNOWN = 0, MSPTI_ACTIVITY_MEMORY_DEVICE = 1 } msptiActivityMemoryKind;

// 4-byte enum in the records (values 0..12, 14..17; 0xFFFF invalid).
typedef uint32_t msptiCommunicationDataType;

// The common header of every record.
typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;
} msptiActivity;

typedef union TORCH_MSPTI_PACKED_ALIGNMENT {
  struct {
    uint32_t processId;
    uint32_t threadId;
  } pt;
  struct {
    uint32_t deviceId;
    uint32_t streamId;
  } ds;
} msptiObjectId;

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_KERNEL
  uint64_t start;          // ns since the Unix epoch (CLOCK_REALTIME), device execution start
  uint64_t end;            // ns since the Unix epoch (CLOCK_REALTIME), device execution end
  struct {
    uint32_t deviceId;  // physical device id (not torch's logical index)
    uint32_t streamId;  // runtime stream id (16 significant bits)
  } ds;
  uint64_t correlationId;  // shared with the launch's API and external-correlation records
  const char* type;        // e.g. "KERNEL_AICORE"; owned by MSPTI
  const char* name;        // kernel name; owned by MSPTI
} msptiActivityKernel;

// Used for API (3), ACL_API (10), NODE_API (11) and RUNTIME_API (12). No cbid field.
typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;
  uint64_t start;  // host ns since the Unix epoch
  uint64_t end;    // host ns since the Unix epoch
  struct {
    uint32_t processId;
    uint32_t threadId;  // OS thread id of the calling (launching) thread
  } pt;
  uint64_t correlationId;  // the thread's most recent launch id
  const char* name;
} msptiActivityApi;

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION
  msptiExternalCorrelationKind externalKind;
  uint64_t externalId;     // the top of that kind's (process-global) stack at launch time
  uint64_t correlationId;  // the launch's MSPTI correlation id
} msptiActivityExternalCorrelation;

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_COMMUNICATION
  msptiCommunicationDataType dataType;
  uint64_t count;
  struct {
    uint32_t deviceId;
    uint32_t streamId;
  } ds;
  uint64_t start;
  uint64_t end;
  const char* algType;
  const char* name;
  const char* commName;
  uint64_t correlationId;
} msptiActivityCommunication;

// MSPTI's own header has objectId at offset 28 (GCC warns -Wpacked-not-aligned there too).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpacked-not-aligned"
#endif
typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_MARKER
  msptiActivityFlag flag;
  msptiActivitySourceKind sourceKind;
  uint64_t timestamp;
  uint64_t id;
  msptiObjectId objectId;
  const char* name;    // NULL for an end marker
  const char* domain;  // NULL for the default domain
} msptiActivityMarker;
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_HCCL
  uint64_t start;
  uint64_t end;
  struct {
    uint32_t deviceId;
    uint32_t streamId;
  } ds;
  double bandWidth;  // GB/s; the header says double although the docs say uint64
  const char* name;
  const char* commName;
} msptiActivityHccl;

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_MEMORY
  msptiActivityMemoryOperationType memoryOperationType;
  msptiActivityMemoryKind memoryKind;
  uint64_t correlationId;
  uint64_t start;
  uint64_t end;
  uint64_t address;
  uint64_t bytes;
  uint32_t processId;
  uint32_t deviceId;
  uint32_t streamId;
} msptiActivityMemory;

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_MEMSET
  uint32_t value;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t deviceId;
  uint32_t streamId;
  uint64_t correlationId;
  uint8_t isAsync;
} msptiActivityMemset;

typedef struct TORCH_MSPTI_PACKED_ALIGNMENT {
  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_MEMCPY
  msptiActivityMemcpyKind copyKind;
  uint64_t bytes;
  uint64_t start;
  uint64_t end;
  uint32_t deviceId;
  uint32_t streamId;
  uint64_t correlationId;
  uint8_t isAsync;
} msptiActivityMemcpy;

// Called synchronously on a recording thread while MSPTI holds its buffer lock. Return an
// 8-aligned buffer in *buffer and its size in *size; NULL/0 declines (records are then dropped).
// *maxNumRecords is ignored by MSPTI: set it to 0.
typedef void (*msptiBuffersCallbackRequestFunc)(uint8_t** buffer, size_t* size, size_t* maxNumRecords);
// Called on a new thread per full buffer, or on the FlushAll caller; may run concurrently and may
// receive (NULL, 0, 0) after a declined request.
typedef void (*msptiBuffersCallbackCompleteFunc)(uint8_t* buffer, size_t size, size_t validSize);

msptiResult msptiActivityRegisterCallbacks(msptiBuffersCallbackRequestFunc funcBufferRequested,
                                           msptiBuffersCallbackCompleteFunc funcBufferCompleted);
msptiResult msptiActivityEnable(msptiActivityKind kind);
msptiResult msptiActivityDisable(msptiActivityKind kind);
// From MSPTI 26.1 only.
#ifdef __cplusplus
bool msptiActivityIsEnabled(msptiActivityKind kind);
#else
_Bool msptiActivityIsEnabled(msptiActivityKind kind);
#endif
msptiResult msptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes, msptiActivity** record);
// flag is ignored by MSPTI; pass 1. Synchronous: delivers on the calling thread.
msptiResult msptiActivityFlushAll(uint32_t flag);
// From CANN 8.1.RC1. Period in ms, 0 = off; delivers only full buffers.
msptiResult msptiActivityFlushPeriod(uint32_t time);
// From CANN 8.1.RC1. The stack is process-global (mspti.md 5.4).
msptiResult msptiActivityPushExternalCorrelationId(msptiExternalCorrelationKind kind, uint64_t id);
// lastId must not be NULL: MSPTI answers INVALID_PARAMETER without popping (mspti.md 2.3).
msptiResult msptiActivityPopExternalCorrelationId(msptiExternalCorrelationKind kind, uint64_t* lastId);
// From CANN 8.3.RC1. mstx domains start enabled; NULL or an invalid name -> 1 (mspti.md 2.3).
msptiResult msptiActivityEnableMarkerDomain(const char* name);
msptiResult msptiActivityDisableMarkerDomain(const char* name);

#ifdef __cplusplus
}  // extern "C"

// ---- ABI pins (mspti.md 3.4). A mismatch here is a wrong declaration, never a "fix" to make. ----
#define TORCH_MSPTI_PIN(type, field, off) static_assert(offsetof(type, field) == (off), #type "." #field)
static_assert(sizeof(msptiActivityKind) == 4 && sizeof(msptiExternalCorrelationKind) == 4, "4-byte enums");
static_assert(sizeof(msptiActivity) == 8 && alignof(msptiActivity) == 8, "msptiActivity");
static_assert(sizeof(msptiObjectId) == 8, "msptiObjectId");

static_assert(sizeof(msptiActivityKernel) == 56 && alignof(msptiActivityKernel) == 8, "msptiActivityKernel");
TORCH_MSPTI_PIN(msptiActivityKernel, start, 4);
TORCH_MSPTI_PIN(msptiActivityKernel, end, 12);
TORCH_MSPTI_PIN(msptiActivityKernel, ds.deviceId, 20);
TORCH_MSPTI_PIN(msptiActivityKernel, ds.streamId, 24);
TORCH_MSPTI_PIN(msptiActivityKernel, correlationId, 28);
TORCH_MSPTI_PIN(msptiActivityKernel, type, 36);
TORCH_MSPTI_PIN(msptiActivityKernel, name, 44);

static_assert(sizeof(msptiActivityApi) == 48 && alignof(msptiActivityApi) == 8, "msptiActivityApi");
TORCH_MSPTI_PIN(msptiActivityApi, start, 4);
TORCH_MSPTI_PIN(msptiActivityApi, end, 12);
TORCH_MSPTI_PIN(msptiActivityApi, pt.processId, 20);
TORCH_MSPTI_PIN(msptiActivityApi, pt.threadId, 24);
TORCH_MSPTI_PIN(msptiActivityApi, correlationId, 28);
TORCH_MSPTI_PIN(msptiActivityApi, name, 36);

static_assert(sizeof(msptiActivityExternalCorrelation) == 24, "msptiActivityExternalCorrelation");
TORCH_MSPTI_PIN(msptiActivityExternalCorrelation, externalKind, 4);
TORCH_MSPTI_PIN(msptiActivityExternalCorrelation, externalId, 8);
TORCH_MSPTI_PIN(msptiActivityExternalCorrelation, correlationId, 16);

static_assert(sizeof(msptiActivityCommunication) == 72, "msptiActivityCommunication");
TORCH_MSPTI_PIN(msptiActivityCommunication, dataType, 4);
TORCH_MSPTI_PIN(msptiActivityCommunication, count, 8);
TORCH_MSPTI_PIN(msptiActivityCommunication, ds.deviceId, 16);
TORCH_MSPTI_PIN(msptiActivityCommunication, ds.streamId, 20);
TORCH_MSPTI_PIN(msptiActivityCommunication, start, 24);
TORCH_MSPTI_PIN(msptiActivityCommunication, end, 32);
TORCH_MSPTI_PIN(msptiActivityCommunication, algType, 40);
TORCH_MSPTI_PIN(msptiActivityCommunication, name, 48);
TORCH_MSPTI_PIN(msptiActivityCommunication, commName, 56);
TORCH_MSPTI_PIN(msptiActivityCommunication, correlationId, 64);

static_assert(sizeof(msptiActivityMarker) == 56, "msptiActivityMarker");
TORCH_MSPTI_PIN(msptiActivityMarker, flag, 4);
TORCH_MSPTI_PIN(msptiActivityMarker, sourceKind, 8);
TORCH_MSPTI_PIN(msptiActivityMarker, timestamp, 12);
TORCH_MSPTI_PIN(msptiActivityMarker, id, 20);
TORCH_MSPTI_PIN(msptiActivityMarker, objectId, 28);
TORCH_MSPTI_PIN(msptiActivityMarker, name, 36);
TORCH_MSPTI_PIN(msptiActivityMarker, domain, 44);

static_assert(sizeof(msptiActivityHccl) == 56, "msptiActivityHccl");
TORCH_MSPTI_PIN(msptiActivityHccl, bandWidth, 28);
TORCH_MSPTI_PIN(msptiActivityHccl, name, 36);
TORCH_MSPTI_PIN(msptiActivityHccl, commName, 44);

static_assert(sizeof(msptiActivityMemory) == 64, "msptiActivityMemory");
TORCH_MSPTI_PIN(msptiActivityMemory, correlationId, 12);
TORCH_MSPTI_PIN(msptiActivityMemory, start, 20);
TORCH_MSPTI_PIN(msptiActivityMemory, bytes, 44);
TORCH_MSPTI_PIN(msptiActivityMemory, processId, 52);
TORCH_MSPTI_PIN(msptiActivityMemory, streamId, 60);

static_assert(sizeof(msptiActivityMemset) == 56, "msptiActivityMemset");
TORCH_MSPTI_PIN(msptiActivityMemset, bytes, 8);
TORCH_MSPTI_PIN(msptiActivityMemset, start, 16);
TORCH_MSPTI_PIN(msptiActivityMemset, deviceId, 32);
TORCH_MSPTI_PIN(msptiActivityMemset, correlationId, 40);
TORCH_MSPTI_PIN(msptiActivityMemset, isAsync, 48);

static_assert(sizeof(msptiActivityMemcpy) == 56, "msptiActivityMemcpy");
TORCH_MSPTI_PIN(msptiActivityMemcpy, copyKind, 4);
TORCH_MSPTI_PIN(msptiActivityMemcpy, bytes, 8);
TORCH_MSPTI_PIN(msptiActivityMemcpy, correlationId, 40);
TORCH_MSPTI_PIN(msptiActivityMemcpy, isAsync, 48);
#undef TORCH_MSPTI_PIN
#endif
