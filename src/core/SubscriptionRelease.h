// MSPTI's Unsubscribe, off stop()'s path.
//
// msptiUnsubscribe stops the device tasks and then joins MSPTI's channel poller, which sits in the
// driver's poll for up to 1 s (MSPTI channel_pool.cpp ChannelPool::Run; mspti.md 2.2): on the real
// library a stop() that unsubscribed took about 1 s, all of it in that join. The drain leaves
// every kind disabled and every buffer delivered, so nothing of the session is lost by
// unsubscribing later: a session hands its subscriber here and returns, and one thread calls
// msptiUnsubscribe and then msptiActivityFlushAll (a record delivered by that flush has no session
// left to take it: the buffer pool counts it as an orphan).
//
// The next user of the subscriber:
//  * a session of ours waits for the release in flight before it subscribes (waitIdle), and
//    reports the wait (timings.release_wait_ms);
//  * another MSPTI user (torch_npu's backend, msmonitor) that subscribes meanwhile waits inside
//    msptiSubscribe: MSPTI holds one mutex across the whole of Subscribe and of Unsubscribe's
//    teardown (callback_manager.cpp CallbackManager::Init/UnInit), so it gets the subscriber as
//    soon as the release ends. Only a Subscribe that comes before the release has begun
//    (microseconds after stop() returned) is refused with MULTIPLE_SUBSCRIBERS.
// At process exit the package's atexit hook waits for the release (waitIdle) before MSPTI's
// singletons are destroyed; a release not begun by then is skipped (ExitGuard.h).
// The release thread is detached; waitIdle() waits for it to end (inFlight).
// Fork: a child forgets the parent's release thread (it does not exist there).
// Thread-safety: every member may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include <mspti/mspti.h>

#include "MsptiLibrary.h"

namespace torch_mspti {

class SubscriptionRelease {
 public:
  struct Stats {
    uint64_t releases = 0;         // releases begun in this process
    double lastUnsubscribeMs = 0;  // wall time of the latest msptiUnsubscribe, ms (0: none yet)
    int lastResult = 0;            // its msptiResult
    std::string lastError;         // the failed call, described ("" when it succeeded)
    bool inFlight = false;         // a release is running now
    uint64_t skippedAtExit = 0;    // releases not made because the process was exiting
  };

  SubscriptionRelease() = default;
  SubscriptionRelease(const SubscriptionRelease&) = delete;
  SubscriptionRelease& operator=(const SubscriptionRelease&) = delete;
  ~SubscriptionRelease();

  // Unsubscribes `handle` from the library of `fns` on a background thread, then flushes once.
  // Waits first for a release still in flight (there is one subscriber per process).
  void begin(const MsptiFunctions* fns, msptiSubscriberHandle handle);
  // Blocks until no release is in flight; returns the time waited, ms.
  double waitIdle();
  // The latest release's failure ("" when none), once: the next session reports it, since MSPTI
  // may then still hold the subscriber.
  std::string takeError();
  Stats stats() const;
  // The fork guard's hooks (PluginContext::lockForFork); in the child, after unlocking, the
  // parent's release in flight is forgotten (its thread does not exist there).
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }
  void forgetAfterFork() noexcept;

 private:
  void run(const MsptiFunctions* fns, msptiSubscriberHandle handle);

  mutable std::mutex mutex_;
  std::condition_variable idle_;
  Stats stats_;
  std::string pendingError_;  // lastError until a session takes it
};

}  // namespace torch_mspti
