// torch-mspti's own declaration of the MSPTI result codes.
// Source of the values: MSPTI mspti_result.h (Ascend/mspti HEAD a389160, branches 26.0.0/26.1.0),
// summarised in docs/mspti.md section 2.1. Written from those facts, not copied.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  MSPTI_SUCCESS = 0,
  MSPTI_ERROR_INVALID_PARAMETER = 1,
  MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 2,
  // Also the normal end-of-buffer answer of msptiActivityGetNextRecord.
  MSPTI_ERROR_MAX_LIMIT_REACHED = 3,
  MSPTI_ERROR_DEVICE_OFFLINE = 4,
  MSPTI_ERROR_QUEUE_EMPTY = 5,
  // MSPTI 26.x only: a kind that needs libmspti.so in LD_PRELOAD was enabled without it.
  MSPTI_ERROR_WITHOUT_LD_PRELOAD = 6,
  MSPTI_ERROR_INNER = 999,
  MSPTI_ERROR_FORCE_INT = 0x7fffffff
} msptiResult;

#ifdef __cplusplus
}  // extern "C"
static_assert(sizeof(msptiResult) == 4, "msptiResult is a 4-byte enum");
#endif
