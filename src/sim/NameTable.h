// Interned strings for record `name`/`type` pointers. MSPTI points these fields into hash caches
// it never erases (mspti.md 4), so the simulator's table also lives, and grows, for the whole
// process: a pointer handed out once stays valid until exit.
#pragma once

#include <mutex>
#include <string>
#include <unordered_set>

namespace torch_mspti::sim {

class NameTable {
 public:
  NameTable() = default;
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;

  // Stable pointer to a copy of `text` ("" for NULL).
  const char* intern(const char* text) {
    std::lock_guard<std::mutex> lock(mutex_);
    // unordered_set nodes never move, not even on rehash.
    return names_.emplace(text == nullptr ? "" : text).first->c_str();
  }

 private:
  std::mutex mutex_;
  std::unordered_set<std::string> names_;
};

}  // namespace torch_mspti::sim
