#include "CorrelationIds.h"

namespace torch_mspti {

int32_t CorrelationIds::next() {
  uint32_t cur = next_.load(std::memory_order_relaxed);
  for (;;) {
    uint32_t want = cur + 1 >= kEnd ? kFirst : cur + 1;
    if (next_.compare_exchange_weak(cur, want, std::memory_order_relaxed)) {
      if (want == kFirst) wraps_.fetch_add(1, std::memory_order_relaxed);
      return static_cast<int32_t>(cur);
    }
  }
}

}  // namespace torch_mspti
