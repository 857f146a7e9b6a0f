"""Faults the plugin must survive, each injected on the simulator (README "Fault handling").

Every case profiles in a child process (simrun) and checks that nothing crashed or was raised
into Python, that the exported trace is valid JSON that passes the checker, and that whatever was
lost is counted in diagnostics. Simulator fault options are documented in
src/sim/include/mspti_sim.h (``throw_in``, ``reorder_external``, ``duplicate_kernel_records``,
``bad_timing_every``, ``unknown_kind_every``, ``never_deliver``).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from op_links import assert_links_right
from sim_support import result, run_checks, simulator_library_path
from simrun import cpu_ops, kernels, launches

from torch_mspti_cli.check import check_trace

# Four ops launching two kernels each, one op launching three, one launch outside any op.
WORKLOAD = """
with record_function("phase"):
    for i in range(4):
        launch(f"F_{i}", {"name": f"FVec_{i}", "type": "KERNEL_AIVEC", "stream": 2})
    launch({"name": "FTriple", "count": 3, "stream": 3})
launch_bare({"name": "FBare", "stream": 4})
sync()
torch.ones(2) + 1
"""
LAUNCHED = 4 * 2 + 3 + 1
FAST = {"drain_timeout_ms": 200}


def _session(run) -> dict:
    session = run.diagnostics["last_session"]
    assert session is not None
    return session


def _assert_valid(run) -> None:
    """No crash, and a structurally valid trace whose only finding is the one its own health report
    explains: a failed session's trace fails the check as session-failed. Whether kernels arrived
    is each test's own assertion (some faults leave none), so an empty device lane is allowed."""
    assert run.returncode == 0, run.stderr[-3000:]
    failed = _session(run)["state"] == "failed"
    report = check_trace(run.trace, allow_empty=True)
    assert set(report.counts_by_rule) == ({"session-failed"} if failed else set()), report.to_dict()


def _expected(run) -> Counter:
    return Counter(k["name"] for k in run.launched for _ in range(k["count"]))


def _assert_links_right(run) -> None:
    """The n-th simrun::launch op (time order) is linked to exactly the kernels it launched."""
    ops = sorted((op for op in cpu_ops(run.trace) if op["name"] == "simrun::launch"), key=lambda o: o["ts"])
    assert len(ops) == 5
    expected = [{f"F_{i}", f"FVec_{i}"} for i in range(4)] + [{"FTriple"}]
    for op, names in zip(ops, expected, strict=True):
        linked = {k["name"] for k in kernels(run.trace) if k["args"].get("External id") == op["args"]["External id"]}
        assert linked == names, (op, linked)


# ---------------------------------------------------------------------------------------------
# Another tool holds MSPTI's only subscriber


def test_subscriber_held_by_another_tool_gives_cpu_trace_one_warning_and_a_reason(tmp_path):
    workload = """
if profile_index == 0:
    import ctypes
    handle = ctypes.c_void_p()
    out["other_tool_subscribe"] = sim.msptiSubscribe(ctypes.byref(handle), None, None)
else:
    launch("HeldK")
    sync()
"""
    run = simrun.run(workload, tmp_path, profiles=2, activities=[["CPU"], ["CPU", "PrivateUse1"]])
    assert run.extra["other_tool_subscribe"] == 0
    _assert_valid(run)
    assert not kernels(run.trace) and not launches(run.trace)
    assert any(op["name"] == "simrun::launch" for op in cpu_ops(run.trace))
    assert len(run.doctor_warnings()) == 1, run.doctor_warnings()
    session = _session(run)
    assert session["state"] == "failed", session
    assert any("another tool" in e and "MULTIPLE_SUBSCRIBERS" in e for e in session["errors"]), session["errors"]


# ---------------------------------------------------------------------------------------------
# Any MSPTI entry point throws a C++ exception

THROW_BITS = {
    "Subscribe": 0x01,
    "Enable": 0x02,
    "FlushAll": 0x04,
    "Push": 0x08,
    "Pop": 0x10,
    "Disable": 0x20,
    "Unsubscribe": 0x40,
    "RegisterCallbacks": 0x80,
}
THROW_ERROR = {
    "Subscribe": "msptiSubscribe",
    "Enable": "msptiActivityEnable",
    "FlushAll": "msptiActivityFlushAll",
    "Disable": "msptiActivityDisable",
    "Unsubscribe": "msptiUnsubscribe",
    "RegisterCallbacks": "msptiActivityRegisterCallbacks",
}


