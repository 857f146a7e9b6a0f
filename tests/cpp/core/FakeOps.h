// torch's side of a trace, as the plugin sees it at processTrace: op (and user-range) activities
// that kineto's getLinkedActivity resolves from their correlation ids (kineto.md 1.4). Tests add
// an op with its thread and interval, push its id through the session or the forwarder, and hand
// callback() to processTrace or OpTimeline.
// Thread-safety: add()/setEnd() lock (ops are added from launching threads); callback() reads
// without a lock and is used once every op is added.
#pragma once

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>

namespace torch_mspti::test {

inline uint32_t currentTid() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

inline int64_t realtimeNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class FakeOps {
 public:
  // A CPU op (or a user range) with torch correlation id `id` (0: the next free one) on thread
  // `tid`, from `start` to `end` ns. Returns its id.
  int32_t add(uint32_t tid, int64_t start, int64_t end, const std::string& name = "op", int32_t id = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (id == 0) id = next_++;
    auto op = std::make_unique<libkineto::GenericTraceActivity>(span_, libkineto::ActivityType::CPU_OP, name);
    op->startTime = start;
    op->endTime = end;
    op->resource = static_cast<int32_t>(tid);
    op->threadId = static_cast<int32_t>(tid);
    op->id = id;
    ops_[id] = std::move(op);
    return id;
  }
  void setEnd(int32_t id, int64_t end) {
    std::lock_guard<std::mutex> lock(mutex_);
    ops_.at(id)->endTime = end;
  }
  const libkineto::GenericTraceActivity* get(int32_t id) const {
    auto it = ops_.find(id);
    return it == ops_.end() ? nullptr : it->second.get();
  }
  libkineto::getLinkedActivityCallback callback() const {
    return [this](int32_t id) -> const libkineto::ITraceActivity* { return get(id); };
  }

 private:
  std::mutex mutex_;
  libkineto::TraceSpan span_{0, 0, "ops"};
  int32_t next_ = 1;
  std::unordered_map<int32_t, std::unique_ptr<libkineto::GenericTraceActivity>> ops_;
};

}  // namespace torch_mspti::test
