"""B5 kept honest at small N: ``benchmarks/end_to_end.py --n 3000 --ranks 2 --rank-n 1000 --keep`` (one
profiled step of N ``x.zero_()`` on the simulated NPU, CPU + PrivateUse1 and CPU only, each arm in its
own process; then 2 ranks of each started together), and then, from its JSON report and from the trace
files it kept: every kernel is in the file, once, with ``args.link == "verified"``, at the end of an
ac2g arrow that starts on its launch, and that launch lies inside its op (same ``External id``); the
gzip file holds the same events; the CPU-only trace holds the N ops and no kernel.

The file checks here are the test's own (``_links``: the whole trace loaded with ``json``), not the
benchmark's streaming checker (benchmarks/_trace_links.py), so a fault in the checker cannot hide a
lost kernel; ``torch-mspti check``'s rules run on the kept trace too. The last tests show that both
checkers, and the worker's gate that makes the benchmark exit 1, fail on a trace with one kernel,
one arrow or one verified link taken away.

The run happens once per test session (``run_once``, shared by the xdist workers).
"""

from __future__ import annotations

import copy
import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sim_support import run_once
from simrun import flow_id

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "end_to_end.py"
N, RANKS, RANK_N = 3000, 2, 1000

sys.path.insert(0, str(REPO / "benchmarks"))
import _trace_links  # noqa: E402  (the benchmark's checker, tested below)
import end_to_end  # noqa: E402


def _run(out: Path) -> dict:
    cmd = [sys.executable, str(SCRIPT), "--n", str(N), "--ranks", str(RANKS), "--rank-n", str(RANK_N)]
    cmd += ["--out", str(out / "traces"), "--keep", "--json", str(out / "report.json")]
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, cwd=out)
    return {"rc": proc.returncode, "stdout": proc.stdout[-4000:], "stderr": proc.stderr[-8000:], "out": str(out)}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    result = run_once(tmp_path_factory, "bench_end_to_end", _run)
    report = Path(result["out"]) / "report.json"
    assert result["rc"] == 0 and report.is_file(), (
        f"end_to_end.py exited {result['rc']}:\n{result['stdout']}\n{result['stderr']}"
    )
    return result | {"report": json.loads(report.read_text())}


def _load(path: str | Path) -> list[dict]:
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    data = json.loads(raw)
    return data["traceEvents"] if isinstance(data, dict) else data


