// A small streaming JSON writer for the plugin's health report and diagnostics.
//
// kineto writes metadata values into the trace verbatim, so what this writes must be valid JSON
// whatever bytes the strings hold: a file name on a non-UTF-8 file system, a kernel name from the
// library. Well-formed UTF-8 is kept; every byte that is not part of a well-formed sequence is
// written as \udcXX (XX = the byte), the surrogateescape convention Python uses for such file
// names, so json.loads + os.fsencode give the original bytes back.
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

  std::string out_;
  bool first_ = true;
};

}  // namespace torch_mspti
