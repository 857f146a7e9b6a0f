// The interface reports are written through, so that one serialisation of each report serves
// every consumer: JsonWriter (the trace's health report, diagnostics JSON) and the Python
// bindings' dict writer (typed diagnostics objects' to_dict()).
// Keys are nullptr inside arrays. Implementations are not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

namespace torch_mspti {

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  virtual ReportWriter& beginObject(const char* key = nullptr) = 0;
  virtual ReportWriter& endObject() = 0;
  virtual ReportWriter& beginArray(const char* key = nullptr) = 0;
  virtual ReportWriter& endArray() = 0;
  virtual ReportWriter& value(const char* key, std::string_view v) = 0;
  virtual ReportWriter& value(const char* key, bool v) = 0;
  virtual ReportWriter& value(const char* key, uint64_t v) = 0;
  virtual ReportWriter& value(const char* key, int64_t v) = 0;
  virtual ReportWriter& value(const char* key, double v) = 0;
  virtual ReportWriter& null(const char* key) = 0;

  // Conveniences over the virtual ones.
  ReportWriter& value(const char* key, const char* v) { return v ? value(key, std::string_view(v)) : null(key); }
  ReportWriter& value(const char* key, int v) { return value(key, static_cast<int64_t>(v)); }
  ReportWriter& value(const char* key, uint32_t v) { return value(key, static_cast<uint64_t>(v)); }
};

}  // namespace torch_mspti
