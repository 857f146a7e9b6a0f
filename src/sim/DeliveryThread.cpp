#include "DeliveryThread.h"

#include <pthread.h>

#include <thread>

#include "SimClock.h"

namespace torch_mspti::sim {

void DeliveryThread::schedule(std::vector<PendingRecord> records) {
  if (records.empty()) {
    return;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (PendingRecord& record : records) {
    record.sequence = nextSequence_++;
    queue_.push(record);
  }
  if (!started_) {
    // One reader for the whole process, never stopped: it sleeps on wake_ when idle, so a
    // process exits without joining it (the object is never destroyed).
    std::thread(&DeliveryThread::run, this).detach();
    started_ = true;
  }
  wake_.notify_all();
}

size_t DeliveryThread::pullEnded(uint64_t nowNs, uint32_t kindMask, uint64_t parseAtNs) {
  std::vector<PendingRecord> ended;
  std::vector<PendingRecord> rest;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // A batch the reader already took must land first, or it could be judged after the switch
    // is cleared.
    wake_.wait(lock, [&] { return !writing_; });
    while (!queue_.empty()) {
      const PendingRecord& top = queue_.top();
      const bool pulled = !top.pulled && (kindMask & (1U << kindOf(top.record))) != 0 && top.endNs <= nowNs;
      (pulled ? ended : rest).push_back(top);
      queue_.pop();
    }
    for (PendingRecord& record : rest) {
      queue_.push(record);
    }
    if (!ended.empty()) lastHandOver_.store(nowNs, std::memory_order_relaxed);
    if (parseAtNs != 0) {
      // In the reader's hands: parsed at parseAtNs, in their order, and never pulled again.
      for (PendingRecord& record : ended) {
        record.pulled = true;
        record.dueNs = parseAtNs;
        queue_.push(record);
      }
      wake_.notify_all();
      return ended.size();
    }
    writing_ = !ended.empty();
    inHand_.fetch_add(ended.size());
  }
  for (const PendingRecord& record : ended) {
    sink_(record);
    inHand_.fetch_sub(1);
  }
  if (!ended.empty()) {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    wake_.notify_all();
  }
  return ended.size();
}

size_t DeliveryThread::discardAll() {
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait(lock, [&] { return !writing_; });
  const size_t count = queue_.size();
  queue_ = {};
  wake_.notify_all();
  return count;
}

size_t DeliveryThread::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.size() + inHand_.load();
}

void DeliveryThread::run() {
  pthread_setname_np(pthread_self(), "MsptiChanReader");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (queue_.empty() || writing_) {
      wake_.wait(lock);
      continue;
    }
    const uint64_t now = realtimeNs();
    const uint64_t due = queue_.top().dueNs;
    if (due > now) {
      wake_.wait_until(lock, steadyDeadlineFor(due));
      continue;
    }
    std::vector<PendingRecord> batch;
    while (!queue_.empty() && queue_.top().dueNs <= now) {
      batch.push_back(queue_.top());
      queue_.pop();
    }
    writing_ = true;
    inHand_.fetch_add(batch.size());
    lastHandOver_.store(now, std::memory_order_relaxed);
    lock.unlock();
    for (const PendingRecord& record : batch) {
      sink_(record);
      inHand_.fetch_sub(1);
    }
    lock.lock();
    writing_ = false;
    wake_.notify_all();
  }
}

}  // namespace torch_mspti::sim
