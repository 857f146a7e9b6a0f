// The ABI facts the CANN-SDK check compares (see cmake/CannSdkCheck.cmake).
//
// TORCH_MSPTI_LAYOUT_LIST(TYPE, FIELD, VALUE) expands one macro per fact:
//   TYPE(type, opt)          sizeof and alignof of `type`
//   FIELD(type, field, opt)  offsetof(type, field); `type` must also appear as a TYPE
//   VALUE(name, opt)         the value of an enumerator or a #define constant
// opt = 1 marks what an older CANN may lack (the plugin resolves or treats it as optional at run
// time, mspti.md 8 and 11): its absence from an SDK is reported, not fatal. Everything with
// opt = 0 exists in every MSPTI release the plugin supports and must be present and equal.
//
// Plain data only: this header is included by both layout translation units and the checker.
#pragma once

#define TORCH_MSPTI_LAYOUT_LIST(TYPE, FIELD, VALUE)         \
  /* result codes (mspti_result.h) */                       \
  TYPE(msptiResult, 0)                                      \
  VALUE(MSPTI_SUCCESS, 0)                                   \
  VALUE(MSPTI_ERROR_INVALID_PARAMETER, 0)                   \
  VALUE(MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 0)  \
  VALUE(MSPTI_ERROR_MAX_LIMIT_REACHED, 0)                   \
  VALUE(MSPTI_ERROR_DEVICE_OFFLINE, 0)                      \
  VALUE(MSPTI_ERROR_QUEUE_EMPTY, 0)                         \
  VALUE(MSPTI_ERROR_WITHOUT_LD_PRELOAD, 1)                  \
  VALUE(MSPTI_ERROR_INNER, 0)                               \
  /* subscriber API (mspti_callback.h) */                   \
  TYPE(msptiCallbackDomain, 0)                              \
  VALUE(MSPTI_CB_DOMAIN_RUNTIME, 1)                         \
  VALUE(MSPTI_CB_DOMAIN_HCCL, 1)                            \
  /* activity kinds and other enums (mspti_activity.h) */   \
  TYPE(msptiActivityKind, 0)                                \
  VALUE(MSPTI_ACTIVITY_KIND_INVALID, 0)                     \
  VALUE(MSPTI_ACTIVITY_KIND_MARKER, 0)                      \
  VALUE(MSPTI_ACTIVITY_KIND_KERNEL, 0)                      \
  VALUE(MSPTI_ACTIVITY_KIND_API, 0)                         \
  VALUE(MSPTI_ACTIVITY_KIND_HCCL, 1)                        \
  VALUE(MSPTI_ACTIVITY_KIND_MEMORY, 1)                      \
  VALUE(MSPTI_ACTIVITY_KIND_MEMSET, 1)                      \
  VALUE(MSPTI_ACTIVITY_KIND_MEMCPY, 1)                      \
  VALUE(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 1)        \
  VALUE(MSPTI_ACTIVITY_KIND_COMMUNICATION, 1)               \
  VALUE(MSPTI_ACTIVITY_KIND_ACL_API, 1)                     \
  VALUE(MSPTI_ACTIVITY_KIND_NODE_API, 1)                    \
  VALUE(MSPTI_ACTIVITY_KIND_RUNTIME_API, 1)                 \
  TYPE(msptiExternalCorrelationKind, 1)                     \
  VALUE(MSPTI_EXTERNAL_CORRELATION_KIND_INVALID, 1)         \
  VALUE(MSPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, 1)         \
  VALUE(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1)         \
  VALUE(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 1)         \
  VALUE(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 1)         \
  TYPE(msptiActivitySourceKind, 0)                          \
  VALUE(MSPTI_ACTIVITY_SOURCE_KIND_HOST, 0)                 \
  VALUE(MSPTI_ACTIVITY_SOURCE_KIND_DEVICE, 0)               \
  TYPE(msptiActivityFlag, 0)                                \
  VALUE(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 0)        \
  VALUE(MSPTI_ACTIVITY_FLAG_MARKER_START, 0)                \
  VALUE(MSPTI_ACTIVITY_FLAG_MARKER_END, 0)                  \
  VALUE(MSPTI_INVALID_DEVICE_ID, 1)                         \
  VALUE(MSPTI_INVALID_STREAM_ID, 1)                         \
  VALUE(MSPTI_INVALID_CORRELATION_ID, 1)                    \
  /* records (mspti.md 3.4) */                              \
  TYPE(msptiActivity, 0)                                    \
  FIELD(msptiActivity, kind, 0)                             \
  TYPE(msptiObjectId, 0)                                    \
  TYPE(msptiActivityKernel, 0)                              \
  FIELD(msptiActivityKernel, start, 0)                      \
  FIELD(msptiActivityKernel, end, 0)                        \
  FIELD(msptiActivityKernel, ds.deviceId, 0)                \
  FIELD(msptiActivityKernel, ds.streamId, 0)                \
  FIELD(msptiActivityKernel, correlationId, 0)              \
  FIELD(msptiActivityKernel, type, 0)                       \
  FIELD(msptiActivityKernel, name, 0)                       \
  TYPE(msptiActivityApi, 0)                                 \
  FIELD(msptiActivityApi, start, 0)                         \
  FIELD(msptiActivityApi, end, 0)                           \
  FIELD(msptiActivityApi, pt.processId, 0)                  \
  FIELD(msptiActivityApi, pt.threadId, 0)                   \
  FIELD(msptiActivityApi, correlationId, 0)                 \
  FIELD(msptiActivityApi, name, 0)                          \
  TYPE(msptiActivityMarker, 0)                              \
  FIELD(msptiActivityMarker, flag, 0)                       \
  FIELD(msptiActivityMarker, sourceKind, 0)                 \
  FIELD(msptiActivityMarker, timestamp, 0)                  \
  FIELD(msptiActivityMarker, id, 0)                         \
  FIELD(msptiActivityMarker, objectId, 0)                   \
  FIELD(msptiActivityMarker, name, 0)                       \
  FIELD(msptiActivityMarker, domain, 0)                     \
  TYPE(msptiActivityExternalCorrelation, 1)                 \
  FIELD(msptiActivityExternalCorrelation, externalKind, 1)  \
  FIELD(msptiActivityExternalCorrelation, externalId, 1)    \
  FIELD(msptiActivityExternalCorrelation, correlationId, 1) \
  TYPE(msptiActivityCommunication, 1)                       \
  FIELD(msptiActivityCommunication, dataType, 1)            \
  FIELD(msptiActivityCommunication, count, 1)               \
  FIELD(msptiActivityCommunication, ds.deviceId, 1)         \
  FIELD(msptiActivityCommunication, ds.streamId, 1)         \
  FIELD(msptiActivityCommunication, start, 1)               \
  FIELD(msptiActivityCommunication, end, 1)                 \
  FIELD(msptiActivityCommunication, algType, 1)             \
  FIELD(msptiActivityCommunication, name, 1)                \
  FIELD(msptiActivityCommunication, commName, 1)            \
  FIELD(msptiActivityCommunication, correlationId, 1)       \
  TYPE(msptiActivityHccl, 1)                                \
  FIELD(msptiActivityHccl, start, 1)                        \
  FIELD(msptiActivityHccl, bandWidth, 1)                    \
  FIELD(msptiActivityHccl, name, 1)                         \
  FIELD(msptiActivityHccl, commName, 1)                     \
  TYPE(msptiActivityMemory, 1)                              \
  FIELD(msptiActivityMemory, memoryKind, 1)                 \
  FIELD(msptiActivityMemory, correlationId, 1)              \
  FIELD(msptiActivityMemory, start, 1)                      \
  FIELD(msptiActivityMemory, address, 1)                    \
  FIELD(msptiActivityMemory, bytes, 1)                      \
  FIELD(msptiActivityMemory, processId, 1)                  \
  FIELD(msptiActivityMemory, streamId, 1)                   \
  TYPE(msptiActivityMemset, 1)                              \
  FIELD(msptiActivityMemset, bytes, 1)                      \
  FIELD(msptiActivityMemset, start, 1)                      \
  FIELD(msptiActivityMemset, deviceId, 1)                   \
  FIELD(msptiActivityMemset, correlationId, 1)              \
  FIELD(msptiActivityMemset, isAsync, 1)                    \
  TYPE(msptiActivityMemcpy, 1)                              \
  FIELD(msptiActivityMemcpy, copyKind, 1)                   \
  FIELD(msptiActivityMemcpy, bytes, 1)                      \
  FIELD(msptiActivityMemcpy, deviceId, 1)                   \
  FIELD(msptiActivityMemcpy, correlationId, 1)              \
  FIELD(msptiActivityMemcpy, isAsync, 1)

// One measured fact. `value` is kLayoutAbsent when the probed headers do not declare it.
struct TorchMsptiLayoutEntry {
  const char* name;
  int optional;
  long long value;
};

struct TorchMsptiLayoutTable {
  const TorchMsptiLayoutEntry* entries;
  unsigned long count;
};

#define TORCH_MSPTI_LAYOUT_ABSENT (-0x7fffffffffffffffLL - 1)
