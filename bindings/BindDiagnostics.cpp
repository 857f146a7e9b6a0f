// Diagnostics as typed objects: the library search report, the plugin's registration and usage,
// and session reports (the Python view is torch_mspti/diagnostics.py). Every to_dict() comes
// from the same serialisation as the JSON reports (SessionStats.h), written into Python objects.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <deque>
#include <string>

#include "ActivityKinds.h"
#include "Bindings.h"
#include "ForkGuard.h"
#include "LinkStates.h"
#include "PeerBackends.h"
#include "PluginContext.h"
#include "PyDictWriter.h"
#include "PyStrings.h"
#include "Registration.h"
#include "SessionFindings.h"
#include "SessionStats.h"
#include "TorchCompat.h"

namespace nb = nanobind;

namespace torch_mspti::bindings {
namespace {

// The Python object `fn` writes through a PyDictWriter (the serialisation of SessionStats.h).
template <typename Fn>
nb::typed<nb::dict, nb::str, nb::any> written(Fn&& fn) {
  PyDictWriter w;
  fn(w);
  return nb::borrow<nb::dict>(w.result());
}

// The plugin's facts as one value (built by plugin_report()).
struct PluginReport {
  RegistrationStatus registration;
  PeerBackend peer;
  std::string backend;
  uint64_t configureCalls = 0, deviceSessions = 0, sessions = 0, outstanding = 0, pooled = 0;
  int64_t lastConfigureNs = 0;
  int lastTraceOurs = -1;
  bool factoryCalled = false, forkedChild = false, lastTraceUnnamedBackend = false;
  SubscriptionRelease::Stats release;
};

nb::object peerObject(const PeerBackend& p) {
  if (!p.present) return nb::none();
  nb::dict d;
  d["kind"] = "torch_npu";
  d["name"] = "torch_npu's built-in MSPTI backend";
  d["class"] = "torch_npu::profiler::MsptiActivityProfilerPoc";
  d["registered_with"] = "kineto (static initialiser of libtorch_npu.so)";
  d["description"] = pyText(p.description);
  d["version"] = pyTextOrNone(p.version);
  d["library"] = pyText(p.library);
  return d;
}

nb::object lastTraceObject(int v) { return v < 0 ? nb::none() : nb::object(nb::bool_(v == 1)); }

nb::typed<nb::dict, nb::str, nb::any> pluginDict(const PluginReport& r) {
  nb::dict d;
  d["registered"] = r.registration.registered;
  d["forwarded_to_kineto"] = r.factoryCalled;  // kineto instantiated our profiler
  d["factory_called"] = r.factoryCalled;
  d["mode"] = profilerModeName(r.registration.mode);
  d["other_factory"] = r.registration.otherFactory;
  d["other_profiler"] = peerObject(r.peer);
  d["message"] = pyText(servingMessage(r.registration, r.peer, r.lastTraceOurs));
  d["privateuse1_backend"] = pyText(r.backend);
  d["backend_named"] = r.backend != "privateuseone";
  d["configure_calls"] = r.configureCalls;
  d["device_sessions"] = r.deviceSessions;
  d["last_configure_ns"] = r.lastConfigureNs;
  d["sessions"] = r.sessions;
  // Not registered: no trace can have used ours.
  d["last_trace_used_ours"] =
      r.registration.registered ? lastTraceObject(r.lastTraceOurs) : nb::object(nb::bool_(false));
  d["buffers_outstanding"] = r.outstanding;
  d["buffers_pooled"] = r.pooled;
  d["forked_child"] = r.forkedChild;
  nb::dict release;
  release["releases"] = r.release.releases;
  release["in_flight"] = r.release.inFlight;
  release["last_unsubscribe_ms"] = r.release.lastUnsubscribeMs;
  release["last_result"] = r.release.lastResult;
  release["last_error"] = pyText(r.release.lastError);
  release["skipped_at_exit"] = r.release.skippedAtExit;
  d["release"] = release;
  // The latest trace had no device session because the backend was unnamed: why, and the fix.
  d["no_device_session_reason"] =
      r.lastTraceUnnamedBackend ? nb::object(nb::str(kUnnamedBackendReason)) : nb::object(nb::none());
  return d;
}

// Capabilities: from the symbols, refined by the latest Enable outcome of each kind (None =
// never tried: observed when a session enables it).
nb::dict capabilities(const LibraryReport& r, const std::vector<EnableOutcome>& enables, nb::dict& notes) {
  auto has = [&](const char* sym) {
    for (const auto& s : r.resolved)
      if (s == sym) return true;
    return false;
  };
  auto observed = [&](msptiActivityKind k, const char* key) -> nb::object {
    const EnableOutcome& e = enables[static_cast<size_t>(k)];
    if (!e.note.empty()) notes[key] = pyText(e.note);
    if (e.result == EnableOutcome::kNeverTried) return nb::none();
    return nb::bool_(e.result == MSPTI_SUCCESS && e.note.empty());
  };
  nb::dict caps;
  caps["kernel"] = r.available ? observed(MSPTI_ACTIVITY_KIND_KERNEL, "kernel") : nb::object(nb::bool_(false));
  caps["external_correlation"] =
      nb::bool_(has("msptiActivityPushExternalCorrelationId") && has("msptiActivityPopExternalCorrelationId"));
  nb::object runtimeApi = observed(MSPTI_ACTIVITY_KIND_RUNTIME_API, "api_records");
  nb::object api = observed(MSPTI_ACTIVITY_KIND_API, "api_records");
  caps["api_records"] =
      (runtimeApi.is_none() && api.is_none())
          ? nb::none()
          : nb::object(nb::bool_(nb::cast<bool>(nb::bool_(runtimeApi)) || nb::cast<bool>(nb::bool_(api))));
  caps["communication"] = observed(MSPTI_ACTIVITY_KIND_COMMUNICATION, "communication");
  caps["memcpy_memset"] = observed(MSPTI_ACTIVITY_KIND_MEMCPY, "memcpy_memset");
  caps["memory"] = observed(MSPTI_ACTIVITY_KIND_MEMORY, "memory");
  caps["is_enabled"] = nb::bool_(has("msptiActivityIsEnabled"));
  return caps;
}

nb::typed<nb::dict, nb::str, nb::any> libraryDict(const LibraryReport& r) {
  nb::dict d = written([&](ReportWriter& w) {  // the members the health report has too
    w.beginObject();
    writeLibrary(w, r);
    w.endObject();
  });
  nb::dict symbols, notes;
  nb::list cands;
  for (const auto& c : r.candidates) {
    nb::dict cd;
    cd["path"] = pyText(c.path);
    cd["source"] = pyText(c.source);
    cd["outcome"] = pyText(c.outcome);
    cd["reason"] = pyText(c.reason);
    cands.append(cd);
  }
  d["candidates"] = cands;
  symbols["resolved"] = pyTexts(r.resolved);
  symbols["missing_required"] = pyTexts(r.missingRequired);
  symbols["missing_optional"] = pyTexts(r.missingOptional);
  d["symbols"] = symbols;
  d["capabilities"] = capabilities(r, PluginContext::process().stats.enableOutcomes(), notes);
  d["capability_notes"] = notes;
  return d;
}

// Python property names of the counters: "<group>_<key>" (e.g. "links_verified").
const std::deque<std::string>& counterNames() {
  static const std::deque<std::string> names = [] {
    std::deque<std::string> n;
    for (int i = 0; i < kCounterCount; ++i) n.push_back(std::string(kCounterInfo[i].group) + "_" + kCounterInfo[i].key);
    return n;
  }();
  return names;
}

}  // namespace

void bindDiagnostics(nb::module_& m) {
  nb::class_<SessionCounters> counters(
      m, "Counters",
      "Counters of a session (or totals): what was recorded, dropped, repaired and how\n"
      "device rows were linked. Attributes are <group>_<key> (e.g. links_verified);\n"
      "to_dict() groups them as the health report does. Counts, except\n"
      "repaired_max_shift_ns (ns).");
  for (int i = 0; i < kCounterCount; ++i) {
    const auto field = kCounterInfo[i].field;
    counters.def_prop_ro(
        counterNames()[static_cast<size_t>(i)].c_str(), [field](const SessionCounters& c) { return c.*field; },
        kCounterInfo[i].description);
  }
  counters.def_prop_ro("records", &SessionCounters::records, "Records of every kind.")
      .def_prop_ro("linked_rows", &SessionCounters::linkedRows, "Device rows linked to an op.")
      .def_prop_ro(
          "records_by_kind",
          [](const SessionCounters& c) {
            nb::typed<nb::dict, nb::str, int> d;
            for (int k = 1; k < MSPTI_ACTIVITY_KIND_COUNT; ++k)
              if (c.recordsByKind[k]) d[kindName(static_cast<uint32_t>(k))] = c.recordsByKind[k];
            return d;
          },
          "Records per MSPTI activity kind name.")
      .def(
          "to_dict",
          [](const SessionCounters& c) {
            return written([&](ReportWriter& w) {
              w.beginObject();
              writeCounters(w, c, true);
              w.endObject();
            });
          },
          "The counters as plain data (JSON-serialisable), grouped.");

  nb::class_<DrainStats>(m, "DrainStats", "How stop() got the last records out of MSPTI (times in ms).")
      .def_ro("order", &DrainStats::order)
      .def_ro("exit_reason", &DrainStats::exitReason)
      .def_ro("evidence", &DrainStats::evidence)
      .def_ro("pulled_by", &DrainStats::pulledBy)
      .def_ro("flushes", &DrainStats::flushes)
      .def_ro("ms", &DrainStats::ms)
      .def_ro("synchronize_ms", &DrainStats::synchronizeMs)
      .def_ro("records_during_drain", &DrainStats::recordsDuringDrain)
      .def_ro("pending_launches", &DrainStats::pendingLaunches)
      .def_ro("unanswered_after_stop", &DrainStats::unansweredAfterStop)
      .def_ro("late_records", &DrainStats::lateRecords);

  nb::class_<SessionReport>(m, "SessionReport", "One profiling session's report.")
      .def_prop_ro(
          "state", [](const SessionReport& r) { return sessionStateName(r.state); },
          "configured, started, stopped, processed or failed")
      .def_prop_ro("errors", [](const SessionReport& r) { return pyTexts(r.errors); })
      .def_prop_ro(
          "warnings", [](const SessionReport& r) { return pyTexts(r.warnings); },
          "Names of the findings the session warned about, each once (torch_mspti.findings()).")
      .def_prop_ro(
          "findings",
          [](const SessionReport& r) {
            nb::list out;
            for (const auto& [name, message] : r.findings) {
              nb::dict d;
              d["name"] = pyText(name);
              d["message"] = pyText(message);
              out.append(d);
            }
            return out;
          },
          "The findings the session gave, in the order given: dicts with name and message (the\n"
          "warning's full text, naming cause and fix).")
      .def_ro("enabled_kinds", &SessionReport::enabledKinds)
      .def_prop_ro(
          "not_collected", [](const SessionReport& r) { return pyTexts(r.notCollected); },
          "Device kinds requested but not collected, each with why and what the trace lacks.")
      .def_ro("host_clock", &SessionReport::hostClock, "Clock of MSPTI's API records (HostClock).")
      .def_ro("counters", &SessionReport::counters)
      .def_ro("drain", &SessionReport::drain)
      .def_ro("stop_ms", &SessionReport::stopMs, "Wall time of the session's stop(), ms; -1 before it ran.")
      .def_ro("process_trace_ms", &SessionReport::processTraceMs,
              "Wall time of the session's processTrace (activities built and handed to kineto), ms; -1\n"
              "before it ran.")
      .def(
          "to_dict",
          [](const SessionReport& r) {
            return written([&](ReportWriter& w) {
              w.beginObject();
              writeReport(w, r, true);
              w.endObject();
            });
          },
          "The report as plain data (JSON-serialisable).");

  m.def(
      "library_report",
      [](bool load) {
        PluginContext& c = PluginContext::process();
        if (load) c.loadLibrary(c.config.snapshot());
        return libraryDict(c.library.report());
      },
      nb::arg("load") = true,
      "The libmspti search report as plain data. load=True first searches and loads the library if\n"
      "that has not happened (never raises; a failure is described in 'reason' and 'fix'). Paths that\n"
      "are not UTF-8 come back surrogate-escaped (os.fsencode restores the bytes).");

  m.def(
      "plugin_report",
      [] {
        PluginContext& c = PluginContext::process();
        PluginReport r;
        r.registration = registrationStatus();
        r.peer = detectPeerBackend();
        r.backend = privateUse1BackendName();
        r.factoryCalled = c.status.factoryCalled.load();
        r.configureCalls = c.status.configureCalls.load();
        r.deviceSessions = c.status.deviceSessions.load();
        r.lastConfigureNs = c.status.lastConfigureNs.load();
        r.lastTraceOurs = c.status.lastTraceOurs.load();
        r.lastTraceUnnamedBackend = c.status.lastTraceUnnamedBackend.load();
        r.sessions = c.stats.sessions();
        r.outstanding = c.pool.outstanding();
        r.pooled = c.pool.pooled();
        r.forkedChild = forkedFromMsptiParent();
        r.release = c.release.stats();
        return pluginDict(r);
      },
      "Registration and usage facts of the plugin as plain data: registered, mode, other_profiler\n"
      "(torch_npu's built-in MSPTI backend when loaded: kind, description, version, library),\n"
      "last_trace_used_ours (True only when our session collected the last device trace; None before\n"
      "one), MSPTI buffers outstanding and pooled, forked_child, release (the stopped sessions'\n"
      "msptiUnsubscribe, made off stop(): releases, in_flight, last_unsubscribe_ms, last_result,\n"
      "last_error, skipped_at_exit).");

  m.def(
      "torch_build",
      [] {
        nb::dict d;
        d["built_for"] = compat::kBuildTorchVersion;
        d["privateuse1_profiler_registry"] = compat::kHasPrivateUse1ProfilerRegistry;
        d["session_metadata"] = compat::kSessionMetadata ? "getMetadata" : "addMetadata";
        d["flow_id_bits"] = compat::kFlowIdBits;
        d["counter_events"] = compat::kCounterEvents;
        return d;
      },
      "What this build was compiled against (src/core/TorchCompat.h): built_for (torch version),\n"
      "privateuse1_profiler_registry (torch has PrivateUse1ProfilerRegistry), session_metadata\n"
      "(how the health report reaches the trace: kineto's getMetadata, or addMetadata on older\n"
      "kineto), flow_id_bits (27 or 32: the width of kineto's flow ids) and counter_events (kineto\n"
      "writes counter tracks, so the NPU memory counter is in the trace). Constant data.");
  m.def(
      "unnamed_backend_reason", [] { return std::string(kUnnamedBackendReason); },
      "Why a profile that asks for ProfilerActivity.PrivateUse1 gets no NPU lane while torch's\n"
      "PrivateUse1 backend is unnamed, and the fix (a constant sentence).");
  m.def(
      "link_states",
      [] {
        nb::list states;
        for (const LinkStateInfo& s : kLinkStates) {
          nb::dict d;
          d["name"] = s.name;
          d["linked"] = s.linked;
          d["meaning"] = s.meaning;
          states.append(d);
        }
        return states;
      },
      "The link states of device rows (LinkStates.h), in order: name (a row's \"link\" argument and\n"
      "the key of its links counter), linked (credited to an op) and meaning.");

  m.def(
      "findings",
      [] {
        nb::list rows;
        for (const FindingInfo& f : findingTable()) {
          nb::dict d;
          d["name"] = f.name;
          d["group"] = f.group;
          d["fix"] = f.fix;
          rows.append(d);
        }
        return rows;
      },
      "What a session can tell its user (SessionFindings.h), highest priority first: name (the key in\n"
      "a session's warnings and the health report's findings), group (findings of one non-empty\n"
      "group exclude each other) and fix.");

  m.def(
      "last_session", [] { return PluginContext::process().stats.last(); },
      "The last session's report, or None before the first device session.");
  m.def(
      "totals", [] { return PluginContext::process().stats.totals(); },
      "Counters summed over every finished session of the process.");
  m.def(
      "session_report_json", [] { return sessionReportJson(PluginContext::process().stats); },
      "JSON text {\"last_session\": {...} | null, \"totals\": {...}, \"sessions\": n}.");
}

}  // namespace torch_mspti::bindings
