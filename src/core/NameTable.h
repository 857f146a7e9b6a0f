// Interned copies of the strings records point at (kernel names, types, API names, communicator
// names), owned by one session's record store.
//
// MSPTI's name/type pointers refer to its own caches (mspti.md 4): each distinct string is copied
// once and records share the copy. The copy is made safe for kineto's Chrome JSON writer, which
// writes names and quoted metadata without escaping them, and for torch's strict UTF-8 decoding
// of names: '"' becomes '\'', '\\' becomes '/', control characters become spaces, bytes that are
// not well-formed UTF-8 become '?', and at most 4096 bytes are read. A NULL string is "unknown"
// where a name is expected.
// Thread-safety: intern() takes a lock (call it once per distinct pointer per buffer; see
// NameCache); the returned pointers stay valid for the table's life.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace torch_mspti {

class NameTable {
 public:
  // A stable pointer to the safe copy of `s` ("unknown" for NULL or empty). Never fails other than
  // by std::bad_alloc.
  const std::string* intern(const char* s);
  // A stable pointer to `s` as written (at most 4096 bytes; nullptr for NULL): text the plugin
  // reads itself (an mstx message, CollectiveJoin.h) and never hands to kineto.
  const std::string* internRaw(const char* s);
  size_t size() const;

  // The fork guard holds the lock across fork() (through the collecting RecordStore).
  void lockForFork() { mutex_.lock(); }
  void unlockAfterFork() { mutex_.unlock(); }

 private:
  mutable std::mutex mutex_;
  std::unordered_set<std::string> names_;  // node-based: addresses survive rehashing
};

// The JSON- and UTF-8-safe form of `raw` (see NameTable).
std::string safeName(const char* raw);

// A walker-local cache from MSPTI's string pointers to interned copies: within one buffer a
// pointer names one string, so the table's lock is taken once per distinct pointer. Open
// addressing (linear probing, grown at half full): one probe per record for hundreds of names.
class NameCache {
 public:
  const std::string* lookup(NameTable& table, const char* p) {
    if (slots_.empty()) slots_.resize(kInitialSlots);
    const size_t mask = slots_.size() - 1;
    for (size_t i = slot(p, mask);; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (!s.value) break;  // empty: not cached yet
      if (s.key == p) return s.value;
    }
    const std::string* v = table.intern(p);
    if ((used_ + 1) * 2 > slots_.size()) grow();
    insert(p, v);
    return v;
  }
  // Forget every pointer (MSPTI's pointers are known to be stable only within one buffer).
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
