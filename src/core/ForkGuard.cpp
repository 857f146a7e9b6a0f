#include "ForkGuard.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

#include "CorrelationForwarder.h"
#include "NameTable.h"
#include "SessionStats.h"

namespace torch_mspti {
namespace {

std::atomic<bool> gForked{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the child handler must not take a lock");

// Leaf locks, never held while waiting for another lock: taking them in a fixed order here cannot
// deadlock, and holding them across fork() means no other thread is inside them at that moment.
void prepare() {
  NameTable::instance().lockForFork();
  StatsRegistry::instance().lockForFork();
}

void parent() {
  StatsRegistry::instance().unlockAfterFork();
  NameTable::instance().unlockAfterFork();
}

void child() {
  gForked.store(true, std::memory_order_relaxed);
  CorrelationForwarder::instance().disarmAfterFork();
  StatsRegistry::instance().unlockAfterFork();
  NameTable::instance().unlockAfterFork();
}

}  // namespace

void installForkGuard() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(&prepare, &parent, &child); });
}

bool forkedFromMsptiParent() noexcept { return gForked.load(std::memory_order_relaxed); }

}  // namespace torch_mspti
