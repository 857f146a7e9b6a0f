// Delivery of completed buffers: the "ActivityManager" thread and its per-buffer worker threads.
//
// Real behaviour mimicked (mspti.md 5.2, 6 item 3): full buffers are queued by recorders; the
// ActivityManager thread (started by the first RegisterCallbacks, alive until exit) wakes and
// spawns a NEW std::thread for each full buffer, which calls the complete callback, so several
// completions can run concurrently. FlushAll takes the queued buffers itself and then waits for,
// and joins, the workers still running.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <thread>

#include "CallbackContext.h"
#include "SimCounters.h"
#include "SimOptions.h"
#include "mspti/mspti_activity.h"

namespace torch_mspti::sim {

// A user buffer: `data` may be NULL (a declined request, delivered as (NULL, 0, 0), mspti.md 5.1).
struct ActivityBuffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  size_t validSize = 0;
};

// Registered by msptiActivityRegisterCallbacks; overwritten by later calls, never cleared.
struct BufferCallbacks {
  std::atomic<msptiBuffersCallbackRequestFunc> request{nullptr};
  std::atomic<msptiBuffersCallbackCompleteFunc> complete{nullptr};
};

class CompletionDispatcher {
 public:
  CompletionDispatcher(const BufferCallbacks& callbacks, const SimOptions& options, SimCounters& counters)
      : callbacks_(callbacks), options_(options), counters_(counters) {}
  CompletionDispatcher(const CompletionDispatcher&) = delete;
  CompletionDispatcher& operator=(const CompletionDispatcher&) = delete;

  // Starts the ActivityManager thread once; later calls do nothing.
  void start();
  // Queues a full buffer for a worker thread. Called by recorders holding the buffer lock.
  void enqueueFull(const ActivityBuffer& buffer);
  // Takes every queued buffer (FlushAll delivers them on its caller's thread).
  std::deque<ActivityBuffer> takeQueued();
  // Calls the complete callback on the calling thread.
  void deliver(const ActivityBuffer& buffer, CallbackContext context);
  // Blocks until no buffer is queued or being delivered by a worker, then joins the workers
  // (including any the manager thread is joining), so none is left when FlushAll returns.
  void waitForWorkers();
  // Wake-up period of the ActivityManager thread in ms (0: only when notified).
  void setFlushPeriodMs(uint32_t periodMs);

 private:
  struct Worker {
    std::thread thread;
    bool done = false;
  };

  void managerLoop();
  // Starts a worker for `buffer`; returns false if no thread could be created.
  bool spawnWorkerLocked(const ActivityBuffer& buffer);
  void workerFinished(std::list<Worker>::iterator self);

  const BufferCallbacks& callbacks_;
  const SimOptions& options_;
  SimCounters& counters_;

  std::mutex mutex_;
  std::condition_variable cv_;  // queue_, inFlight_, reapPending_ and flushPeriodMs_ changes
  std::deque<ActivityBuffer> queue_;
  size_t inFlight_ = 0;  // buffers taken by the manager whose completion has not returned yet
  std::list<Worker> workers_;
  size_t reaping_ = 0;  // finished workers the manager is joining outside mutex_
  bool reapPending_ = false;
  bool started_ = false;
  uint32_t flushPeriodMs_ = 0;
};

}  // namespace torch_mspti::sim
