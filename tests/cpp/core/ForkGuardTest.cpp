// The fork guard holds every lock of the plugin across fork(): for each lock, another thread holds
// it when the test thread forks (as a thread in the middle of the first library load, a
// completion, a registration or a diagnostics call would), and the child must then read
// everything torch_mspti.diagnostics() reads, and the record store's and name table's locks a
// collecting session's completions take, without deadlock. Without the guard holding a lock, the
// child finds it held by a thread that does not exist there and hangs (the parent kills it after
// a generous bound and the test fails).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "PeerBackends.h"
#include "PluginContext.h"
#include "Registration.h"

namespace torch_mspti::test {
namespace {

struct Lock {
  const char* name;
  std::function<void()> lock, unlock;
};

// What the child reads: everything diagnostics() and a new session's deps read, and an append to
// the collecting session's store.
void readEverything(PluginContext& c, RecordStore& store) {
  (void)c.config.snapshot();
  (void)Config::settings();
  (void)c.library.report();
  (void)registrationStatus();
  (void)detectPeerBackend();
  (void)c.stats.last();
  (void)c.stats.totals();
  (void)c.pool.outstanding();
  (void)c.pool.pooled();
  (void)c.sessionDeps();
  (void)store.names().intern("k");
  WalkResult empty;
  store.append(empty);
}

// Forks while another thread holds `l` (released 100 ms later); true when the child read
// everything and exited within 20 s.
bool childReadsWhileHeld(PluginContext& c, RecordStore& store, const Lock& l) {
  std::promise<void> held;
  std::thread holder([&] {
    l.lock();
    held.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    l.unlock();
  });
  held.get_future().wait();
  const pid_t pid = fork();
  if (pid == 0) {
    readEverything(c, store);
    _exit(0);
  }
  holder.join();
  if (pid < 0) return false;
  int status = 0;
  for (int i = 0; i < 2000; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return false;
}

TEST(ForkGuard, TheChildReadsEverythingWhileAnotherThreadHeldEachLockAtTheFork) {
  PluginContext& c = PluginContext::process();
  auto store = std::make_shared<RecordStore>(0);
  c.pool.setSink(store);
  const Lock locks[] = {
      {"registration", &lockRegistrationForFork, &unlockRegistrationAfterFork},
      {"config", [&] { c.config.lockForFork(); }, [&] { c.config.unlockAfterFork(); }},
      {"peer backends", &lockPeerBackendsForFork, &unlockPeerBackendsAfterFork},
      {"library (first load)", [&] { c.library.lockForFork(); }, [&] { c.library.unlockAfterFork(); }},
      {"stats", [&] { c.stats.lockForFork(); }, [&] { c.stats.unlockAfterFork(); }},
      {"pool, store and names", [&] { c.pool.lockForFork(); }, [&] { c.pool.unlockAfterFork(); }},
      {"store and names", [&] { store->lockForFork(); }, [&] { store->unlockAfterFork(); }},
      {"names", [&] { store->names().lockForFork(); }, [&] { store->names().unlockAfterFork(); }},
      // The provider's lock is private: setDevicePropertiesProvider holds it; the whole set is
      // covered by the context's own lockForFork (what the guard takes).
      {"everything", [&] { c.lockForFork(); }, [&] { c.unlockAfterFork(); }},
  };
  for (const Lock& l : locks) EXPECT_TRUE(childReadsWhileHeld(c, *store, l)) << l.name;
  c.pool.setSink(nullptr);
}

}  // namespace
}  // namespace torch_mspti::test
