// torch_mspti._C: configuration, registration and diagnostics of the MSPTI kineto plugin.
// Import torch before this module (libtorch_cpu must be loaded; see torch_mspti/__init__.py).
#include <memory>

#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "ExitGuard.h"
#include "PluginContext.h"
#include "PyStrings.h"
#include "Registration.h"

namespace nb = nanobind;

namespace {

// One reference to a Python callable, shared by the copies of a provider function that sessions
// take on kineto's threads (which may not hold the GIL): copying or dropping a copy touches only
// the shared count. The last copy (the provider replaced and no session left with it) releases
// the reference under the GIL; at interpreter exit it is left.
std::shared_ptr<PyObject> holdCallable(nb::callable& provider) {
  return std::shared_ptr<PyObject>(provider.inc_ref().ptr(), [](PyObject* o) {
    if (!Py_IsInitialized() || torch_mspti::processExiting()) return;
    nb::gil_scoped_acquire gil;
    Py_DECREF(o);
  });
}

}  // namespace

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

  m.def(
      "note_process_exit",
      [] {
        // A stopped session's Unsubscribe may still be running, or its thread not yet started: it
        // ends before MSPTI's singletons are destroyed (SubscriptionRelease.h). Waited for before
        // the process is marked as exiting, so a release thread that starts late still makes its
        // call (MSPTI is alive until static destruction) rather than skipping it.
        {
          nb::gil_scoped_release unlocked;
          torch_mspti::PluginContext::process().release.waitIdle();
        }
        torch_mspti::noteProcessExit();
      },
      "Tell the plugin the interpreter is exiting: sessions then make no MSPTI call, and a stopped\n"
      "session's Unsubscribe still in flight is waited for (registered with atexit by the package).");

  m.def(
      "set_device_properties_provider",
      [](nb::callable provider) {
        std::shared_ptr<PyObject> held = holdCallable(provider);
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

  m.def(
      "set_communicator_provider",
      [](nb::callable provider) {
        std::shared_ptr<PyObject> held = holdCallable(provider);
        torch_mspti::PluginContext::process().setCommunicatorsProvider(
            [held]() -> std::vector<torch_mspti::CommunicatorInfo> {
              std::vector<torch_mspti::CommunicatorInfo> out;
              if (!Py_IsInitialized() || torch_mspti::processExiting()) return out;
              nb::gil_scoped_acquire gil;
              try {
                for (nb::handle item : nb::handle(held.get())()) {
                  auto [comm, pg, desc, ranks, rank, seq] = nb::cast<
                      std::tuple<std::string, std::string, std::string, std::vector<int64_t>, int64_t, int64_t>>(item);
                  out.push_back({std::move(comm), std::move(pg), std::move(desc), std::move(ranks), rank, seq});
                }
              } catch (...) {
                out.clear();  // a bad answer is no answer: no row is joined, the report counts them
              }
              return out;
            });
      },
      nb::arg("provider"),
      "Set the function that lists this process's HCCL communicators, called by each profiling\n"
      "session at start and at stop (on the thread that starts or stops it, with the GIL taken):\n"
      "it returns an iterable of (comm_name: str, pg_name: str, pg_desc: str, ranks: list[int] of\n"
      "global ranks in group order, rank: int (this process's rank in the group, -1 if none),\n"
      "seq: int (calls the group has issued, -1 if unknown)). Collective rows are joined with their\n"
      "process group through it. Exceptions it raises, or an answer of another shape, count as no\n"
      "answer. The previous provider is released once no session holds it. Thread-safe.");

  torch_mspti::bindings::bindConfig(m);
  torch_mspti::bindings::bindDiagnostics(m);
}
