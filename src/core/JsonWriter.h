// A minimal streaming JSON writer for the plugin's health report (trace metadata).
// kineto writes metadata values into the trace verbatim, so the value must be valid JSON.
// Not thread-safe; one writer per document.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace torch_mspti {

class JsonWriter {
 public:
  JsonWriter& beginObject(const char* key = nullptr) { return open(key, '{'); }
  JsonWriter& endObject() { return close('}'); }
  JsonWriter& beginArray(const char* key = nullptr) { return open(key, '['); }
  JsonWriter& endArray() { return close(']'); }

  JsonWriter& value(const char* key, const std::string& v) {
    prefix(key);
    quote(v);
    return *this;
  }
  JsonWriter& value(const char* key, const char* v) { return v ? value(key, std::string(v)) : null(key); }
  JsonWriter& value(const char* key, bool v) {
    prefix(key);
    out_ += v ? "true" : "false";
    return *this;
  }
  JsonWriter& value(const char* key, uint64_t v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter& value(const char* key, int64_t v) {
    prefix(key);
    out_ += std::to_string(v);
    return *this;
  }
  JsonWriter& value(const char* key, int v) { return value(key, static_cast<int64_t>(v)); }
  JsonWriter& value(const char* key, double v) {
    if (!std::isfinite(v)) return null(key);
    prefix(key);
    out_ += fmt::format("{}", v);
    return *this;
  }
  JsonWriter& null(const char* key) {
    prefix(key);
    out_ += "null";
    return *this;
  }
  const std::string& str() const { return out_; }

 private:
  JsonWriter& open(const char* key, char c) {
    prefix(key);
    out_ += c;
    first_ = true;
    return *this;
  }
  JsonWriter& close(char c) {
    out_ += c;
    first_ = false;
    return *this;
  }
  void prefix(const char* key) {
    if (!first_) out_ += ',';
    first_ = false;
    if (key) {
      quote(key);
      out_ += ':';
    }
  }
  void quote(const std::string& s) {
    out_ += '"';
    for (unsigned char c : s) {
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20) out_ += fmt::format("\\u{:04x}", c);
          else out_ += static_cast<char>(c);
      }
    }
    out_ += '"';
  }
  std::string out_;
  bool first_ = true;
};

}  // namespace torch_mspti
