#include "ForkGuard.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace torch_mspti {
namespace {

// Read by the pthread_atfork handlers (process-wide: PluginContext.h says why).
constexpr int kMaxParticipants = 8;
ForkParticipant gParticipants[kMaxParticipants];
std::atomic<int> gCount{0};
std::atomic<bool> gLoaded{false};
std::atomic<bool> gForked{false};
std::atomic<bool> gForkWarned{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the child handler must not take a lock");

// Participants' locks are leaf locks, never held while waiting for another: taking them in
// registration order here cannot deadlock, and holding them across fork() means no other thread
// is inside them at that moment.
void prepare() {
  const int n = gCount.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i)
    if (gParticipants[i].prepare) gParticipants[i].prepare(gParticipants[i].self);
}

void parent() {
  const int n = gCount.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i)
    if (gParticipants[i].parent) gParticipants[i].parent(gParticipants[i].self);
}

void child() {
  if (gLoaded.load(std::memory_order_relaxed)) gForked.store(true, std::memory_order_relaxed);
  gForkWarned.store(false, std::memory_order_relaxed);  // a grandchild warns once too
  const int n = gCount.load(std::memory_order_acquire);
  for (int i = n - 1; i >= 0; --i)
    if (gParticipants[i].child) gParticipants[i].child(gParticipants[i].self);
}

}  // namespace

void registerForkParticipant(const ForkParticipant& p) {
  static std::mutex mutex;
  static std::once_flag once;
  std::lock_guard<std::mutex> lock(mutex);
  std::call_once(once, [] { pthread_atfork(&prepare, &parent, &child); });
  const int n = gCount.load(std::memory_order_relaxed);
  if (n >= kMaxParticipants) return;
  gParticipants[n] = p;
  gCount.store(n + 1, std::memory_order_release);
}

void noteMsptiLoaded() { gLoaded.store(true, std::memory_order_relaxed); }

bool forkedFromMsptiParent() noexcept { return gForked.load(std::memory_order_relaxed); }

bool claimForkedChildWarning() noexcept {
  return forkedFromMsptiParent() && !gForkWarned.exchange(true, std::memory_order_relaxed);
}

}  // namespace torch_mspti
