#include "ActivityBuffers.h"

#include <cstring>
#include <thread>

#include "CallbackContext.h"

namespace torch_mspti::sim {

msptiResult ActivityBuffers::registerCallbacks(msptiBuffersCallbackRequestFunc request,
                                               msptiBuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) {
    return MSPTI_ERROR_INVALID_PARAMETER;
  }
  callbacks_.request.store(request, std::memory_order_release);
  callbacks_.complete.store(complete, std::memory_order_release);
  dispatcher_.start();
  return MSPTI_SUCCESS;
}

bool ActivityBuffers::needsNewBufferLocked() const {
  if (!current_) {
    return true;
  }
  // ACTIVITY_BUFFER_THRESHOLD: checked before writing, so a buffer that crossed the threshold
  // stays current until the next record arrives (or FlushAll takes it). A declined buffer
  // (size 0) is always "full": the next record queues it and asks again (mspti.md 5.1).
  const auto pct = static_cast<unsigned __int128>(options_.get(Option::kBufferThresholdPct));
  return static_cast<unsigned __int128>(current_->validSize) * 100 >= current_->size * pct;
}

bool ActivityBuffers::record(const void* bytes, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  msptiBuffersCallbackRequestFunc request = callbacks_.request.load(std::memory_order_acquire);
  if (request == nullptr) {
    // Nothing registered yet: there is nowhere to put the record.
    SimCounters::add(counters_.recordsDropped);
    return false;
  }
  if (needsNewBufferLocked()) {
    if (current_) {
      dispatcher_.enqueueFull(*current_);
    }
    uint8_t* data = nullptr;
    size_t bufferSize = 0;
    size_t maxNumRecords = 0;  // ignored by MSPTI (mspti.md 5.1)
    SimCounters::add(counters_.buffersRequested);
    {
      CallbackScope scope(CallbackContext::kRequest);
      request(&data, &bufferSize, &maxNumRecords);
    }
    if (data == nullptr || bufferSize == 0) {
      SimCounters::add(counters_.buffersDeclined);
      // Keep a non-NULL pointer the user returned with size 0: it comes back as (ptr, 0, 0).
      current_ = ActivityBuffer{data, 0, 0};
    } else {
      current_ = ActivityBuffer{data, bufferSize, 0};
    }
  }
  ActivityBuffer& buffer = *current_;
  if (buffer.data == nullptr || buffer.size - buffer.validSize < size) {
    SimCounters::add(counters_.recordsDropped);
    return false;
  }
  std::memcpy(buffer.data + buffer.validSize, bytes, size);
  buffer.validSize += size;
  return true;
}

void ActivityBuffers::retireCurrent() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (current_ && current_->validSize > 0) {
    dispatcher_.enqueueFull(*current_);
    current_.reset();
  }
}

msptiResult ActivityBuffers::flushAll() {
  if (CallbackScope::current() != CallbackContext::kNone) {
    abortOnReentry("msptiActivityFlushAll",
                   "MSPTI re-locks its non-recursive buffer mutex or joins its own worker thread");
  }
  for (const ActivityBuffer& buffer : dispatcher_.takeQueued()) {
    dispatcher_.deliver(buffer, CallbackContext::kCompleteUnlocked);
  }
  {
    // The real FlushAll hands out the current buffer with its buffer mutex held: every recorder
    // (launch threads, the driver reader) blocks until the callback returns (mspti.md 5.2, 11).
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_) {
      dispatcher_.deliver(*current_, CallbackContext::kCompleteLocked);
      current_.reset();
    }
  }
  dispatcher_.waitForWorkers();
  return MSPTI_SUCCESS;
}

bool ActivityBuffers::completeForeign(const ActivityBuffer& buffer, bool onNewThread) {
  if (callbacks_.complete.load(std::memory_order_acquire) == nullptr) {
    return false;
  }
  if (onNewThread) {
    std::thread([&] { dispatcher_.deliver(buffer, CallbackContext::kCompleteWorker); }).join();
  } else {
    dispatcher_.deliver(buffer, CallbackContext::kCompleteUnlocked);
  }
  return true;
}

msptiResult ActivityBuffers::flushPeriod(uint32_t periodMs) {
  dispatcher_.setFlushPeriodMs(periodMs);
  return MSPTI_SUCCESS;
}

}  // namespace torch_mspti::sim
