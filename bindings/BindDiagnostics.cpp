// Diagnostics: the library search report, plugin registration, last session and totals, as plain
// dicts (the typed Python view lives in torch_mspti/diagnostics.py).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "Bindings.h"
#include "ForkGuard.h"
#include "MsptiActivityApi.h"
#include "MsptiActivityProfiler.h"
#include "MsptiBufferPool.h"
#include "MsptiLibrary.h"
#include "NameTable.h"
#include "Registration.h"
#include "SessionStats.h"

namespace nb = nanobind;

namespace torch_mspti::bindings {
namespace {

nb::object strOrNone(const std::string& s) { return s.empty() ? nb::none() : nb::object(nb::str(s.c_str())); }

nb::dict library(bool load) {
  MsptiLibrary& lib = MsptiLibrary::instance();
  if (load) lib.ensureLoaded();
  const LibraryReport r = lib.report();
  nb::dict d, symbols, caps;
  d["attempted"] = r.attempted;
  d["available"] = r.available;
  d["path"] = strOrNone(r.path);
  d["found_by"] = strOrNone(r.foundBy);
  d["reason"] = strOrNone(r.reason);
  d["fix"] = strOrNone(r.fix);
  d["version"] = strOrNone(r.version);
  nb::list cands;
  for (const auto& c : r.candidates) {
    nb::dict cd;
    cd["path"] = c.path;
    cd["source"] = c.source;
    cd["outcome"] = c.outcome;
    cd["reason"] = c.reason;
    cands.append(cd);
  }
  d["candidates"] = cands;
  symbols["resolved"] = r.resolved;
  symbols["missing_required"] = r.missingRequired;
  symbols["missing_optional"] = r.missingOptional;
  d["symbols"] = symbols;
  // Capabilities: from the symbols, refined by the latest enable outcomes (None = never tried).
  const auto results = StatsRegistry::instance().enableResults();
  auto observed = [&](msptiActivityKind k) -> nb::object {
    const int v = results[k];
    if (v == -100) return nb::none();
    return nb::bool_(v == MSPTI_SUCCESS);
  };
  auto has = [&](const char* sym) {
    for (const auto& s : r.resolved)
      if (s == sym) return true;
    return false;
  };
  caps["kernel"] = r.available ? observed(MSPTI_ACTIVITY_KIND_KERNEL) : nb::object(nb::bool_(false));
  caps["external_correlation"] =
      nb::bool_(has("msptiActivityPushExternalCorrelationId") && has("msptiActivityPopExternalCorrelationId"));
  nb::object runtimeApi = observed(MSPTI_ACTIVITY_KIND_RUNTIME_API), api = observed(MSPTI_ACTIVITY_KIND_API);
  caps["api_records"] =
      (runtimeApi.is_none() && api.is_none())
          ? nb::none()
          : nb::object(nb::bool_(nb::cast<bool>(nb::bool_(runtimeApi)) || nb::cast<bool>(nb::bool_(api))));
  caps["communication"] = observed(MSPTI_ACTIVITY_KIND_COMMUNICATION);
  caps["memcpy_memset"] = observed(MSPTI_ACTIVITY_KIND_MEMCPY);
  caps["is_enabled"] = nb::bool_(has("msptiActivityIsEnabled"));
  d["capabilities"] = caps;
  return d;
}

}  // namespace

void bindDiagnostics(nb::module_& m) {
  m.def("library_report", &library, nb::arg("load") = true,
        "The libmspti search report as a dict. load=True first searches and loads the library if\n"
        "that has not happened (never raises; a failure is described in 'reason' and 'fix').");

  m.def(
      "plugin_report",
      [] {
        const RegistrationStatus s = registrationStatus();
        PluginStatus& p = PluginStatus::instance();
        nb::dict d;
        d["registered"] = s.registered;
        d["forwarded_to_kineto"] = s.forwardedToKineto;
        d["factory_called"] = p.factoryCalled.load();
        d["mode"] = s.mode.empty() ? nb::none() : nb::object(nb::str(s.mode.c_str()));
        d["other_profiler"] = s.otherProfiler;
        d["message"] = s.message;
        d["privateuse1_backend"] = privateUse1BackendName();
        d["backend_named"] = privateUse1BackendName() != "privateuseone";
        d["configure_calls"] = p.configureCalls.load();
        d["device_sessions"] = p.deviceSessions.load();
        d["last_configure_ns"] = p.lastConfigureNs.load();
        d["sessions"] = StatsRegistry::instance().sessions();
        // torch forwards its registered factory to kineto on the first PrivateUse1 trace and
        // kineto calls it at once; so after that, our factory having run tells whether ours is
        // the PrivateUse1 profiler kineto uses (None: no PrivateUse1 trace yet).
        if (!s.forwardedToKineto && !p.factoryCalled.load()) d["last_trace_used_ours"] = nb::none();
        else d["last_trace_used_ours"] = p.factoryCalled.load() && p.configureCalls.load() > 0;
        d["interned_names"] = NameTable::instance().size();
        // Leak checks: buffers MSPTI holds (0 after every drained session) and buffers kept
        // for reuse (bounded).
        d["buffers_outstanding"] = MsptiBufferPool::instance().outstanding();
        d["buffers_pooled"] = MsptiBufferPool::instance().pooled();
        d["forked_child"] = forkedFromMsptiParent();
        return d;
      },
      "Registration and usage facts of the plugin as a dict.");

  m.def("session_report_json", &sessionReportJson,
        "JSON text: {\"last_session\": {...} | null, \"totals\": {...}}: the counters of the last\n"
        "profiling session (state, errors, records by kind, kernels, links, drops, buffers, drain)\n"
        "and their totals over every finished session. Times in ms.");
}

}  // namespace torch_mspti::bindings
