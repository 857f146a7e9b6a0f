#include "MsptiActivityApi.h"

#include <fmt/format.h>

namespace torch_mspti {

const char* resultName(msptiResult r) {
  switch (static_cast<int>(r)) {
    case MSPTI_SUCCESS: return "MSPTI_SUCCESS";
    case MSPTI_ERROR_INVALID_PARAMETER: return "MSPTI_ERROR_INVALID_PARAMETER";
    case MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: return "MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
    case MSPTI_ERROR_MAX_LIMIT_REACHED: return "MSPTI_ERROR_MAX_LIMIT_REACHED";
    case MSPTI_ERROR_DEVICE_OFFLINE: return "MSPTI_ERROR_DEVICE_OFFLINE";
    case MSPTI_ERROR_QUEUE_EMPTY: return "MSPTI_ERROR_QUEUE_EMPTY";
    case MSPTI_ERROR_WITHOUT_LD_PRELOAD: return "MSPTI_ERROR_WITHOUT_LD_PRELOAD";
    case MSPTI_ERROR_INNER: return "MSPTI_ERROR_INNER";
    case -1: return "threw a C++ exception";
    case -2: return "symbol not available";
    default: return "unknown result";
  }
}

std::string describeCall(const char* call, const std::string& arg, msptiResult r) {
  return fmt::format("{}({}) -> {} {}", call, arg, static_cast<int>(r), resultName(r));
}

// One guard for every non-hot call: a throwing MSPTI entry point becomes kCallThrew.
template <typename Fn, typename... Args>
static msptiResult guarded(Fn fn, Args... args) noexcept {
  if (!fn) return kCallUnavailable;
  try {
    return fn(args...);
  } catch (...) {
    return kCallThrew;
  }
}

msptiResult MsptiActivityApi::subscribe(msptiSubscriberHandle* handle) {
  // Every public consumer subscribes without a callback (mspti.md 2.2).
  return guarded(f_.subscribe, handle, static_cast<msptiCallbackFunc>(nullptr), static_cast<void*>(nullptr));
}
msptiResult MsptiActivityApi::unsubscribe(msptiSubscriberHandle handle) { return guarded(f_.unsubscribe, handle); }
msptiResult MsptiActivityApi::registerCallbacks(msptiBuffersCallbackRequestFunc req,
                                                msptiBuffersCallbackCompleteFunc done) {
  return guarded(f_.registerCallbacks, req, done);
}
msptiResult MsptiActivityApi::enable(msptiActivityKind kind) { return guarded(f_.enable, kind); }
msptiResult MsptiActivityApi::disable(msptiActivityKind kind) { return guarded(f_.disable, kind); }
msptiResult MsptiActivityApi::flushAll() { return guarded(f_.flushAll, 1u); }

}  // namespace torch_mspti
