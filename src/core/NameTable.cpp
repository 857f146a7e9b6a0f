#include "NameTable.h"

#include <cstring>

#include "Utf8.h"

namespace torch_mspti {

std::string safeName(const char* raw) {
  std::string key;
  if (raw) appendKinetoSafeText(key, std::string_view(raw, strnlen(raw, 4096)));
  return key.empty() ? std::string("unknown") : key;
}

const std::string* NameTable::intern(const char* s) {
  std::string key = safeName(s);
  std::lock_guard<std::mutex> lock(mutex_);
  return &*names_.insert(std::move(key)).first;
}

const std::string* NameTable::internRaw(const char* s) {
  if (!s) return nullptr;
  std::string key(s, strnlen(s, 4096));
  std::lock_guard<std::mutex> lock(mutex_);
  return &*names_.insert(std::move(key)).first;
}

size_t NameTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return names_.size();
}

}  // namespace torch_mspti
