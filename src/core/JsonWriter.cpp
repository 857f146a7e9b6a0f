#include "JsonWriter.h"

#include <fmt/format.h>

namespace torch_mspti {

JsonWriter& JsonWriter::value(const char* key, std::string_view v) {
  prefix(key);
  quote(v);
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, bool v) {
  prefix(key);
  out_ += v ? "true" : "false";
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, uint64_t v) {
  prefix(key);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, int64_t v) {
  prefix(key);
  out_ += std::to_string(v);
  return *this;
}

JsonWriter& JsonWriter::value(const char* key, double v) {
  if (!std::isfinite(v)) return null(key);
  prefix(key);
  out_ += fmt::format("{}", v);
  return *this;
}

JsonWriter& JsonWriter::null(const char* key) {
  prefix(key);
  out_ += "null";
  return *this;
}

JsonWriter& JsonWriter::open(const char* key, char c) {
  prefix(key);
  out_ += c;
  first_ = true;
  return *this;
}

JsonWriter& JsonWriter::close(char c) {
  out_ += c;
  first_ = false;
  return *this;
}

void JsonWriter::prefix(const char* key) {
  if (!first_) out_ += ',';
  first_ = false;
  if (key) {
    quote(key);
    out_ += ':';
  }
}

void JsonWriter::quote(std::string_view s) {
  out_ += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    if (c >= 0x80) {
      const size_t len = utf8SequenceLength(p + i, s.size() - i);
      if (len == 0) {
        out_ += fmt::format("\\udc{:02x}", c);  // surrogateescape: the byte survives a round trip
        ++i;
      } else {
        out_.append(s.data() + i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7F) out_ += fmt::format("\\u{:04x}", c);
        else out_ += static_cast<char>(c);
    }
    ++i;
  }
  out_ += '"';
}

}  // namespace torch_mspti