def _links(events: list[dict]) -> tuple[int, int, list[str]]:
    """(kernel events, kernels linked to their op, the first problems): a kernel is linked when its
    link is verified, an ac2g "f" with its arrow id (simrun.flow_id of its correlation) binds to it ("bp": "e", same lane, at its
    start), the "s" with that id sits on the launch with the same correlation, and the launch (same
    External id as the kernel) lies inside the cpu_op with that External id, on the op's thread."""
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "privateuse1_runtime" and "correlation" in e.get("args", {})
    }
    ops = {e["args"]["External id"]: e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"}
    flows = {(e["ph"], e["id"]): e for e in events if e.get("cat") == "ac2g" and e.get("ph") in ("s", "f")}
    # The maps above keep one event per key: a correlation id (or op External id) that several
    # kernels, launches or flow halves share would hide all but one of them, so it links nothing.
    seen = Counter(("kernel", k["args"].get("correlation")) for k in kernels)
    seen.update(
        ("launch", e["args"]["correlation"])
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "privateuse1_runtime" and "correlation" in e.get("args", {})
    )
    seen.update((e["ph"], e["id"]) for e in events if e.get("cat") == "ac2g" and e.get("ph") in ("s", "f"))
    seen.update(("op", e["args"]["External id"]) for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op")
    shared = {key for key, count in seen.items() if count > 1}
    linked, problems = 0, []
    tol = 0.01
    for k in kernels:
        corr, ext = k["args"].get("correlation"), k["args"].get("External id")
        fid = flow_id(corr) if isinstance(corr, int) else corr  # the arrow's id (folded on older kineto)
        f, s, launch = flows.get(("f", fid)), flows.get(("s", fid)), launches.get(corr)
        op = ops.get(ext)
        unique = not shared & {("kernel", corr), ("launch", corr), ("s", fid), ("f", fid), ("op", ext)}
        ok = (
            unique
            and k["args"].get("link") == "verified"
            and f is not None
            and f.get("bp") == "e"
            and (f["pid"], f["tid"]) == (k["pid"], k["tid"])
            and k["ts"] - tol <= f["ts"] <= k["ts"] + k["dur"] + tol
            and s is not None
            and launch is not None
            and (s["pid"], s["tid"]) == (launch["pid"], launch["tid"])
            and launch["ts"] - tol <= s["ts"] <= launch["ts"] + launch["dur"] + tol
            and launch["args"].get("External id") == ext
            and op is not None
            and (op["pid"], op["tid"]) == (launch["pid"], launch["tid"])
            and op["ts"] - tol <= launch["ts"]
            and launch["ts"] + launch["dur"] <= op["ts"] + op["dur"] + tol
        )
        if ok:
            linked += 1
        elif len(problems) < 3:
            why = "shares its correlation or External id" if not unique else "is not linked to its op"
            problems.append(f"kernel correlation {corr} (External id {ext}) {why}")
    return len(kernels), linked, problems


def _plugin_traces(report: dict) -> list[tuple[str, int]]:
    """(plain trace, kernels) of every plugin run: the single-process step and each rank."""
    single = [(r["plain"], N) for r in report["single"]["runs"]["plugin"]]
    ranks = [(r["plain"], RANK_N) for r in report["ranks"]["groups"]["plugin"]["ranks_results"]]
    return single + ranks


# ---------------------------------------------------------------- the run


def test_report_is_complete(run):
    report = run["report"]
    assert report["ok"] and not report.get("failures")
    assert report["params"] == {
        "n": N,
        "reps": 1,
        "ranks": RANKS,
        "rank_n": RANK_N,
        "warmup_ops": end_to_end.WARMUP_OPS,
    }
    plugin = report["single"]["runs"]["plugin"]
    assert len(plugin) == 1 and len(report["single"]["runs"]["cpu_only"]) == 1
    for res in [*plugin, *report["ranks"]["groups"]["plugin"]["ranks_results"]]:
        n = res["n"]
        assert res["ok"] and res["exit_code"] == 0
        assert res["session"]["kernels"] == n and res["session"]["verified"] == n, res["session"]
        s = res["check"]["plain"]
        assert s["kernels"] == n and s["linked_to_op"] == n and s["link_states"] == {"verified": n}, s
        assert s["problems"] == {} and res["check"]["gzip_same"]


def test_every_kernel_is_in_the_file_and_linked(run):
    for path, n in _plugin_traces(run["report"]):
        kernels, linked, problems = _links(_load(path))
        assert kernels == n, f"{path}: {kernels} kernel events, want {n}"
        assert linked == n, f"{path}: {linked} of {n} kernels linked: {problems}"


def test_gzip_file_holds_the_same_events(run):
    for res in [*run["report"]["single"]["runs"]["plugin"], *run["report"]["single"]["runs"]["cpu_only"]]:
        assert Path(res["gzip"]).read_bytes()[:2] == b"\x1f\x8b"
        assert _load(res["gzip"]) == _load(res["plain"])
    for res in run["report"]["ranks"]["groups"]["plugin"]["ranks_results"]:
        kernels, linked, _ = _links(_load(res["gzip"]))
        assert kernels == linked == RANK_N


def test_torch_mspti_check_accepts_the_trace(run):
    from torch_mspti_cli.check import check_trace

    path = run["report"]["single"]["runs"]["plugin"][0]["plain"]
    rep = check_trace(path)
    assert rep.ok, rep.to_dict()["problems"][:3]
    assert rep.stats.kernels == N and rep.stats.linked_kernels == N and rep.stats.flows == N
    assert rep.stats.link_states == {"verified": N}


def test_cpu_only_arm_profiles_the_same_ops(run):
    for res in [
        *run["report"]["single"]["runs"]["cpu_only"],
        *run["report"]["ranks"]["groups"]["cpu_only"]["ranks_results"],
    ]:
        events = _load(res["plain"])
        assert sum(1 for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::zero_") == res["n"]
        assert not any(e.get("cat") == "kernel" for e in events)


def test_figures(run):
    report = run["report"]
    s = report["single"]["summary"]
    assert set(s["phases"]) == set(end_to_end.PHASES)
    for ph in end_to_end.PHASES:
        assert s["phases"][ph]["plugin"]["median"] > 0, ph
        if ph not in end_to_end.PLUGIN_ONLY:
            assert s["phases"][ph]["cpu_only"]["median"] > 0, ph
    r = report["single"]["runs"]["plugin"][0]
    assert r["stop_s"] + r["process_trace_s"] <= r["exit_s"]
    assert r["export_plain_s"] < r["export_gzip_s"]  # the gzip export writes the plain file first
    assert r["stop_to_gzip_s"] == pytest.approx(r["exit_s"] + r["export_gzip_s"])
    assert r["plain_bytes"] == Path(r["plain"]).stat().st_size and r["gzip_bytes"] == Path(r["gzip"]).stat().st_size
    assert s["trace_bytes_per_kernel"]["plugin_plain"] == pytest.approx(r["plain_bytes"] / N)
    assert s["peak_rss_bytes"]["plugin"]["median"] > 0 and s["peak_rss_bytes"]["cpu_only"]["median"] > 0
    mr = report["ranks"]["summary"]
    assert mr["wall_s"]["first_stop_to_last_gzip"]["plugin"] > 0
    assert mr["total_trace_bytes"]["plugin_plain"] == sum(
        Path(res["plain"]).stat().st_size for res in report["ranks"]["groups"]["plugin"]["ranks_results"]
    )
    assert report["machine"]["loadavg_at_start"] and report["machine"]["loadavg_at_end"]


# ---------------------------------------------------------------- the checks can fail


def _mutations(events: list[dict]) -> dict[str, list[dict]]:
    kernel_at = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    corr = events[kernel_at]["args"]["correlation"]
    no_kernel = events[:kernel_at] + events[kernel_at + 1 :]
    no_arrow_end = [e for e in events if not (e.get("ph") == "f" and e.get("id") == flow_id(corr))]
    recovered = copy.deepcopy(events)
    recovered[kernel_at]["args"]["link"] = "recovered"
    launch_moved = copy.deepcopy(events)
    for e in launch_moved:
        if e.get("cat") == "privateuse1_runtime" and e.get("args", {}).get("correlation") == corr:
            e["args"]["External id"] = -1  # the launch no longer belongs to the kernel's op
    return {"no_kernel": no_kernel, "no_arrow_end": no_arrow_end, "recovered": recovered, "launch_moved": launch_moved}


def test_checkers_fail_when_a_kernel_is_missing_or_unlinked(run, tmp_path):
    path = run["report"]["single"]["runs"]["plugin"][0]["plain"]
    events = _load(path)
    assert _trace_links.complete(_trace_links.kernel_links(events), N)  # the intact trace passes
    for name, mutated in _mutations(events).items():
        kernels, linked, _ = _links(mutated)
        assert not (kernels == N and linked == N), f"the test's check missed {name}"
        summary = _trace_links.kernel_links(mutated)
        assert not _trace_links.complete(summary, N), f"the benchmark's check missed {name}: {summary}"
    # N kernel events still, but one of them twice in place of another: the test's check sees it
    doubled = copy.deepcopy(events)
    first, second = [i for i, e in enumerate(doubled) if e.get("cat") == "kernel"][:2]
    doubled[second] = copy.deepcopy(doubled[first])
    kernels, linked, problems = _links(doubled)
    assert kernels == N and linked < N and "shares its correlation" in problems[0], problems
    # one kernel removed, read back from files (plain and gzip) by the streaming reader and by the
    # worker's gate that makes the benchmark exit 1
    trace = json.loads(Path(path).read_text())
    trace["traceEvents"] = _mutations(events)["no_kernel"]
    plain, gz = tmp_path / "lost.json", tmp_path / "lost.json.gz"
    plain.write_text(json.dumps(trace))
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    for f in (plain, gz):
        s = _trace_links.summarize_file(f)
        assert s["kernels"] == N - 1 and not _trace_links.complete(s, N)
    with pytest.raises(end_to_end.CompletenessError, match="2999 kernel events"):
        end_to_end._check_traces("plugin", N, plain, gz)


def test_gzip_that_differs_fails_the_gate(run, tmp_path):
    res = run["report"]["single"]["runs"]["plugin"][0]
    events = _load(res["plain"])
    gz = tmp_path / "short.json.gz"
    gz.write_bytes(gzip.compress(json.dumps({"traceEvents": _mutations(events)["no_kernel"]}).encode()))
    with pytest.raises(end_to_end.CompletenessError, match="gzip trace differs"):
        end_to_end._check_traces("plugin", N, Path(res["plain"]), gz)


def test_streaming_reader_matches_json(run, monkeypatch):
    res = run["report"]["single"]["runs"]["plugin"][0]
    want = json.loads(Path(res["plain"]).read_text())
    meta: dict = {}
    assert list(_trace_links.iter_events(res["plain"], meta)) == want["traceEvents"]
    assert meta == {k: v for k, v in want.items() if k != "traceEvents"}
    monkeypatch.setattr(_trace_links, "CHUNK", 97)  # refills inside events, keys and numbers
    monkeypatch.setattr(_trace_links, "LOOKAHEAD", 5)
    assert list(_trace_links.iter_events(res["gzip"])) == want["traceEvents"]
