// A small streaming JSON writer for the plugin's health report and diagnostics.
//
// What this writes must be valid JSON whatever bytes the strings hold: a file name on a non-UTF-8
// file system, a kernel name from the library. Two targets:
//  * kJson (diagnostics): well-formed UTF-8 is kept, '"', '\\' and control characters are
//    escaped, and every byte that is not part of a well-formed sequence is written as \udcXX
//    (XX = the byte), the surrogateescape convention Python uses for such file names, so
//    json.loads + os.fsencode give the original bytes back;
//  * kKinetoMetadata (the trace's health report, a getMetadata() value): kineto writes metadata
//    values into the trace as they are except that it turns every backslash into '/' and drops
//    '\n' (output_json.cpp sanitizeStrForJSON, kineto ce13b132), which would turn any escape into
//    text and a '\"' into the end of the string. So no escape is written: strings get the form
//    kineto's names get (appendKinetoSafeText: '"' -> '\'', '\\' -> '/', control characters -> ' ',
//    bytes that are not well-formed UTF-8 -> '?').
// Not thread-safe; one writer per document.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ReportWriter.h"
#include "Utf8.h"

namespace torch_mspti {

class JsonWriter final : public ReportWriter {
 public:
  enum class Target { kJson, kKinetoMetadata };
  explicit JsonWriter(Target target = Target::kJson) : target_(target) {}
  using ReportWriter::value;
  JsonWriter& beginObject(const char* key = nullptr) override { return open(key, '{'); }
  JsonWriter& endObject() override { return close('}'); }
  JsonWriter& beginArray(const char* key = nullptr) override { return open(key, '['); }
  JsonWriter& endArray() override { return close(']'); }
  JsonWriter& value(const char* key, std::string_view v) override;
  JsonWriter& value(const char* key, bool v) override;
  JsonWriter& value(const char* key, uint64_t v) override;
  JsonWriter& value(const char* key, int64_t v) override;
  JsonWriter& value(const char* key, double v) override;
  JsonWriter& null(const char* key) override;
  JsonWriter& value(const char* key, const std::string& v) { return value(key, std::string_view(v)); }
  const std::string& str() const { return out_; }

 private:
  JsonWriter& open(const char* key, char c);
  JsonWriter& close(char c);
  void prefix(const char* key);
  void quote(std::string_view s);

  const Target target_;
  std::string out_;
  bool first_ = true;
};

}  // namespace torch_mspti
