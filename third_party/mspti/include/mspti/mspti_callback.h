// torch-mspti's own declaration of the MSPTI subscriber API (only what the plugin uses).
// Source: MSPTI mspti_callback.h as described in docs/mspti.md section 2.2.
#pragma once

#include <stdint.h>

#include "mspti_result.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MSPTI_CB_DOMAIN_INVALID = 0,
  MSPTI_CB_DOMAIN_RUNTIME = 1,
  MSPTI_CB_DOMAIN_HCCL = 2,
  MSPTI_CB_DOMAIN_SIZE = 3,
  MSPTI_CB_DOMAIN_FORCE_INT = 0x7fffffff
} msptiCallbackDomain;

typedef uint32_t msptiCallbackId;

typedef enum { MSPTI_API_ENTER = 0, MSPTI_API_EXIT = 1 } msptiApiCallbackSite;

// Not packed (unlike the activity records). The plugin never reads it: MSPTI leaves most fields
// uninitialised (mspti.md 2.2), and every public consumer subscribes with a NULL callback.
typedef struct {
  msptiApiCallbackSite callbackSite;
  const char* functionName;
  const void* functionParams;
  const void* functionReturnValue;
  const char* symbolName;
  uint64_t correlationId;
  uint64_t reserved1;
  uint64_t reserved2;
  uint64_t* correlationData;
} msptiCallbackData;

typedef struct msptiSubscriber_st* msptiSubscriberHandle;

typedef void (*msptiCallbackFunc)(void* userdata, msptiCallbackDomain domain, msptiCallbackId cbid,
                                  const msptiCallbackData* cbdata);

// One subscriber per process: a second call answers MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED.
msptiResult msptiSubscribe(msptiSubscriberHandle* subscriber, msptiCallbackFunc callback, void* userdata);
msptiResult msptiUnsubscribe(msptiSubscriberHandle subscriber);

#ifdef __cplusplus
}  // extern "C"
static_assert(sizeof(msptiCallbackData) == 72, "msptiCallbackData: 9 LP64 fields, natural alignment");
#endif
