#include "CorrelationForwarder.h"

namespace torch_mspti {
namespace {

struct Entry {
  uint64_t id;
  uint32_t gen;  // arming generation it was forwarded under, 0 = not forwarded
};

struct ThreadStacks {
  Entry entries[2][CorrelationForwarder::kMaxDepth];
  int depth[2] = {0, 0};
  int overflow[2] = {0, 0};  // pushes beyond kMaxDepth, matched by their pops
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

}  // namespace

CorrelationForwarder& CorrelationForwarder::instance() {
  static CorrelationForwarder* f = new CorrelationForwarder();
  return *f;
}

void CorrelationForwarder::arm(const MsptiFunctions* fns) {
  if (!fns || !fns->pushExternalCorrelationId || !fns->popExternalCorrelationId) return;
  fns_.store(fns, std::memory_order_release);
  uint32_t gen = nextGen_++;
  if (nextGen_ == 0) nextGen_ = 1;
  armedGen_.store(gen, std::memory_order_release);
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
  if (gen) {
    const MsptiFunctions* f = fns_.load(std::memory_order_relaxed);
    if (callPush(f, s, id) == MSPTI_SUCCESS) {
      outstanding_[s].fetch_add(1, std::memory_order_relaxed);
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
  const MsptiFunctions* f = fns_.load(std::memory_order_relaxed);
  uint64_t last = 0;
  if (callPop(f, s, &last) == MSPTI_SUCCESS) {
    outstanding_[s].fetch_sub(1, std::memory_order_relaxed);
    if (last != e.id) interleaved_.fetch_add(1, std::memory_order_relaxed);
  } else {
    errors_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace torch_mspti
