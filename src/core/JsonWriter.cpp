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
  if (target_ == Target::kKinetoMetadata) {
    appendKinetoSafeText(out_, s);
    out_ += '"';
    return;
  }
  forEachUtf8Byte(out_, s, [this](unsigned char c, bool wellFormed) {
    if (!wellFormed) {
      out_ += fmt::format("\\udc{:02x}", c);  // surrogateescape: the byte survives a round trip
      return;
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
  });
  out_ += '"';
}

}  // namespace torch_mspti
