// torch_mspti._C: configuration, registration and diagnostics of the MSPTI kineto plugin.
// Import torch before this module (libtorch_cpu must be loaded; see torch_mspti/__init__.py).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "Bindings.h"
#include "Registration.h"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "torch-mspti native core: kineto PrivateUse1 profiler plugin fed by Ascend MSPTI.";
  m.attr("__torch_version__") = TORCH_MSPTI_TORCH_VERSION;
  m.attr("__version__") = TORCH_MSPTI_VERSION;

  m.def(
      "register_profiler",
      [](const std::string& mode) {
        torch_mspti::RegistrationMode md;
        if (mode == "auto") md = torch_mspti::RegistrationMode::kAuto;
        else if (mode == "mspti") md = torch_mspti::RegistrationMode::kMspti;
        else if (mode == "off") md = torch_mspti::RegistrationMode::kOff;
        else
          throw nb::value_error(
              ("TORCH_MSPTI_PROFILER: '" + mode + "' is not allowed; use auto, mspti or off").c_str());
        return torch_mspti::registerProfiler(md).message;
      },
      nb::arg("mode"),
      "Register the profiler factory with torch's PrivateUse1 registry.\n\n"
      "mode: 'auto' (only if no other PrivateUse1 profiler is registered), 'mspti' (always) or 'off'.\n"
      "Idempotent: later calls return the first outcome. Returns a one-line message saying which\n"
      "profiler serves PrivateUse1 traces. Raises ValueError for an unknown mode. Thread-safe.");

  m.def("_register_foreign_profiler_for_testing", &torch_mspti::registerForeignProfilerForTesting,
        "Tests only: register a do-nothing PrivateUse1 profiler factory (stands in for torch_npu's).");
  m.def("_reset_registration_for_testing", &torch_mspti::resetRegistrationForTesting,
        "Tests only: forget the registration outcome so register_profiler() runs again.");

  torch_mspti::bindings::bindConfig(m);
  torch_mspti::bindings::bindDiagnostics(m);
}
