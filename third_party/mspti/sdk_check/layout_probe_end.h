// Second half of a layout probe (see layout_probe_begin.h): measures every fact of
// TORCH_MSPTI_LAYOUT_LIST as seen from namespace torch_mspti_probed and exports the results as
// `extern "C" const TorchMsptiLayoutTable TORCH_MSPTI_LAYOUT_TABLE`.
#pragma once

#ifndef TORCH_MSPTI_LAYOUT_TABLE
#error "define TORCH_MSPTI_LAYOUT_TABLE (the exported table's name) before layout_probe_end.h"
#endif

namespace torch_mspti_probed {

template <class T>
constexpr bool kIsFallback = requires { T::torch_mspti_absent; };

template <class T>
constexpr long long sizeOrAbsent() {
  if constexpr (kIsFallback<T>) {
    return TORCH_MSPTI_LAYOUT_ABSENT;
  } else {
    return static_cast<long long>(sizeof(T));
  }
}

template <class T>
constexpr long long alignOrAbsent() {
  if constexpr (kIsFallback<T>) {
    return TORCH_MSPTI_LAYOUT_ABSENT;
  } else {
    return static_cast<long long>(alignof(T));
  }
}

// A field the probed struct lacks (or a fallback struct) makes the requires-expression false
// instead of a hard error, because U is a template parameter.
#define TORCH_MSPTI_ROW_TYPE(type, opt) \
  {"sizeof(" #type ")", opt, sizeOrAbsent<type>()}, {"alignof(" #type ")", opt, alignOrAbsent<type>()},
#define TORCH_MSPTI_ROW_FIELD(type, field, opt)                         \
  {#type "." #field, opt, []<class U = type>() constexpr -> long long { \
     if constexpr (requires(U& u) { u.field; }) {                       \
       return static_cast<long long>(offsetof(U, field));               \
     } else {                                                           \
       return TORCH_MSPTI_LAYOUT_ABSENT;                                \
     }                                                                  \
   }()},
#define TORCH_MSPTI_ROW_VALUE(name, opt) {#name, opt, static_cast<long long>(name)},

constexpr TorchMsptiLayoutEntry kRows[] = {
    TORCH_MSPTI_LAYOUT_LIST(TORCH_MSPTI_ROW_TYPE, TORCH_MSPTI_ROW_FIELD, TORCH_MSPTI_ROW_VALUE)};

#undef TORCH_MSPTI_ROW_TYPE
#undef TORCH_MSPTI_ROW_FIELD
#undef TORCH_MSPTI_ROW_VALUE

}  // namespace torch_mspti_probed

extern "C" const TorchMsptiLayoutTable TORCH_MSPTI_LAYOUT_TABLE = {
    torch_mspti_probed::kRows, sizeof(torch_mspti_probed::kRows) / sizeof(torch_mspti_probed::kRows[0])};
