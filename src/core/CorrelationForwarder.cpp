#include "CorrelationForwarder.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <new>

namespace torch_mspti {
namespace {

// ---- interval mode (see CorrelationForwarder.h) ----

struct IntervalSlot {
  uint64_t opId;
  int64_t start;
  int64_t end;
  uint32_t gen;  // arming generation it was recorded under (the reader keeps only its own)
};

struct IntervalChunk {
  IntervalSlot slots[CorrelationForwarder::kIntervalChunkSize];
  std::atomic<IntervalChunk*> next{nullptr};
};

// One per thread that recorded an interval. Only the owner thread writes slots, `gen`, `cur`
// and `used`; it publishes with a release store of `count`. Never freed while its thread lives.
struct IntervalLog {
  uint32_t tid = 0;
  uint32_t gen = 0;                // owner: generation the log currently holds
  IntervalChunk* first = nullptr;  // immutable after creation
  IntervalChunk* cur = nullptr;    // owner: chunk being filled
  uint32_t used = 0;               // owner: slots used in `cur`
  std::atomic<uint64_t> count{0};  // slots published for `gen`, over all chunks
  std::atomic<bool> dead{false};   // the thread exited
  IntervalLog* next = nullptr;     // registry link (see gLogs)
};

// Registry of logs: threads push at the head with a CAS; only the arming thread unlinks (dead,
// non-head) entries, so a pusher never races with a removal of the node it links to.
std::atomic<IntervalLog*> gLogs{nullptr};

// Marks the thread's log dead at thread exit; created only with the log, so the hot path never
// touches a thread_local that has a destructor.
struct IntervalLogOwner {
  IntervalLog* log = nullptr;
  ~IntervalLogOwner() {
    if (log) log->dead.store(true, std::memory_order_release);
  }
};

int64_t realtimeNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void freeLog(IntervalLog* log) {
  IntervalChunk* c = log->first;
  while (c) {
    IntervalChunk* n = c->next.load(std::memory_order_relaxed);
    delete c;
    c = n;
  }
  delete log;
}

struct Entry {
  uint64_t id;
  uint32_t gen;  // arming generation it was forwarded under, 0 = not forwarded
};

struct ThreadStacks {
  Entry entries[2][CorrelationForwarder::kMaxDepth];
  int depth[2] = {0, 0};
  int overflow[2] = {0, 0};  // pushes beyond kMaxDepth, matched by their pops
  // Interval mode only: push time of each kOps entry, and this thread's log (created lazily).
  int64_t starts[CorrelationForwarder::kMaxDepth];
  IntervalLog* log = nullptr;
};

thread_local ThreadStacks tStacks;

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

IntervalLog* createLog(ThreadStacks& t, CorrelationForwarder& f) noexcept {
  IntervalLog* log = new (std::nothrow) IntervalLog();
  IntervalChunk* chunk = log ? new (std::nothrow) IntervalChunk() : nullptr;
  if (!chunk) {
    delete log;
    return nullptr;
  }
  f.noteIntervalChunk();
  log->tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  log->first = log->cur = chunk;
  try {
    static thread_local IntervalLogOwner owner;
    owner.log = log;
  } catch (...) {}
  IntervalLog* head = gLogs.load(std::memory_order_relaxed);
  do {
    log->next = head;
  } while (!gLogs.compare_exchange_weak(head, log, std::memory_order_release, std::memory_order_relaxed));
  t.log = log;
  return log;
}

// Owner thread: appends one interval of generation `gen` to its log.
void recordInterval(ThreadStacks& t, CorrelationForwarder& f, uint32_t gen, uint64_t opId, int64_t start,
                    int64_t end) noexcept {
  IntervalLog* log = t.log ? t.log : createLog(t, f);
  if (!log) {
    f.noteIntervalLost();
    return;
  }
  uint64_t n = log->count.load(std::memory_order_relaxed);
  if (log->gen != gen) {
    // A new session: reuse the chunks from the start. The previous session's reader has
    // finished (takeIntervals runs in stop(), before the next arming).
    log->gen = gen;
    log->cur = log->first;
    log->used = 0;
    n = 0;
  }
  if (log->used == CorrelationForwarder::kIntervalChunkSize) {
    IntervalChunk* next = log->cur->next.load(std::memory_order_relaxed);
    if (!next) {
      next = new (std::nothrow) IntervalChunk();  // the only allocation: once per full chunk
      if (!next) {
        f.noteIntervalLost();
        return;
      }
      f.noteIntervalChunk();
      log->cur->next.store(next, std::memory_order_release);
    }
    log->cur = next;
    log->used = 0;
  }
  log->cur->slots[log->used++] = {opId, start, end, gen};
  log->count.store(n + 1, std::memory_order_release);
}

}  // namespace

CorrelationForwarder& CorrelationForwarder::instance() {
  static CorrelationForwarder* f = new CorrelationForwarder();
  return *f;
}

void CorrelationForwarder::arm(const MsptiFunctions* fns) {
  if (!fns || !fns->pushExternalCorrelationId || !fns->popExternalCorrelationId) return;
  fns_.store(fns, std::memory_order_release);
  uint32_t gen = nextGen_++;
  if (nextGen_ >= kIntervalBit) nextGen_ = 1;
  armedGen_.store(gen, std::memory_order_release);
}

uint32_t CorrelationForwarder::armIntervals() {
  // Free the logs of threads that exited (nobody reads them now; only non-head entries are
  // unlinked, so concurrent pushes at the head are unaffected).
  IntervalLog* prev = gLogs.load(std::memory_order_acquire);
  while (prev) {
    IntervalLog* cur = prev->next;
    if (cur && cur->dead.load(std::memory_order_acquire)) {
      prev->next = cur->next;
      freeLog(cur);
      continue;
    }
    prev = cur;
  }
  const uint32_t gen = nextGen_++ | kIntervalBit;
  if (nextGen_ >= kIntervalBit) nextGen_ = 1;
  armedGen_.store(gen, std::memory_order_release);
  return gen;
}

std::vector<OpInterval> CorrelationForwarder::takeIntervals(uint32_t generation) const {
  std::vector<OpInterval> out;
  for (IntervalLog* log = gLogs.load(std::memory_order_acquire); log; log = log->next) {
    const uint64_t n = log->count.load(std::memory_order_acquire);
    uint64_t i = 0;
    for (IntervalChunk* c = log->first; c && i < n; c = c->next.load(std::memory_order_acquire)) {
      for (uint32_t k = 0; k < kIntervalChunkSize && i < n; ++k, ++i) {
        const IntervalSlot& slot = c->slots[k];
        if (slot.gen == generation) out.push_back({log->tid, slot.opId, slot.start, slot.end});
      }
    }
  }
  return out;
}

bool CorrelationForwarder::claimOutstanding(int s) noexcept {
  int64_t n = outstanding_[s].load(std::memory_order_acquire);
  do {
    if (n <= 0) return false;
  } while (!outstanding_[s].compare_exchange_weak(n, n - 1, std::memory_order_acq_rel, std::memory_order_acquire));
  return true;
}

uint64_t CorrelationForwarder::disarm() {
  armedGen_.store(0, std::memory_order_release);
  const MsptiFunctions* f = fns_.load(std::memory_order_acquire);
  uint64_t popped = 0;
  for (int s = 0; s < 2; ++s) {
    // The stack is process-global, so the ids other threads still hold can be popped from here.
    int64_t n = outstanding_[s].exchange(0, std::memory_order_acq_rel);
    for (int64_t i = 0; f && i < n; ++i) {
      uint64_t last = 0;
      if (callPop(f, s, &last) == MSPTI_SUCCESS) ++popped;
      else errors_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return popped;
}

void CorrelationForwarder::disarmAfterFork() noexcept {
  armedGen_.store(0, std::memory_order_relaxed);
  fns_.store(nullptr, std::memory_order_relaxed);
  outstanding_[0].store(0, std::memory_order_relaxed);
  outstanding_[1].store(0, std::memory_order_relaxed);
}

void CorrelationForwarder::push(Stack s, uint64_t id) noexcept {
  ThreadStacks& t = tStacks;
  if (t.depth[s] >= kMaxDepth) {
    ++t.overflow[s];
    overflows_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  uint32_t gen = armedGen_.load(std::memory_order_acquire);
  if (gen & kIntervalBit) {
    // Interval mode: remember when the op started; only torch's ops (kOps) are linked.
    if (s == kOps) t.starts[t.depth[s]] = realtimeNs();
    else gen = 0;
  } else if (gen) {
    const MsptiFunctions* f = fns_.load(std::memory_order_relaxed);
    if (callPush(f, s, id) == MSPTI_SUCCESS) {
      outstanding_[s].fetch_add(1, std::memory_order_acq_rel);
      if (armedGen_.load(std::memory_order_acquire) != gen) {
        // disarm() ran between our check and our push and may have missed it: take it back
        // unless disarm() already popped it (then the claim fails).
        uint64_t last = 0;
        if (claimOutstanding(s)) callPop(f, s, &last);
        gen = 0;
      }
    } else {
      errors_.fetch_add(1, std::memory_order_relaxed);
      gen = 0;
    }
  }
  t.entries[s][t.depth[s]++] = {id, gen};
}

void CorrelationForwarder::pop(Stack s) noexcept {
  ThreadStacks& t = tStacks;
  if (t.overflow[s] > 0) {
    --t.overflow[s];
    return;
  }
  if (t.depth[s] == 0) return;  // its push happened before this thread was tracked
  const Entry e = t.entries[s][--t.depth[s]];
  if (e.gen == 0 || e.gen != armedGen_.load(std::memory_order_acquire)) return;
  if (e.gen & kIntervalBit) {
    recordInterval(t, *this, e.gen, e.id, t.starts[t.depth[s]], realtimeNs());
    return;
  }
  // Claim the push first: when disarm() has already taken the outstanding pushes, it popped
  // this one from MSPTI's stack, and popping again would remove an id that is not ours.
  if (!claimOutstanding(s)) return;
  const MsptiFunctions* f = fns_.load(std::memory_order_relaxed);
  uint64_t last = 0;
  if (callPop(f, s, &last) == MSPTI_SUCCESS) {
    if (last != e.id) interleaved_.fetch_add(1, std::memory_order_relaxed);
  } else {
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace torch_mspti
