#include "CorrelationForwarder.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <new>

namespace torch_mspti {
namespace {

struct LogChunk {
  uint64_t ids[CorrelationForwarder::kLogChunkIds];
  std::atomic<LogChunk*> next{nullptr};
};

struct Entry {
  uint64_t id;
  uint32_t gen;    // generation it was pushed under (0: none armed)
  bool forwarded;  // pushed onto MSPTI's stack (and counted in `outstanding`)
};

constexpr msptiExternalCorrelationKind kKinds[2] = {MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                    MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1};

msptiResult callPush(const MsptiFunctions* f, int s, uint64_t id) noexcept {
  try {
    return f->pushExternalCorrelationId(kKinds[s], id);
  } catch (...) {
    return MSPTI_ERROR_INNER;
  }
}

msptiResult callPop(const MsptiFunctions* f, int s, uint64_t* last) noexcept {
  try {
    return f->popExternalCorrelationId(kKinds[s], last);
  } catch (...) {
    return MSPTI_ERROR_INNER;
  }
}

// Takes one outstanding push of `counter`; false when none is left (disarm() took them).
bool claim(std::atomic<int64_t>& counter) noexcept {
  int64_t n = counter.load(std::memory_order_acquire);
  do {
    if (n <= 0) return false;
  } while (!counter.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel, std::memory_order_acquire));
  return true;
}

}  // namespace

// One per thread that pushed while armed. The owner thread alone writes the stacks and the log
// and publishes the log with a release store of `logCount`; the profiler thread reads the log
// after disarm() and exchanges `outstanding` in disarm(). Never freed while its thread lives.
struct CorrelationForwarder::ThreadState {
  uint32_t tid = 0;
  std::atomic<int64_t> outstanding[2] = {0, 0};  // forwarded pushes not yet popped
  std::atomic<bool> dead{false};
  ThreadState* next = nullptr;  // registry link
  // owner only:
  Entry entries[2][kMaxDepth];
  int depth[2] = {0, 0};
  int overflow[2] = {0, 0};  // pushes beyond kMaxDepth, matched by their pops
  uint32_t stackGen = 0;     // generation whose entries the stacks hold
  LogChunk* first = nullptr;
  LogChunk* cur = nullptr;
  uint32_t used = 0;  // ids in `cur`
  std::atomic<uint32_t> logGen{0};
  std::atomic<uint64_t> logCount{0};  // ids published for `logGen`, over all chunks
};

namespace {

// Marks the thread's state dead at thread exit; set up with the state, so the hot path never
// touches a thread_local that has a destructor.
struct StateOwner {
  CorrelationForwarder::ThreadState* state = nullptr;
  ~StateOwner() {
    if (state) state->dead.store(true, std::memory_order_release);
  }
};

// This thread's state (process-wide, one forwarder per process: PluginContext.h says why).
thread_local CorrelationForwarder::ThreadState* tState = nullptr;

}  // namespace

CorrelationForwarder::ThreadState* CorrelationForwarder::newState() noexcept {
  auto* t = new (std::nothrow) ThreadState();
  if (!t) return nullptr;
  t->tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  try {
    static thread_local StateOwner owner;
    owner.state = t;
  } catch (...) {}
  ThreadState* head = threads_.load(std::memory_order_relaxed);
  do {
    t->next = head;
  } while (!threads_.compare_exchange_weak(head, t, std::memory_order_release, std::memory_order_relaxed));
  tState = t;
  return t;
}

CorrelationForwarder::ThreadState* CorrelationForwarder::stateFor(uint32_t gen) noexcept {
  ThreadState* t = tState;
  if (!t) {
    if (gen == 0) return nullptr;  // nothing to track before a thread's first armed push
    t = newState();
    if (!t) return nullptr;
  }
  if (gen != 0 && t->stackGen != gen) {
    const int stale = t->depth[0] + t->depth[1];
    if (stale) staleEntries_.fetch_add(static_cast<uint64_t>(stale), std::memory_order_relaxed);
    t->depth[0] = t->depth[1] = 0;
    t->overflow[0] = t->overflow[1] = 0;
    t->stackGen = gen;
  }
  return t;
}

