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

#include <cstddef>
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
// pointer names one string, so the lock is taken once per distinct pointer.
class NameCache {
 public:
  const std::string* lookup(const char* p) {
    for (const auto& [key, value] : entries_)
      if (key == p) return value;
    const std::string* v = NameTable::instance().intern(p);
    if (entries_.size() < kMaxEntries) entries_.emplace_back(p, v);
    return v;
  }
  void clear() { entries_.clear(); }

 private:
  static constexpr size_t kMaxEntries = 64;
  std::vector<std::pair<const char*, const std::string*>> entries_;
};

}  // namespace torch_mspti
