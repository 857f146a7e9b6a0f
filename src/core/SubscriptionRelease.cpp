#include "SubscriptionRelease.h"

#include <chrono>
#include <thread>
#include <utility>

#include "ExitGuard.h"
#include "MsptiActivityApi.h"

namespace torch_mspti {

SubscriptionRelease::~SubscriptionRelease() {
  // Never reached for the process's context (PluginContext is never destroyed); a test's own
  // instance waits for its release.
  waitIdle();
}

void SubscriptionRelease::begin(const MsptiFunctions* fns, msptiSubscriberHandle handle) {
  waitIdle();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.inFlight = true;
  ++stats_.releases;
  // Detached: waitIdle() waits for it through inFlight, and no finished thread is left to join at
  // exit or in a forked child (it touches nothing of this object after its last notify).
  std::thread([this, fns, handle] { run(fns, handle); }).detach();
}

void SubscriptionRelease::run(const MsptiFunctions* fns, msptiSubscriberHandle handle) {
  double ms = 0;
  int result = 0;
  bool skipped = processExiting();  // MSPTI may already be torn down: no call (ExitGuard.h)
  if (!skipped) {
    MsptiActivityApi api(*fns);
    const auto t0 = std::chrono::steady_clock::now();
    result = static_cast<int>(api.unsubscribe(handle));
    ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    api.flushAll();
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (skipped) ++stats_.skippedAtExit;
  else {
    stats_.lastUnsubscribeMs = ms;
    stats_.lastResult = result;
    stats_.lastError =
        result == MSPTI_SUCCESS ? "" : describeCall("msptiUnsubscribe", "subscriber", static_cast<msptiResult>(result));
    pendingError_ = stats_.lastError;
  }
  stats_.inFlight = false;
  idle_.notify_all();
}

double SubscriptionRelease::waitIdle() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return !stats_.inFlight; });
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string SubscriptionRelease::takeError() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(pendingError_, std::string());
}

SubscriptionRelease::Stats SubscriptionRelease::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void SubscriptionRelease::forgetAfterFork() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.inFlight = false;  // the parent's release thread does not exist here
}

}  // namespace torch_mspti
