// Settings: typed get/set with validation errors that name the field, the value and the range.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "Config.h"

namespace nb = nanobind;

namespace torch_mspti::bindings {
namespace {

const SettingInfo* find(const std::vector<SettingInfo>& all, const std::string& name) {
  for (const auto& s : all)
    if (s.name == name) return &s;
  return nullptr;
}

[[noreturn]] void unknown(const std::string& name) {
  throw nb::attribute_error(("unknown torch-mspti setting '" + name + "'; see torch_mspti.config.settings()").c_str());
}

}  // namespace

void bindConfig(nb::module_& m) {
  m.def(
      "config_settings",
      [] {
        nb::list out;
        for (const auto& s : Config::instance().settings()) {
          nb::dict d;
          d["name"] = s.name;
          d["type"] = s.type;
          d["unit"] = s.unit;
          d["range"] = s.range;
          d["description"] = s.description;
          out.append(d);
        }
        return out;
      },
      "List of dicts {name, type, unit, range, description}, one per setting.");

  m.def(
      "config_get",
      [](const std::string& name) -> nb::object {
        Config& c = Config::instance();
        const auto all = c.settings();
        const SettingInfo* s = find(all, name);
        if (!s) unknown(name);
        const std::string v = *c.get(name);
        if (s->type == "int") return nb::int_(std::stoll(v));
        if (s->type == "bool") return nb::bool_(v == "true");
        return nb::str(v.c_str());
      },
      nb::arg("name"), "Current value of a setting (int, bool or str). Raises AttributeError for an unknown name.");

  m.def(
      "config_set",
      [](const std::string& name, nb::handle value) {
        Config& c = Config::instance();
        const auto all = c.settings();
        const SettingInfo* s = find(all, name);
        if (!s) unknown(name);
        std::string err;
        const std::string shown = nb::cast<std::string>(nb::repr(value));
        if (s->type == "int") {
          if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value))
            throw nb::type_error((name + ": expected an int (" + s->unit + "), got " + shown).c_str());
          int64_t v;
          if (!nb::try_cast(value, v))
            throw nb::value_error((name + ": " + shown + " is out of range; allowed " + s->range).c_str());
          err = c.setInt(name, v);
        } else if (s->type == "bool") {
          if (!nb::isinstance<nb::bool_>(value))
            throw nb::type_error((name + ": expected a bool, got " + shown).c_str());
          err = c.setBool(name, nb::cast<bool>(value));
        } else {
          if (!nb::isinstance<nb::str>(value)) throw nb::type_error((name + ": expected a str, got " + shown).c_str());
          err = c.setString(name, nb::cast<std::string>(value));
        }
        if (!err.empty()) {
          if (name == "library_path") throw std::runtime_error(err);
          throw nb::value_error(err.c_str());
        }
      },
      nb::arg("name"), nb::arg("value").none(),
      "Set a setting; applies from the next profiling session. Raises TypeError for a value of the\n"
      "wrong type, ValueError for a value out of range (the message names field, value and range),\n"
      "RuntimeError when changing library_path after a library was loaded. Thread-safe.");

  m.def(
      "config_environment_errors", [] { return Config::instance().environmentErrors(); },
      "Problems found in TORCH_MSPTI_* environment variables (each was ignored, default kept).");
  m.def(
      "config_reset", [] { Config::instance().reset(); },
      "Restore defaults and re-read TORCH_MSPTI_* environment variables.");
}

}  // namespace torch_mspti::bindings