@pytest.mark.parametrize("entry", list(THROW_BITS))
def test_entry_point_throwing_a_cpp_exception_is_contained_and_recorded(entry, tmp_path):
    # Unsubscribe runs after stop() on the release thread (SubscriptionRelease.h): its failure is
    # told to the next session (MSPTI may still hold the subscriber) and in diagnostics.
    profiles = 2 if entry == "Unsubscribe" else 1
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"throw_in": THROW_BITS[entry]}, config=FAST, profiles=profiles)
    _assert_valid(run)  # no crash, no exception into Python, trace valid
    assert "Traceback" not in run.stderr
    session = _session(run)
    if entry == "Unsubscribe":
        assert "threw a C++ exception" in run.diagnostics["plugin"]["release"]["last_error"], run.diagnostics
        assert any("previous session's release" in e for e in session["errors"]), session["errors"]
    if entry in ("Push", "Pop"):
        # the hot path swallows the exception and counts the failed call
        assert session["correlation"]["errors"] > 0, session
    else:
        hits = [e for e in session["errors"] if THROW_ERROR[entry] in e and "threw a C++ exception" in e]
        assert hits, session["errors"]
    if entry in ("Subscribe", "RegisterCallbacks", "Enable"):
        assert not kernels(run.trace)
        assert len(run.doctor_warnings()) == 1, run.doctor_warnings()


# ---------------------------------------------------------------------------------------------
# Buffer pool exhausted; completions with a NULL buffer


@pytest.fixture(scope="module")
def exhausted(tmp_path_factory):
    # The pool lends one buffer. The flood reaches the reader while the session runs and nothing
    # flushes (the profile ends only when the simulator has written every record), and each full
    # buffer's completion worker starts 50 ms late (completion_delay_ns): the reader's next request
    # always finds the one buffer still out, so it is declined. Without the delay the outcome
    # depended on the scheduler: a completion worker that preempts the reader returns the buffer in
    # time (seen on loaded CI machines), and with MSPTI's own queue-then-request order that is a
    # real outcome, not one to build a test on.
    workload = """
launch({"name": "Flood", "count": 3000, "dur_ns": 1000})
sync()
import time
deadline = time.monotonic() + 30
while sim_stats()["records_pending"] and time.monotonic() < deadline:
    time.sleep(0.005)
out["pending_at_stop"] = sim_stats()["records_pending"]
"""
    return simrun.run(
        workload,
        tmp_path_factory.mktemp("exhausted"),
        delay_ns=20_000_000,
        sim_options={"completion_delay_ns": 50_000_000},
        config={"buffer_pool_cap": 1, "buffer_size": 64 << 10, "drain_timeout_ms": 300},
    )


def test_exhausted_buffer_pool_declines_counts_and_warns_once(exhausted):
    run = exhausted
    _assert_valid(run)
    assert run.extra["pending_at_stop"] == 0, run.extra
    session = _session(run)
    assert session["buffers"]["declined"] > 0, session["buffers"]
    assert run.sim_stats_after["records_dropped"] > 0, run.sim_stats_after
    got = len(kernels(run.trace))
    assert 0 < got < 3000, got  # the loss is real and visible
    warnings = run.doctor_warnings()
    assert len(warnings) == 1 and "declined" in warnings[0], warnings


def test_null_completion_buffers_are_counted(exhausted):
    # after a declined request MSPTI completes the empty slot as (NULL, 0, 0) (mspti.md 5.1)
    session = _session(exhausted)
    assert session["buffers"]["null_completions"] >= 1, session["buffers"]


# ---------------------------------------------------------------------------------------------
# Completions on many threads at once


def test_completions_on_many_threads_at_once_lose_nothing(tmp_path):
    # 64 KiB buffers: ~9 full buffers, each completed on its own simulator worker thread
    workload = """
launch({"name": "Burst", "count": 8000, "dur_ns": 1000})
sync()
"""
    run = simrun.run(workload, tmp_path, config={"buffer_size": 64 << 10, "buffer_pool_cap": 4096})
    _assert_valid(run)
    session = _session(run)
    assert session["buffers"]["completed"] >= 8, session["buffers"]
    assert session["buffers"]["declined"] == 0
    assert len(kernels(run.trace)) == 8000
    assert session["drain"]["exit_reason"] == "balanced", session["drain"]


