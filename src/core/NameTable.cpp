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

const std::string* NameTable::intern(const char* s) {
  std::string key = s ? std::string(s, strnlen(s, 4096)) : std::string("unknown");
  std::lock_guard<std::mutex> lock(gMutex);
  return &*gNames->insert(std::move(key)).first;
}

size_t NameTable::size() const {
  std::lock_guard<std::mutex> lock(gMutex);
  return gNames->size();
}

}  // namespace torch_mspti
