#include "Environment.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace torch_mspti::sim {

namespace {

// "2,3" -> {2, 3}. Parsing stops at the first entry that is not a plain non-negative number, the
// way CUDA_VISIBLE_DEVICES is read; ids after a bad entry are invisible.
std::vector<uint32_t> parseVisibleDevices(const char* text) {
  std::vector<uint32_t> ids;
  if (text == nullptr) {
    return ids;
  }
  std::string item;
  const std::string all(text);
  size_t pos = 0;
  while (pos <= all.size()) {
    const size_t comma = all.find(',', pos);
    item = all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!item.empty() && item.front() == ' ') {
      item.erase(item.begin());
    }
    while (!item.empty() && item.back() == ' ') {
      item.pop_back();
    }
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 9) {
      break;
    }
    ids.push_back(static_cast<uint32_t>(std::stoul(item)));
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  return ids;
}

// File name (no directory) of the shared object this code was loaded from, "" if unknown.
std::string ownFileName() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&ownFileName), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  const std::string path(info.dli_fname);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

void Environment::reload() {
  const char* preload = std::getenv("LD_PRELOAD");
  static const std::string own = ownFileName();
  const bool hasMspti = preload != nullptr && (std::strstr(preload, "libmspti.so") != nullptr ||
                                               (!own.empty() && std::strstr(preload, own.c_str()) != nullptr));
  std::vector<uint32_t> visible = parseVisibleDevices(std::getenv("ASCEND_RT_VISIBLE_DEVICES"));
  std::lock_guard<std::mutex> lock(mutex_);
  ldPreloadHasMspti_ = hasMspti;
  visibleDevices_ = std::move(visible);
}

bool Environment::ldPreloadHasMspti() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ldPreloadHasMspti_;
}

uint32_t Environment::physicalDevice(uint32_t logical) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return logical < visibleDevices_.size() ? visibleDevices_[logical] : logical;
}

}  // namespace torch_mspti::sim
