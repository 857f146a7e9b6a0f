#include "NpuActivity.h"

#include <charconv>

#include <fmt/format.h>

namespace torch_mspti {

void NpuActivity::key(std::string_view key) {
  if (!args_.empty()) args_ += ", ";
  args_ += '"';
  args_ += key;
  args_ += "\": ";
}

void NpuActivity::arg(std::string_view k, int64_t value) {
  key(k);
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  args_.append(buf, r.ptr);
}

void NpuActivity::arg(std::string_view k, uint64_t value) {
  key(k);
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  args_.append(buf, r.ptr);
}

void NpuActivity::arg(std::string_view k, double value) {
  key(k);
  args_ += fmt::format("{}", value);  // as addMetadata writes a double
}

void NpuActivity::quotedArg(std::string_view k, std::string_view value) {
  key(k);
  args_ += '"';
  args_ += value;
  args_ += '"';
}

const std::string NpuActivity::getMetadataValue(const std::string& wanted) const {
  // Entries are `"key": value`, joined by ", "; keys and quoted values hold no '"'.
  const std::string_view s = args_;
  size_t pos = 0;
  while (pos < s.size() && s[pos] == '"') {
    const size_t keyEnd = s.find('"', pos + 1);
    if (keyEnd == std::string_view::npos || s.compare(keyEnd, 3, "\": ") != 0) break;
    const std::string_view k = s.substr(pos + 1, keyEnd - pos - 1);
    size_t v = keyEnd + 3, vEnd;
    std::string_view value;
    if (v < s.size() && s[v] == '"') {
      vEnd = s.find('"', v + 1);
      if (vEnd == std::string_view::npos) break;
      value = s.substr(v + 1, vEnd - v - 1);
      ++vEnd;
    } else {
      vEnd = s.find(", \"", v);
      if (vEnd == std::string_view::npos) vEnd = s.size();
      value = s.substr(v, vEnd - v);
    }
    if (k == wanted) return std::string(value);
    pos = vEnd + 2;  // past ", "
  }
  return "";
}

}  // namespace torch_mspti
