#include "ExternalCorrelation.h"

namespace torch_mspti::sim {

ExternalCorrelation::Stacks& ExternalCorrelation::threadStacks() {
  static thread_local Stacks stacks;
  return stacks;
}

ExternalCorrelation::Tops ExternalCorrelation::topsOf(const Stacks& stacks) {
  Tops tops;
  for (const auto& [kind, stack] : stacks) {
    if (!stack.empty()) {
      tops.emplace_back(kind, stack.back());
    }
  }
  return tops;
}

msptiResult ExternalCorrelation::push(uint32_t kind, uint64_t id, bool perThread) {
  if (perThread) {
    threadStacks()[kind].push_back(id);
    return MSPTI_SUCCESS;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  global_[kind].push_back(id);
  return MSPTI_SUCCESS;
}

msptiResult ExternalCorrelation::pop(uint32_t kind, uint64_t* lastId, bool perThread) {
  // The NULL check comes first, so a NULL pop never touches the stack (mspti.md 2.3).
  if (lastId == nullptr) {
    return MSPTI_ERROR_INVALID_PARAMETER;
  }
  auto popFrom = [&](Stacks& stacks) {
    auto it = stacks.find(kind);
    if (it == stacks.end() || it->second.empty()) {
      return MSPTI_ERROR_QUEUE_EMPTY;
    }
    *lastId = it->second.back();
    it->second.pop_back();
    return MSPTI_SUCCESS;
  };
  if (perThread) {
    return popFrom(threadStacks());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return popFrom(global_);
}

ExternalCorrelation::Tops ExternalCorrelation::tops(bool perThread) const {
  if (perThread) {
    return topsOf(threadStacks());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return topsOf(global_);
}

uint64_t ExternalCorrelation::globalDepth(uint32_t kind) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = global_.find(kind);
  return it == global_.end() ? 0 : it->second.size();
}

}  // namespace torch_mspti::sim