# ---------------------------------------------------------------------------------------------
# Record order and content faults


@pytest.mark.parametrize("mode", [1, 2], ids=["after-kernel", "later-buffer"])
def test_external_correlation_after_its_kernel_or_in_a_later_buffer_still_links_right(mode, tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"reorder_external": mode})
    _assert_valid(run)
    assert Counter(k["name"] for k in kernels(run.trace)) == _expected(run)
    session = _session(run)
    assert session["linked_rows"] == LAUNCHED - 1, session
    _assert_links_right(run)
    if mode == 2:
        assert session["buffers"]["completed"] >= 3, session["buffers"]


def test_duplicate_kernel_records_are_deduplicated_and_counted(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"duplicate_kernel_records": 1})
    _assert_valid(run)
    assert Counter(k["name"] for k in kernels(run.trace)) == _expected(run)
    session = _session(run)
    assert session["dropped"]["duplicates"] == LAUNCHED, session
    assert session["records_by_kind"]["KERNEL"] == 2 * LAUNCHED


CAP_LAUNCHES = 1500
CAPPED = f"""
for i in range({CAP_LAUNCHES}):
    launch({{"name": f"C_{{i}}", "stream": 2}})
sync()
"""


@pytest.mark.parametrize("buffer_size", [64 << 10, 8 << 20])
def test_a_session_over_its_cap_keeps_whole_launches(buffer_size, tmp_path):
    # Small buffers make host records (API, external correlation) complete before the kernels'
    # buffers: a cap filled in arrival order would keep calls whose kernels it then has no room for.
    # One large buffer holds calls and kernels together: kernels kept first would leave no room for
    # their calls.
    cap = CAP_LAUNCHES  # each launch is 3 records (API, external correlation, KERNEL)
    run = simrun.run(CAPPED, tmp_path, config={"buffer_size": buffer_size, "max_session_records": cap})
    assert run.returncode == 0, run.stderr[-3000:]
    session = _session(run)
    kept = kernels(run.trace)
    # At 3 records a launch, whole launches fill the cap to a third; at least a quarter of it is kept.
    assert len(kept) >= cap // 4, (len(kept), session["dropped"])
    # every record that reached the session beyond the cap is counted (under load a dropped launch's
    # kernel may come after the drain, which does not wait for launches it dropped)
    received = sum(session["records_by_kind"].values())
    assert received >= 2 * CAP_LAUNCHES and session["dropped"]["over_cap"] >= received - cap, session["dropped"]
    assert "over-cap" in session["warnings"], session["warnings"]
    # the drops per kind add up to the total, and the health report and the warning name the kinds
    by_kind = {kind: n["over_cap"] for kind, n in session["dropped_by_kind"].items() if "over_cap" in n}
    assert sum(by_kind.values()) == session["dropped"]["over_cap"], (by_kind, session["dropped"])
    kernels_lost = session["records_by_kind"]["KERNEL"] - session["rows"]["kernels"]
    assert by_kind.get("KERNEL", 0) == kernels_lost, (by_kind, session["records_by_kind"], session["rows"])
    message = next(f["message"] for f in session["findings"] if f["name"] == "over-cap")
    assert by_kind and all(f"{kind} {n}" in message for kind, n in by_kind.items()), (message, by_kind)
    # the README counts the kernels lost over the cap as records_by_kind.KERNEL - rows.kernels: that
    # holds when rows.kernels is the number of kernels the trace really has
    assert session["rows"]["kernels"] == len(kept), (session["rows"], len(kept))
    assert session["records_by_kind"]["KERNEL"] > len(kept), session["records_by_kind"]
    ops = sorted((op for op in cpu_ops(run.trace) if op["name"] == "simrun::launch"), key=lambda o: o["ts"])
    assert len(ops) == CAP_LAUNCHES
    for k in kept:  # each kept kernel is linked to the op instance that launched it, with its arrow
        assert k["args"].get("External id") == ops[int(k["name"][2:])]["args"]["External id"], k
    correlations = Counter(k["args"]["correlation"] for k in kept)
    assert correlations == Counter(e["args"]["correlation"] for e in launches(run.trace)), "launch events"
    assert max(correlations.values()) == 1


