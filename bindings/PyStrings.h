// Conversions of C++ text to Python for the bindings: every std::string that reaches Python goes
// through pyText, which decodes UTF-8 with surrogateescape, so a file name that is not UTF-8
// becomes a str that os.fsencode turns back into the original bytes, and nothing raises.
#pragma once

#include <Python.h>
#include <nanobind/nanobind.h>

#include <string>
#include <string_view>
#include <vector>

namespace torch_mspti::bindings {

inline nanobind::str pyText(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "surrogateescape");
  if (!o) throw nanobind::python_error();
  return nanobind::steal<nanobind::str>(o);
}

// "" as None (optional text fields).
inline nanobind::object pyTextOrNone(const std::string& s) {
  return s.empty() ? nanobind::none() : nanobind::object(pyText(s));
}

inline nanobind::typed<nanobind::list, nanobind::str> pyTexts(const std::vector<std::string>& v) {
  nanobind::typed<nanobind::list, nanobind::str> out;
  for (const auto& s : v) out.append(pyText(s));
  return out;
}

}  // namespace torch_mspti::bindings
