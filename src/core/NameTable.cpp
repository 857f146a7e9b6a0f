#include "NameTable.h"

#include <cstring>

#include "Utf8.h"

namespace torch_mspti {

std::string safeName(const char* raw) {
  std::string key = raw ? std::string(raw, strnlen(raw, 4096)) : std::string();
  for (size_t i = 0; i < key.size();) {
    auto* p = reinterpret_cast<unsigned char*>(&key[i]);
    if (*p >= 0x80) {
      const size_t len = utf8SequenceLength(p, key.size() - i);
      if (len == 0) {
        *p = '?';  // not UTF-8: torch's strict decoding of names would fail
        ++i;
      } else {
        i += len;
      }
      continue;
    }
    if (*p == '"') *p = '\'';
    else if (*p == '\\') *p = '/';
    else if (*p < 0x20 || *p == 0x7F) *p = ' ';
    ++i;
  }
  return key.empty() ? std::string("unknown") : key;
}

const std::string* NameTable::intern(const char* s) {
  std::string key = safeName(s);
  std::lock_guard<std::mutex> lock(mutex_);
  return &*names_.insert(std::move(key)).first;
}

size_t NameTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return names_.size();
}

}  // namespace torch_mspti
