#include "NameTable.h"

#include <cstring>
#include <mutex>
#include <unordered_set>

namespace torch_mspti {
namespace {
std::mutex gMutex;
// Node-based: element addresses stay valid across rehashing.
std::unordered_set<std::string>* gNames = new std::unordered_set<std::string>();
}  // namespace

NameTable& NameTable::instance() {
  static NameTable table;
  return table;
}

namespace {

// Length of the valid UTF-8 sequence starting at p (n bytes available), or 0 when invalid.
size_t utf8Length(const unsigned char* p, size_t n) {
  size_t len = p[0] < 0xC2 ? 0 : p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : p[0] < 0xF5 ? 4 : 0;
  if (len == 0 || len > n) return 0;
  for (size_t i = 1; i < len; ++i)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return len;
}

}  // namespace

const std::string* NameTable::intern(const char* s) {
  std::string key = s ? std::string(s, strnlen(s, 4096)) : std::string("unknown");
  for (size_t i = 0; i < key.size();) {
    auto* p = reinterpret_cast<unsigned char*>(&key[i]);
    if (*p >= 0x80) {
      size_t len = utf8Length(p, key.size() - i);
      if (len == 0) {
        *p = '?';  // not UTF-8: JSON readers would reject the whole trace
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
  if (key.empty()) key = "unknown";
  std::lock_guard<std::mutex> lock(gMutex);
  return &*gNames->insert(std::move(key)).first;
}

size_t NameTable::size() const {
  std::lock_guard<std::mutex> lock(gMutex);
  return gNames->size();
}

void NameTable::lockForFork() { gMutex.lock(); }
void NameTable::unlockAfterFork() { gMutex.unlock(); }

}  // namespace torch_mspti
