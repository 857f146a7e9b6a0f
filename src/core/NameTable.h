// Process-wide interning of kernel names and types.
//
// MSPTI's name/type pointers refer to its own caches; we copy each distinct string once and keep
// it for the life of the process, so records and activities can share one copy.
// The copy is made safe for kineto's Chrome JSON writer, which writes names and quoted metadata
// without escaping them: '"' becomes '\'', '\\' becomes '/', and control characters become
// spaces (and at most 4096 bytes are read). Every other byte is kept as MSPTI gave it.
// Thread-safety: intern() takes a lock; call it once per distinct pointer per buffer (see
// NameCache), not once per record.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_mspti {

class NameTable {
 public:
  static NameTable& instance();
  // Returns a stable pointer to a copy of `s` ("unknown" for NULL). Never fails.
  const std::string* intern(const char* s);
  size_t size() const;
  // ForkGuard: hold the table's lock across fork() (prepare), release it in parent and child.
  void lockForFork();
  void unlockAfterFork();
};

// A walker-local cache from MSPTI's string pointers to interned copies: within one buffer a
// pointer names one string, so the lock is taken once per distinct pointer. An open-addressing
// table (linear probing, grown at half full), so a model with hundreds of distinct kernel names
// costs one hash probe per record rather than a scan or a trip through the global table.
class NameCache {
 public:
  const std::string* lookup(const char* p) {
    if (slots_.empty()) slots_.resize(kInitialSlots);
    const size_t mask = slots_.size() - 1;
    for (size_t i = slot(p, mask);; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.value) break;  // empty: not cached yet
      if (s.key == p) return s.value;
    }
    const std::string* v = NameTable::instance().intern(p);
    if ((used_ + 1) * 2 > slots_.size()) grow();
    insert(p, v);
    return v;
  }
  void clear() {
    if (used_ == 0) return;
    if (slots_.size() > kInitialSlots * 16) slots_.assign(kInitialSlots, Slot{});  // shrink after a name storm
    else std::fill(slots_.begin(), slots_.end(), Slot{});
    used_ = 0;
  }

 private:
  struct Slot {
    const char* key = nullptr;
    const std::string* value = nullptr;  // nullptr = empty (intern never returns nullptr)
  };
  static constexpr size_t kInitialSlots = 64;  // power of two
  static size_t slot(const char* p, size_t mask) {
    return static_cast<size_t>((reinterpret_cast<uintptr_t>(p) * 0x9E3779B97F4A7C15ull) >> 32) & mask;
  }
  void insert(const char* p, const std::string* v) {
    const size_t mask = slots_.size() - 1;
    size_t i = slot(p, mask);
    while (slots_[i].value) i = (i + 1) & mask;
    slots_[i] = {p, v};
    ++used_;
  }
  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    used_ = 0;
    for (const Slot& s : old)
      if (s.value) insert(s.key, s.value);
  }
  std::vector<Slot> slots_;
  size_t used_ = 0;
};

}  // namespace torch_mspti