def test_zero_or_inverted_timing_is_dropped_and_counted(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"bad_timing_every": 3})
    _assert_valid(run)
    session = _session(run)
    bad = LAUNCHED // 3
    assert session["dropped"]["invalid_timing"] == bad, session
    assert len(kernels(run.trace)) == LAUNCHED - bad
    for k in kernels(run.trace):
        assert k["dur"] > 0, k


def test_zero_length_record_is_a_real_task_kept_as_a_zero_length_row(tmp_path):
    # start = end != 0: a task shorter than MSPTI's 1 ns resolution, not missing timing (0, 0)
    workload = """
launch({"name": "Before", "stream": 3}, {"name": "Instant", "stream": 3, "dur_ns": 0}, {"name": "After", "stream": 3})
sync()
"""
    run = simrun.run(workload, tmp_path)
    _assert_valid(run)  # check accepts the zero-length row: the health report accounts for it
    session = _session(run)
    assert [k["name"] for k in sorted(kernels(run.trace), key=lambda k: k["ts"])] == ["Before", "Instant", "After"]
    (instant,) = [k for k in simrun.exact_slices(run.trace_paths[0], ("kernel",)) if k["name"] == "Instant"]
    assert instant["end_ns"] == instant["start_ns"] > 0, instant
    assert session["repaired"]["zero_duration"] == 1 and session["dropped"]["invalid_timing"] == 0, session
    assert [k["duration_us"] for k in run.profiles[0]["kernels"] if k["name"] == "Instant"] == [0.0]
    assert run.trace["torch_mspti"]["repaired"]["zero_duration"] == 1


def test_unknown_activity_kind_abandons_the_rest_of_its_buffer_and_counts_it(tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"unknown_kind_every": 5}, config=FAST)
    _assert_valid(run)
    session = _session(run)
    assert session["buffers"]["abandoned"] >= 1, session["buffers"]
    assert session["buffers"]["abandoned_bytes"] >= 56, session["buffers"]
    # the first four kernels were walked; what followed the unknown record was not
    assert 4 <= len(kernels(run.trace)) < LAUNCHED
    assert session["drain"]["pending_launches"] > 0, session["drain"]


def test_kernel_names_with_quotes_backslashes_and_control_bytes_give_valid_json(tmp_path):
    workload = r"""
launch('quote"d', "back\\slash", "ctl\x01\x1f\x7fbyte", "new\nline\ttab")
import ctypes
sim.msptiSimLaunchKernel(b"bad\xff\xfeutf8", b"KERNEL_AICORE", 0, 1, 20000)
# lead bytes that look valid but are not: a UTF-16 surrogate, an overlong form, > U+10FFFF
sim.msptiSimLaunchKernel(b"sur\xed\xa0\x80rogate", b"KERNEL_AICORE", 0, 1, 20000)
sim.msptiSimLaunchKernel(b"over\xe0\x80\x80long", b"KERNEL_AICORE", 0, 1, 20000)
sim.msptiSimLaunchKernel(b"big\xf4\x90\x80\x80", b"KERNEL_AICORE", 0, 1, 20000)
sync()
"""
    run = simrun.run(workload, tmp_path)
    _assert_valid(run)  # simrun parsed every trace with json.loads
    json.loads(run.trace_paths[0].read_text())
    names = {k["name"] for k in kernels(run.trace)}
    assert len(names) == 8, names
    for name in names:
        assert not any(ord(c) < 0x20 or c in '"\\' for c in name), repr(name)


# ---------------------------------------------------------------------------------------------
# The process-global external-correlation stack with several launching threads


