// torch_mspti._C: configuration, registration and diagnostics of the MSPTI kineto plugin.
// Import torch before this module (libtorch_cpu must be loaded; see torch_mspti/__init__.py).
#include <memory>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "ExitGuard.h"
#include "PluginContext.h"
#include "PyStrings.h"
#include "Registration.h"

namespace nb = nanobind;

NB_MODULE(_C, m) {
  m.doc() = "torch-mspti native core: kineto PrivateUse1 profiler plugin fed by Ascend MSPTI.";
  m.attr("__torch_version__") = TORCH_MSPTI_TORCH_VERSION;
  m.attr("__version__") = TORCH_MSPTI_VERSION;

  m.def(
      "register_profiler",
      [] {
        return torch_mspti::bindings::pyText(
            torch_mspti::registerProfiler(torch_mspti::PluginContext::process()).message);
      },
      "Register the profiler factory with torch's PrivateUse1 registry, as the `profiler` setting\n"
      "(TORCH_MSPTI_PROFILER: auto, mspti, off) says. Idempotent: later calls return the first\n"
      "outcome. Returns one line saying which profiler serves PrivateUse1 traces. Thread-safe.");

  m.def("note_process_exit", &torch_mspti::noteProcessExit,
        "Tell the plugin the interpreter is exiting: sessions then make no MSPTI call (registered with\n"
        "atexit by the package).");

  m.def(
      "set_device_properties_provider",
      [](nb::callable provider) {
        // One reference to the Python object, shared by the copies of the function that sessions
        // take on kineto's threads (which may not hold the GIL): copying or dropping a copy
        // touches only the shared count. The last copy (the provider replaced and no session
        // left with it) releases the reference under the GIL; at interpreter exit it is left.
        std::shared_ptr<PyObject> held(provider.inc_ref().ptr(), [](PyObject* o) {
          if (!Py_IsInitialized() || torch_mspti::processExiting()) return;
          nb::gil_scoped_acquire gil;
          Py_DECREF(o);
        });
        torch_mspti::PluginContext::process().setDevicePropertiesProvider(
            [held](const std::vector<int32_t>& devices) -> std::string {
              if (!Py_IsInitialized() || torch_mspti::processExiting()) return "";
              nb::gil_scoped_acquire gil;
              try {
                return nb::cast<std::string>(nb::handle(held.get())(devices));
              } catch (...) {
                return "";
              }
            });
      },
      nb::arg("provider"),
      "Set the function that describes the NPUs of a trace for its deviceProperties: called with a\n"
      "list of logical device indices, it returns the JSON objects (comma-joined text) for them.\n"
      "Exceptions it raises are swallowed (the trace then has no NPU device properties). The previous\n"
      "provider is released once no session holds it. Thread-safe.");

  torch_mspti::bindings::bindConfig(m);
  torch_mspti::bindings::bindDiagnostics(m);
}
