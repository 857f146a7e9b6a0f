#include "Subscriber.h"

// The opaque type behind msptiSubscriberHandle. The handle only has to be a stable, non-NULL
// address the caller hands back to Unsubscribe.
struct msptiSubscriber_st {
  int unused;
};

namespace torch_mspti::sim {

namespace {
msptiSubscriber_st gSubscriberToken{0};
}  // namespace

msptiResult Subscriber::subscribe(msptiSubscriberHandle* handle, msptiCallbackFunc callback, void* userdata) {
  if (handle == nullptr) {
    return MSPTI_ERROR_INVALID_PARAMETER;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (active_.load(std::memory_order_acquire)) {
    return MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  handle_ = &gSubscriberToken;
  callback_ = callback;
  userdata_ = userdata;
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  active_.store(true, std::memory_order_release);
  *handle = handle_;
  return MSPTI_SUCCESS;
}

}  // namespace torch_mspti::sim
