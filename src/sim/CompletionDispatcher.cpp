#include "CompletionDispatcher.h"

#include <pthread.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <utility>

namespace torch_mspti::sim {

void abortOnReentry(const char* api, const char* realBehaviour) {
  const char* where = "a callback";
  switch (CallbackScope::current()) {
    case CallbackContext::kRequest: where = "the buffer-request callback (buffer lock held)"; break;
    case CallbackContext::kCompleteLocked: where = "a FlushAll completion callback (buffer lock held)"; break;
    case CallbackContext::kCompleteUnlocked: where = "a FlushAll completion callback"; break;
    case CallbackContext::kCompleteWorker: where = "a completion worker thread"; break;
    case CallbackContext::kNone: break;
  }
  std::fprintf(stderr, "libmspti_sim: %s called from %s: %s. Aborting instead of hanging.\n", api, where,
               realBehaviour);
  std::fflush(stderr);
  std::abort();
}

void CompletionDispatcher::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_) {
    return;
  }
  // Lives until process exit, as MSPTI's ActivityManager thread does (mspti.md 2.3). Detached and
  // never stopped: the dispatcher is never destroyed, so at exit the thread simply sleeps on cv_.
  std::thread(&CompletionDispatcher::managerLoop, this).detach();
  started_ = true;
}

void CompletionDispatcher::enqueueFull(const ActivityBuffer& buffer) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.push_back(buffer);
  cv_.notify_all();
}

std::deque<ActivityBuffer> CompletionDispatcher::takeQueued() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::deque<ActivityBuffer> taken;
  taken.swap(queue_);
  cv_.notify_all();
  return taken;
}

void CompletionDispatcher::deliver(const ActivityBuffer& buffer, CallbackContext context) {
  msptiBuffersCallbackCompleteFunc complete = callbacks_.complete.load(std::memory_order_acquire);
  {
    CallbackScope scope(context);
    if (complete != nullptr) {
      complete(buffer.data, buffer.size, buffer.validSize);
    }
  }
  SimCounters::add(counters_.buffersCompleted);
}

void CompletionDispatcher::setFlushPeriodMs(uint32_t periodMs) {
  std::lock_guard<std::mutex> lock(mutex_);
  flushPeriodMs_ = periodMs;
  cv_.notify_all();
}

void CompletionDispatcher::waitForWorkers() {
  std::list<Worker> joinable;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Without a manager thread nobody would empty the queue; FlushAll has taken it already.
    cv_.wait(lock, [&] { return (queue_.empty() || !started_) && inFlight_ == 0 && reaping_ == 0; });
    joinable.splice(joinable.end(), workers_);
  }
  for (Worker& worker : joinable) {
    if (worker.thread.joinable()) {
      worker.thread.join();
    }
  }
}

bool CompletionDispatcher::spawnWorkerLocked(const ActivityBuffer& buffer) {
  auto self = workers_.emplace(workers_.end());
  try {
    // Assigned while mutex_ is held: the worker touches its node only under mutex_ (at the end).
    // completion_delay_ns: the worker starts late (a starved scheduler; MSPTI starts one thread per
    // full buffer), so the recorder's next buffer request finds this one still out.
    const auto delayNs = options_.get(Option::kCompletionDelayNs);
    self->thread = std::thread([this, buffer, self, delayNs] {
      if (delayNs > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(delayNs));
      deliver(buffer, CallbackContext::kCompleteWorker);
      workerFinished(self);
    });
    return true;
  } catch (const std::system_error&) {
    workers_.erase(self);
    return false;
  }
}

void CompletionDispatcher::workerFinished(std::list<Worker>::iterator self) {
  std::lock_guard<std::mutex> lock(mutex_);
  --inFlight_;
  self->done = true;
  reapPending_ = true;
  cv_.notify_all();
}

void CompletionDispatcher::managerLoop() {
  pthread_setname_np(pthread_self(), "ActivityManager");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    auto hasWork = [&] { return !queue_.empty() || reapPending_; };
    if (flushPeriodMs_ > 0) {
      // A periodic wake-up only ever finds FULL buffers to deliver: the current buffer belongs to
      // the recorders and is handed out by FlushAll alone (mspti.md 2.3, 6 item 5).
      cv_.wait_for(lock, std::chrono::milliseconds(flushPeriodMs_), hasWork);
    } else {
      cv_.wait(lock, hasWork);
    }
    reapPending_ = false;
    while (!queue_.empty()) {
      ActivityBuffer buffer = queue_.front();
      queue_.pop_front();
      ++inFlight_;
      if (!spawnWorkerLocked(buffer)) {
        // Out of threads: deliver on the manager thread rather than lose the buffer.
        lock.unlock();
        deliver(buffer, CallbackContext::kCompleteWorker);
        lock.lock();
        --inFlight_;
        cv_.notify_all();
      }
    }
    std::list<Worker> finished;
    for (auto it = workers_.begin(); it != workers_.end();) {
      auto next = std::next(it);
      if (it->done) {
        finished.splice(finished.end(), workers_, it);
      }
      it = next;
    }
    if (!finished.empty()) {
      reaping_ += finished.size();
      lock.unlock();
      for (Worker& worker : finished) {
        worker.thread.join();
      }
      lock.lock();
      reaping_ -= finished.size();
      cv_.notify_all();
    }
  }
}

}  // namespace torch_mspti::sim