def test_eight_threads_launching_keep_the_global_stack_balanced_and_link_each_kernel_to_its_op(tmp_path):
    workload = """
import threading, time

@torch.library.custom_op("faults::tlaunch", mutates_args=())
def _tlaunch(t: torch.Tensor, n: int) -> torch.Tensor:
    time.sleep(0.0003)  # releases the GIL: other threads push their ops meanwhile
    sim.msptiSimLaunchKernel(f"K{n}".encode(), b"KERNEL_AICORE", 0, 1 + n % 4, 2000)
    return t.clone()

def worker(w):
    for i in range(20):
        torch.ops.faults.tlaunch(x, w * 100 + i)

threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sync()
"""
    run = simrun.run(workload, tmp_path, experimental_config={"profile_all_threads": True}, record_shapes=True)
    _assert_valid(run)
    assert run.sim_stats_after["external_stack_depth"] == 0, run.sim_stats_after
    session = _session(run)
    assert session["correlation"]["errors"] == 0
    # Every kernel K<n> is linked to the op instance called with n, its launch nested in that op.
    result, session = assert_links_right(run, {"faults::tlaunch"}, 160)
    assert result.linked == 160, result.summary()
    # The threads did interleave on MSPTI's stack: some hints named another thread's op.
    assert session["correlation"]["interleaved"] > 0 and session["links"]["recovered"] > 0, session["links"]


# ---------------------------------------------------------------------------------------------
# Kernels never delivered


@pytest.mark.parametrize("order", ["disable_first", "poll_first"])
def test_kernels_never_delivered_stay_pending_and_name_the_documented_cause(order, tmp_path):
    run = simrun.run(WORKLOAD, tmp_path, sim_options={"never_deliver": 1}, config={**FAST, "drain_order": order})
    _assert_valid(run)
    drain = _session(run)["drain"]
    # Nothing proves that no row can come (the records may only be late, or the kernels still
    # running): every launch holds the drain to the timeout, in both orders.
    assert drain["exit_reason"] == "timeout" and drain["evidence"] == "", drain
    assert drain["pending_launches"] > 0, drain
    assert drain["pulled_by"] == ("COMMUNICATION" if order == "disable_first" else ""), drain
    assert not kernels(run.trace)
    warnings = run.doctor_warnings()
    assert len(warnings) == 1 and "no KERNEL record" in warnings[0], warnings
    assert "still running" in warnings[0] and "LD_PRELOAD" in warnings[0], warnings  # both documented causes
    assert "drain_timeout_ms" in warnings[0], warnings


# ---------------------------------------------------------------------------------------------
# TORCH_MSPTI_LIBRARY pointing at something unusable


def _wrong_architecture_library(tmp_path: Path) -> Path:
    """A copy of the simulator whose ELF header names the other architecture."""
    src = Path(simrun._simulator_path())
    data = bytearray(src.read_bytes())
    machine = struct.unpack_from("<H", data, 18)[0]
    other = 183 if machine != 183 else 62  # EM_AARCH64 / EM_X86_64
    struct.pack_into("<H", data, 18, other)
    path = tmp_path / "wrongarch" / "libmspti.so"
    path.parent.mkdir()
    path.write_bytes(bytes(data))
    return path


def _library_missing_symbols(tmp_path: Path) -> Path | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    src = tmp_path / "partial.c"
    src.write_text("int msptiSubscribe(void **s, void *cb, void *u) { (void)cb; (void)u; *s = 0; return 0; }\n")
    path = tmp_path / "partial" / "libmspti.so"
    path.parent.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(path), str(src)], check=True, capture_output=True)
    return path


def _assert_cpu_only_with_reason(run) -> str:
    _assert_valid(run)
    assert not kernels(run.trace)
    assert len(run.doctor_warnings()) == 1, run.doctor_warnings()
    lib = run.diagnostics["library"]
    assert lib["available"] is False and lib["reason"] and lib["fix"], lib
    return lib["reason"]


def test_library_of_the_wrong_architecture_is_rejected_with_its_reason(tmp_path):
    path = _wrong_architecture_library(tmp_path)
    reason = _assert_cpu_only_with_reason(simrun.run(WORKLOAD, tmp_path / "run", library=str(path)))
    assert "built for" in reason and "this process is" in reason, reason


def test_library_missing_required_symbols_is_rejected_with_its_reason(tmp_path):
    path = _library_missing_symbols(tmp_path)
    if path is None:
        pytest.skip("no C compiler to build the partial library")
    # A library that is not the simulator is loaded only with libprofapi, or when allowed without it.
    refused = _assert_cpu_only_with_reason(simrun.run(WORKLOAD, tmp_path / "refused", library=str(path)))
    assert "libprofapi.so cannot be found" in refused and "allow_missing_profapi" in refused, refused
    run = simrun.run(WORKLOAD, tmp_path / "run", library=str(path), config={"allow_missing_profapi": True})
    reason = _assert_cpu_only_with_reason(run)
    assert "lacks required MSPTI symbols" in reason and "msptiActivityEnable" in reason, reason
    assert "msptiSubscribe," not in reason  # the one it has is not listed as missing
    # the documented way to force it from the environment, as the path itself is given
    env = {"TORCH_MSPTI_ALLOW_MISSING_PROFAPI": "1"}
    forced = _assert_cpu_only_with_reason(simrun.run(WORKLOAD, tmp_path / "env", library=str(path), env=env))
    assert "lacks required MSPTI symbols" in forced, forced


