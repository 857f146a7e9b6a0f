// First half of a layout probe: include this, then the MSPTI headers to probe *inside*
// `namespace torch_mspti_probed { ... }`, then layout_probe_end.h.
//
// Why a namespace: the facts are read with unqualified names from inside torch_mspti_probed.
// A name the probed headers declare is found there; a name they lack falls through to the
// global fallback declared below (a marker type, or the constant TORCH_MSPTI_LAYOUT_ABSENT),
// so an older SDK that lacks an optional kind or record still compiles and is reported.
// The fallbacks are declared before the probed headers, i.e. before their #defines exist.
#pragma once

// System headers the MSPTI headers include, pulled in here at global scope so that their include
// guards keep them out of the namespace.
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cstddef>
#include <cstdint>

#include "layout_list.h"

#define TORCH_MSPTI_FALLBACK_TYPE(type, opt)         \
  struct type {                                      \
    static constexpr bool torch_mspti_absent = true; \
  };
#define TORCH_MSPTI_FALLBACK_FIELD(type, field, opt)
#define TORCH_MSPTI_FALLBACK_VALUE(name, opt) inline constexpr long long name = TORCH_MSPTI_LAYOUT_ABSENT;

TORCH_MSPTI_LAYOUT_LIST(TORCH_MSPTI_FALLBACK_TYPE, TORCH_MSPTI_FALLBACK_FIELD, TORCH_MSPTI_FALLBACK_VALUE)

#undef TORCH_MSPTI_FALLBACK_TYPE
#undef TORCH_MSPTI_FALLBACK_FIELD
#undef TORCH_MSPTI_FALLBACK_VALUE
