// Settings: typed get/set with validation errors that name the setting, the value and the range.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "Config.h"
#include "PluginContext.h"
#include "PyStrings.h"

namespace nb = nanobind;

namespace torch_mspti::bindings {
namespace {

const SettingInfo& find(const std::string& name) {
  static const std::vector<SettingInfo> all = Config::settings();
  for (const auto& s : all)
    if (s.name == name) return s;
  throw nb::attribute_error(("unknown torch-mspti setting '" + name + "'; see torch_mspti.config.settings()").c_str());
}

nb::object typed(const SettingInfo& s, const std::string& text) {
  if (s.type == "int") return nb::int_(std::stoll(text));
  if (s.type == "bool") return nb::bool_(text == "true");
  return pyText(text);
}

}  // namespace

void bindConfig(nb::module_& m) {
  nb::class_<SettingInfo>(m, "SettingInfo", "One setting: name, environment variable, type, unit, range, default.")
      .def_ro("name", &SettingInfo::name)
      .def_ro("env", &SettingInfo::env, "The environment variable that sets it.")
      .def_ro("type", &SettingInfo::type, "int, bool, choice or path")
      .def_ro("unit", &SettingInfo::unit)
      .def_ro("range", &SettingInfo::range, "Allowed values, as text.")
      .def_ro("default", &SettingInfo::defaultText, "The default, as text.")
      .def_ro("description", &SettingInfo::description)
      .def_ro("import_only", &SettingInfo::importOnly, "Read once when torch_mspti is imported.");

  m.def("config_settings", &Config::settings, "Every setting, in the order of the settings table.");

  m.def(
      "config_get",
      [](const std::string& name) -> nb::object {
        const SettingInfo& s = find(name);
        return typed(s, *PluginContext::process().config.get(name));
      },
      nb::arg("name"), "Current value of a setting (int, bool or str). Raises AttributeError for an unknown name.");

  m.def(
      "config_default",
      [](const std::string& name) -> nb::object {
        const SettingInfo& s = find(name);
        return typed(s, s.defaultText);
      },
      nb::arg("name"), "Default value of a setting. Raises AttributeError for an unknown name.");

  m.def(
      "config_set",
      [](const std::string& name, nb::handle value) {
        Config& c = PluginContext::process().config;
        const SettingInfo& s = find(name);
        std::string err;
        const std::string shown = nb::cast<std::string>(nb::repr(value));
        if (s.type == "int") {
          if (!nb::isinstance<nb::int_>(value) || nb::isinstance<nb::bool_>(value))
            throw nb::type_error((name + ": expected an int (" + s.unit + "), got " + shown).c_str());
          int64_t v;
          if (!nb::try_cast(value, v))
            throw nb::value_error((name + ": " + shown + " is out of range; allowed " + s.range).c_str());
          err = c.setInt(name, v);
        } else if (s.type == "bool") {
          if (!nb::isinstance<nb::bool_>(value))
            throw nb::type_error((name + ": expected a bool, got " + shown).c_str());
          err = c.setBool(name, nb::cast<bool>(value));
        } else {
          if (!nb::isinstance<nb::str>(value)) throw nb::type_error((name + ": expected a str, got " + shown).c_str());
          err = c.setText(name, nb::cast<std::string>(value));
        }
        if (!err.empty()) {
          if (name == "library_path" || s.importOnly) throw std::runtime_error(err);
          throw nb::value_error(err.c_str());
        }
      },
      nb::arg("name"), nb::arg("value").none(),
      "Set a setting; applies from the next profiling session. Raises TypeError for a value of the\n"
      "wrong type, ValueError for a value out of range (the message names setting, value and range),\n"
      "RuntimeError when changing library_path after a library was loaded or an import-only setting.\n"
      "Thread-safe.");

  m.def(
      "config_environment_errors", [] { return pyTexts(PluginContext::process().config.environmentErrors()); },
      "Problems found in TORCH_MSPTI_* environment variables (each was ignored, default kept).");
  m.def(
      "config_reset", [] { PluginContext::process().config.reset(); },
      "Restore defaults and re-read TORCH_MSPTI_* environment variables (a loaded library's path stays).");
}

}  // namespace torch_mspti::bindings