void CorrelationForwarder::log(ThreadState& t, uint32_t gen, uint64_t entry) noexcept {
  uint64_t n = t.logCount.load(std::memory_order_relaxed);
  if (t.logGen.load(std::memory_order_relaxed) != gen) {
    // A new session: reuse the chunks from the start (the previous reader has finished: takeLog
    // runs in stop(), before the next arm()).
    t.logCount.store(0, std::memory_order_relaxed);
    t.logGen.store(gen, std::memory_order_release);
    t.cur = t.first;
    t.used = 0;
    n = 0;
  }
  if (!t.cur || t.used == kLogChunkIds) {
    LogChunk* next = t.cur ? t.cur->next.load(std::memory_order_relaxed) : t.first;
    if (!next) {
      next = new (std::nothrow) LogChunk();  // once per kLogChunkIds ids, and only until the busiest session
      if (!next) {
        logLost_.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      if (t.cur) t.cur->next.store(next, std::memory_order_release);
      else t.first = next;
    }
    t.cur = next;
    t.used = 0;
  }
  t.cur->ids[t.used++] = entry;
  t.logCount.store(n + 1, std::memory_order_release);
}

void CorrelationForwarder::freeDeadStates() {
  // Only non-head entries are unlinked, so concurrent pushes at the head are unaffected.
  ThreadState* prev = threads_.load(std::memory_order_acquire);
  while (prev) {
    ThreadState* cur = prev->next;
    if (cur && cur->dead.load(std::memory_order_acquire)) {
      prev->next = cur->next;
      for (LogChunk* c = cur->first; c;) {
        LogChunk* n = c->next.load(std::memory_order_relaxed);
        delete c;
        c = n;
      }
      delete cur;
      continue;
    }
    prev = cur;
  }
}

uint32_t CorrelationForwarder::arm(const MsptiFunctions* fns) {
  freeDeadStates();
  const bool forward = fns && fns->pushExternalCorrelationId && fns->popExternalCorrelationId;
  fns_.store(forward ? fns : nullptr, std::memory_order_release);
  uint32_t gen = nextGen_++;
  if (nextGen_ >= kForwardBit) nextGen_ = 1;
  if (forward) gen |= kForwardBit;
  armedGen_.store(gen, std::memory_order_release);
  return gen;
}

uint64_t CorrelationForwarder::disarm() {
  armedGen_.store(0, std::memory_order_release);
  const MsptiFunctions* f = fns_.load(std::memory_order_acquire);
  uint64_t popped = 0;
  // The stack is process-global, so the ids other threads still hold can be popped from here.
  for (ThreadState* t = threads_.load(std::memory_order_acquire); t; t = t->next) {
    for (int s = 0; s < 2; ++s) {
      const int64_t n = t->outstanding[s].exchange(0, std::memory_order_acq_rel);
      for (int64_t i = 0; f && i < n; ++i) {
        uint64_t last = 0;
        if (callPop(f, s, &last) == MSPTI_SUCCESS) ++popped;
        else errors_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  return popped;
}

void CorrelationForwarder::abandon() noexcept {
  armedGen_.store(0, std::memory_order_relaxed);
  fns_.store(nullptr, std::memory_order_relaxed);
  for (ThreadState* t = threads_.load(std::memory_order_relaxed); t; t = t->next) {
    t->outstanding[0].store(0, std::memory_order_relaxed);
    t->outstanding[1].store(0, std::memory_order_relaxed);
  }
}

std::vector<ThreadOps> CorrelationForwarder::takeLog(uint32_t generation) const {
  std::vector<ThreadOps> out;
  for (ThreadState* t = threads_.load(std::memory_order_acquire); t; t = t->next) {
    if (t->logGen.load(std::memory_order_acquire) != generation) continue;
    const uint64_t n = t->logCount.load(std::memory_order_acquire);
    if (n == 0) continue;
    ThreadOps& ops = out.emplace_back();
    ops.threadId = t->tid;
    ops.ids.reserve(n);
    uint64_t i = 0;
    for (LogChunk* c = t->first; c && i < n; c = c->next.load(std::memory_order_acquire))
      for (uint32_t k = 0; k < kLogChunkIds && i < n; ++k, ++i) ops.ids.push_back(c->ids[k]);
  }
  return out;
}

SessionCounters CorrelationForwarder::counters() const {
  SessionCounters c;
  c.correlationErrors = errors_.load(std::memory_order_relaxed);
  c.correlationOverflow = overflows_.load(std::memory_order_relaxed);
  c.correlationInterleaved = interleaved_.load(std::memory_order_relaxed);
  c.opLogLost = logLost_.load(std::memory_order_relaxed);
  c.staleStackEntries = staleEntries_.load(std::memory_order_relaxed);
  return c;
}

void CorrelationForwarder::push(Stack s, uint64_t id) noexcept {
  uint32_t gen = armedGen_.load(std::memory_order_acquire);
  ThreadState* t = stateFor(gen);
  if (!t) return;
  if (t->depth[s] >= kMaxDepth) {
    ++t->overflow[s];
    overflows_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  bool forwarded = false;
  if (gen != 0) {
    log(*t, gen, s == kUser ? (id | kUserRangeBit) : id);
    if (gen & kForwardBit) {
      const MsptiFunctions* f = fns_.load(std::memory_order_relaxed);
      if (callPush(f, s, id) == MSPTI_SUCCESS) {
        t->outstanding[s].fetch_add(1, std::memory_order_acq_rel);
        forwarded = true;
        if (armedGen_.load(std::memory_order_acquire) != gen) {
          // disarm() ran between our check and our push and may have missed it: take it back
          // unless disarm() already popped it (then the claim fails).
          uint64_t last = 0;
          if (claim(t->outstanding[s])) callPop(f, s, &last);
          forwarded = false;
        }
      } else {
        errors_.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  t->entries[s][t->depth[s]++] = {id, gen, forwarded};
}

void CorrelationForwarder::pop(Stack s) noexcept {
  ThreadState* t = tState;
  if (!t) return;
  if (t->overflow[s] > 0) {
    --t->overflow[s];
    return;
  }
  if (t->depth[s] == 0) return;  // its push happened before this thread was tracked, or was cleared
  const Entry e = t->entries[s][--t->depth[s]];
  if (!e.forwarded || e.gen != armedGen_.load(std::memory_order_acquire)) return;
  // Claim the push first: when disarm() has already taken the outstanding pushes, it popped this
  // one from MSPTI's stack, and popping again would remove an id that is not ours.
  if (!claim(t->outstanding[s])) return;
  const MsptiFunctions* f = fns_.load(std::memory_order_relaxed);
  uint64_t last = 0;
  if (callPop(f, s, &last) == MSPTI_SUCCESS) {
    if (last != e.id) interleaved_.fetch_add(1, std::memory_order_relaxed);
  } else {
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace torch_mspti
