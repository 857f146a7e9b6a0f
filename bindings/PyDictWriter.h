// A ReportWriter that builds Python objects (dict, list, int, float, bool, None, str), so reports
// reach Python through the same serialisation as the JSON (SessionStats.h).
#pragma once

#include <nanobind/nanobind.h>

#include <vector>

#include "PyStrings.h"
#include "ReportWriter.h"

namespace torch_mspti::bindings {

class PyDictWriter final : public ReportWriter {
 public:
  using ReportWriter::value;
  ReportWriter& beginObject(const char* key = nullptr) override { return open(key, nanobind::dict()); }
  ReportWriter& endObject() override { return close(); }
  ReportWriter& beginArray(const char* key = nullptr) override { return open(key, nanobind::list()); }
  ReportWriter& endArray() override { return close(); }
  ReportWriter& value(const char* key, std::string_view v) override { return put(key, pyText(v)); }
  ReportWriter& value(const char* key, bool v) override { return put(key, nanobind::bool_(v)); }
  ReportWriter& value(const char* key, uint64_t v) override { return put(key, nanobind::int_(v)); }
  ReportWriter& value(const char* key, int64_t v) override { return put(key, nanobind::int_(v)); }
  ReportWriter& value(const char* key, double v) override { return put(key, nanobind::float_(v)); }
  ReportWriter& null(const char* key) override { return put(key, nanobind::none()); }

  // The outermost object or array written.
  nanobind::object result() const { return root_; }

 private:
  ReportWriter& open(const char* key, nanobind::object container) {
    put(key, container);
    stack_.push_back(container);
    return *this;
  }
  ReportWriter& close() {
    if (!stack_.empty()) stack_.pop_back();
    return *this;
  }
  ReportWriter& put(const char* key, nanobind::object v) {
    if (stack_.empty()) {
      root_ = v;
    } else if (nanobind::isinstance<nanobind::dict>(stack_.back())) {
      nanobind::dict d = nanobind::borrow<nanobind::dict>(stack_.back());
      d[pyText(key ? key : "")] = v;
    } else {
      nanobind::borrow<nanobind::list>(stack_.back()).append(v);
    }
    return *this;
  }
  std::vector<nanobind::object> stack_;
  nanobind::object root_ = nanobind::none();
};

}  // namespace torch_mspti::bindings
