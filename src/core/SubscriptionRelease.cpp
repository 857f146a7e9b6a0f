#include "SubscriptionRelease.h"

#include <chrono>
#include <utility>

#include "ExitGuard.h"
#include "MsptiActivityApi.h"

namespace torch_mspti {

SubscriptionRelease::~SubscriptionRelease() {
  // Never reached for the process's context (PluginContext is never destroyed); a test's own
  // instance joins its thread.
  waitIdle();
}

void SubscriptionRelease::begin(const MsptiFunctions* fns, msptiSubscriberHandle handle) {
  waitIdle();
  std::lock_guard<std::mutex> lock(mutex_);
  if (thread_ && thread_->joinable()) thread_->join();  // ended: waitIdle saw it idle
  stats_.inFlight = true;
  ++stats_.releases;
  thread_ = std::make_unique<std::thread>([this, fns, handle] { run(fns, handle); });
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
  if (thread_ && thread_->joinable()) thread_->join();
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
  (void)thread_.release();  // leaked on purpose: joining a thread of the parent would never return
  stats_.inFlight = false;
}

}  // namespace torch_mspti