_REASONS = r"""
import json, sys
import torch_mspti
out = {}
torch_mspti.config.allow_missing_profapi = True  # these are not real libmspti files
for label, path in json.loads(sys.argv[1]).items():
    torch_mspti.config.library_path = path
    out[label] = torch_mspti.diagnostics(load_library=True).library.reason
print(json.dumps(out))
"""


def test_each_unusable_explicit_library_has_its_own_reason(tmp_path):
    directory = tmp_path / "adir"
    directory.mkdir()
    text = tmp_path / "text" / "libmspti.so"
    text.parent.mkdir()
    text.write_text("not an ELF file\n")
    paths = {
        "directory": str(directory),
        "not-a-library": str(text),
        "wrong-architecture": str(_wrong_architecture_library(tmp_path)),
    }
    partial = _library_missing_symbols(tmp_path)
    if partial is not None:
        paths["missing-symbols"] = str(partial)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_MSPTI_")}
    proc = subprocess.run(
        [sys.executable, "-c", _REASONS, json.dumps(paths)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    reasons = json.loads(proc.stdout.splitlines()[-1])
    assert all(reasons.values()), reasons
    assert len(set(reasons.values())) == len(reasons), reasons
    assert "director" in reasons["directory"]
    assert "not an ELF" in reasons["not-a-library"]
    assert "built for" in reasons["wrong-architecture"]
    if partial is not None:
        assert "lacks required MSPTI symbols" in reasons["missing-symbols"]


UNCOLLECTED_COPIES = r"""
import torch_mspti
from torch.profiler import ProfilerActivity, profile

ACT = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]

def _session(cap):
    torch_mspti.config.max_session_records = cap
    a = torch.randn(16, device="npu")
    host = torch.randn(16).pin_memory()
    torch.npu.synchronize()
    with profile(activities=ACT) as prof:
        for i in range(600):
            a.copy_(host, non_blocking=True)  # an async copy: its id is minted, no row (copies off)
        for i in range(400):
            a.add_(1)
        torch.npu.synchronize()
    s = torch_mspti.diagnostics().to_dict()["last_session"]
    kernels = sum(1 for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU and e.name != "MemSet")
    return {"records": sum(s["records_by_kind"].values()), "over_cap": s["dropped"]["over_cap"],
            "warnings": s["warnings"], "kernels": kernels, "copy_calls": s["drain"].get("pending_launches")}

def check_uncollected_copies():
    torch_mspti.config.enable_memcpy_memset = False
    torch_mspti.config.buffer_size = int(os.environ["CAP_BUFFER_SIZE"])
    whole = _session(1 << 30)
    capped = _session(whole["records"] + 16)  # room for every record the session makes, a little slack
    return {"whole": whole, "capped": capped}
"""


@pytest.mark.parametrize("buffer_size", [64 << 10, 8 << 20], ids=["64KiB", "8MiB"])
def test_copies_that_are_not_collected_hold_no_room_under_the_cap(buffer_size):
    # With the library preloaded, an async copy mints an id and writes its API record even while
    # copies are not collected (docs/mspti.md 5.5, 5.7): a wait no record ends. At a cap that holds
    # every record the session makes, such calls must not take the kernels' room.
    env = {"LD_PRELOAD": simulator_library_path(), "CAP_BUFFER_SIZE": str(buffer_size)}
    r = result(run_checks("import os\n" + UNCOLLECTED_COPIES, {"launch_mode": "direct"}, env=env), "uncollected_copies")
    whole, capped = r["whole"], r["capped"]
    assert whole["over_cap"] == 0 and whole["kernels"] >= 400, whole
    assert capped["over_cap"] == 0, (capped, whole)
    assert capped["kernels"] == whole["kernels"], (capped, whole)
    assert "over-cap" not in capped["warnings"], capped
