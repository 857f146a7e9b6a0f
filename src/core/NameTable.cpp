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

// Length of the well-formed UTF-8 sequence starting at p (n bytes available), or 0: no overlong
// forms, no UTF-16 surrogates (U+D800..DFFF), nothing above U+10FFFF (Unicode 15, table 3-7).
// Python's strict decoder, which torch uses on names, rejects exactly those.
size_t utf8Length(const unsigned char* p, size_t n) {
  const unsigned char b0 = p[0];
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2;
  else if (b0 == 0xE0) len = 3, lo = 0xA0;
  else if (b0 >= 0xE1 && b0 <= 0xEC) len = 3;
  else if (b0 == 0xED) len = 3, hi = 0x9F;
  else if (b0 >= 0xEE && b0 <= 0xEF) len = 3;
  else if (b0 == 0xF0) len = 4, lo = 0x90;
  else if (b0 >= 0xF1 && b0 <= 0xF3) len = 4;
  else if (b0 == 0xF4) len = 4, hi = 0x8F;
  else return 0;
  if (len > n || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; ++i)
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
