#include "CapRoom.h"

#include <iterator>

namespace torch_mspti {

bool CapRoom::refused(uint64_t id) const {
  if (id == 0) return false;  // rows without a correlation id are no launch's
  auto it = refused_.upper_bound(id);
  if (it == refused_.begin()) return false;
  return std::prev(it)->second >= id;
}

void CapRoom::refuseLaunch(uint64_t id) {
  if (id == 0 || refused(id)) return;
  auto next = refused_.upper_bound(id);
  // Joins the interval ending just below it and the one starting just above it.
  if (next != refused_.begin()) {
    auto prev = std::prev(next);
    if (prev->second + 1 == id) {
      prev->second = id;
      if (next != refused_.end() && next->first == id + 1) {
        prev->second = next->second;
        refused_.erase(next);
      }
      return;
    }
  }
  if (next != refused_.end() && next->first == id + 1) {
    const uint64_t last = next->second;
    refused_.erase(next);
    refused_.emplace(id, last);
    return;
  }
  refused_.emplace(id, id);
}

}  // namespace torch_mspti
