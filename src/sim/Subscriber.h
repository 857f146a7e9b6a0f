// The single subscriber (msptiSubscribe / msptiUnsubscribe), mspti.md 2.2:
//  * one subscriber per process: a second Subscribe answers
//    MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; a NULL handle pointer answers 1;
//  * Unsubscribe with a different handle answers 1; with nothing subscribed it answers SUCCESS;
//  * the callback may be NULL (every public user passes NULL); the simulator never calls it,
//    because the callback domains need the LD_PRELOAD'ed library (mspti.md 2.2).
// Every subscription gets a new epoch, so device records launched under an earlier subscription
// can be recognised after an Unsubscribe/Subscribe pair.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "mspti/mspti_callback.h"

namespace torch_mspti::sim {

class Subscriber {
 public:
  Subscriber() = default;
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  msptiResult subscribe(msptiSubscriberHandle* handle, msptiCallbackFunc callback, void* userdata);
  // Checks the handle; on success ends the subscription and calls `stopDeviceTasks` (under the
  // subscriber lock, after the epoch moved on), as MSPTI resets its devices first (mspti.md 2.2).
  template <typename StopFn>
  msptiResult unsubscribe(msptiSubscriberHandle handle, StopFn&& stopDeviceTasks) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!active_.load(std::memory_order_acquire)) {
      return MSPTI_SUCCESS;
    }
    if (handle != handle_) {
      return MSPTI_ERROR_INVALID_PARAMETER;
    }
    active_.store(false, std::memory_order_release);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    stopDeviceTasks();
    handle_ = nullptr;
    return MSPTI_SUCCESS;
  }

  bool active() const { return active_.load(std::memory_order_acquire); }
  // Current subscription epoch; only meaningful while active().
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

 private:
  std::mutex mutex_;
  std::atomic<bool> active_{false};
  std::atomic<uint64_t> epoch_{0};
  msptiSubscriberHandle handle_ = nullptr;
  msptiCallbackFunc callback_ = nullptr;
  void* userdata_ = nullptr;
};

}  // namespace torch_mspti::sim
