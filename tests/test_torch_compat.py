"""The torch this build serves: what the build recorded, what diagnostics and doctor say, and the
README's support-table row for the running torch, measured.

Runs on whatever torch is installed: on 2.13 in build_and_test, and on 2.14 and 2.7 in CI's
torch_versions stage (``ci/torch_versions.sh``), which also runs the trace, link, drain, copy,
collective and MSPTI-generation tests on that torch. Each test here asserts a property of the
running torch: the features the build adapted to are those of this torch's own headers, the
health report reaches the trace however this kineto takes it, and each "yes (CI)" cell of this
torch's row holds in a profile on this torch.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from simrun import flow_events, flow_id, kernels

torch = pytest.importorskip("torch")
import torch_mspti  # noqa: E402
from torch_mspti import _build_info, _torch_support  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
INCLUDE = Path(torch.__file__).parent / "include"


def _minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()
    return int(major), int(minor)


def test_the_build_was_made_for_the_running_torch_minor():
    built = torch_mspti._C.torch_build()
    assert built["built_for"] == _build_info.TORCH_VERSION
    assert _minor(built["built_for"]) == _minor(torch.__version__), (built, torch.__version__)


def test_the_features_the_build_adapted_to_are_this_torchs_own():
    # The CMake probe read these from the headers of the torch it compiled against; compare with
    # the headers of the torch running now (a build against other headers differs here).
    built = torch_mspti._C.torch_build()
    registry = (INCLUDE / "torch/csrc/profiler/standalone/privateuse1_profiler.h").is_file()
    assert built["privateuse1_profiler_registry"] is registry
    iap = (INCLUDE / "kineto/IActivityProfiler.h").read_text()
    assert built["session_metadata"] == ("getMetadata" if "getMetadata()" in iap else "addMetadata")
    gta = (INCLUDE / "kineto/GenericTraceActivity.h").read_text()
    assert built["flow_id_bits"] == (27 if "uint32_t id : 27" in gta else 32)


def test_diagnostics_name_the_build_torch_and_this_minors_support_row():
    t = torch_mspti.diagnostics(load_library=False).to_dict()["torch"]
    assert t["built_for"] == _build_info.TORCH_VERSION
    assert t["running"] == str(torch.__version__)
    row = _torch_support.row_for(torch.__version__)
    assert t["support"] == (row.to_dict() if row else None)


def test_doctor_names_the_torch_the_build_was_made_for(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=simrun.clean_environment(),
        timeout=120,
    )
    d = json.loads(proc.stdout)
    assert d["torch"]["built_for"] == _build_info.TORCH_VERSION, d.get("torch")
    human = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=simrun.clean_environment(),
        timeout=120,
    ).stdout
    line = next((ln for ln in human.splitlines() if ln.strip().startswith("built for")), "")
    assert line.split() == ["built", "for", _build_info.TORCH_VERSION], human


def test_the_readme_support_table_is_the_one_the_package_reports():
    readme = (REPO / "README.md").read_text()
    assert _torch_support.markdown_table() in readme, "README's support table differs from _torch_support.SUPPORT"
    minors = [r.minor for r in _torch_support.SUPPORT]
    assert minors == sorted(minors, key=lambda m: _minor(m)), minors
    for r in _torch_support.SUPPORT:
        assert f'pip install "torch=={r.torch}' in readme or r.builds != _torch_support.YES, (
            f"no install line for torch {r.torch} in the README"
        )


WORKLOAD = """
x = torch.ones(8)
for i in range(3):
    launch(f"MatMulV2_{i}", {"name": f"Add_{i}", "stream": 2, "dur_ns": 50000})
launch({"name": "Fused", "count": 2, "stream": 3, "dur_ns": 40000})
sync()
torch.ones(2) + 1
"""


@pytest.fixture(scope="module")
def profiled(tmp_path_factory) -> simrun.SimResult:
    return simrun.run(WORKLOAD, tmp_path_factory.mktemp("torch_compat"))


def _row():
    row = _torch_support.row_for(torch.__version__)
    if row is None:
        pytest.skip(
            f"torch {torch.__version__} has no row in the support table, so there is no claim to check "
            "(add its row to torch_mspti/_torch_support.py once CI runs it)"
        )
    return row


def test_the_health_report_reaches_the_trace_on_this_torch(profiled):
    # kineto's getMetadata where it has it, addMetadata from getDeviceProperties where not: either
    # way the trace holds this session's report, once, with this session's counts.
    report = profiled.trace["torch_mspti"]
    assert report["state"] == "processed", report
    assert report["records_by_kind"]["KERNEL"] == 8, report["records_by_kind"]


def test_kernels_and_arrows_cells_hold_on_this_torch(profiled):
    row = _row()
    trace = profiled.trace
    got = sorted(k["name"] for k in kernels(trace))
    want = sorted([f"MatMulV2_{i}" for i in range(3)] + [f"Add_{i}" for i in range(3)] + ["Fused"] * 2)
    if row.kernels == _torch_support.YES:
        assert got == want
    if row.arrows == _torch_support.YES:
        starts = flow_events(trace, "s")
        finishes = flow_events(trace, "f")
        # 7 launches (the fused one has two kernels): one arrow start each, ids distinct
        assert len(starts) == 7 and len({s["id"] for s in starts}) == 7, starts
        by_id = {s["id"]: s for s in starts}
        # every kernel ends exactly one arrow, whose start is its own launch's
        assert sorted(f["id"] for f in finishes) == sorted(flow_id(k["args"]["correlation"]) for k in kernels(trace))
        assert all(by_id[f["id"]]["ts"] <= f["ts"] for f in finishes)


def test_device_time_cell_holds_on_this_torch(profiled):
    row = _row()
    ops = [o for o in profiled.profiles[0]["ops"] if o["name"] == "simrun::launch"]
    assert len(ops) == 4, [o["name"] for o in profiled.profiles[0]["ops"]]
    total = sum(o["self_device_time_total"] for o in ops)
    kernel_us = sum(k["duration_us"] for k in profiled.profiles[0]["kernels"])
    if row.device_time == _torch_support.YES:
        assert total == pytest.approx(kernel_us, rel=1e-6) and total > 0, (total, kernel_us)
    else:
        assert total == 0, "torch gives device time here: the support table says it does not"


# The torch_npu release each torch minor pairs with, whose real libtorch_npu.so (CANN stubbed,
# tests/npu_peer.py) is loaded next to torch-mspti on that torch. torch_npu before 2.12.0.post3 has
# no MSPTI backend of its own: torch-mspti must serve and name no peer. The releases with one are
# covered in depth by tests/test_torch_npu_coexistence.py (2.13.0 in the full tier).
PAIRED_RELEASE = {"2.7": "2.7.1.post11", "2.13": "2.13.0", "2.14": "2.14.0"}
# Seen when the release was tried here: why its real binary cannot run on this machine's torch.
CANNOT_HOST = {
    "2.14": "torch_npu 2.14.0's libtorch_npu.so aborts on PyPI's CUDA torch 2.14 (\"Duplicated key "
    "'pinned_reserve_segment_size_mb' found in device-specific configuration parser hook registration\"): "
    "it needs the CPU build of its torch, which this machine cannot install; the stand-in covers it",
}
PEER_WORKLOAD = """
launch("MatMulV2", {"name": "Add", "stream": 2})
sync()
"""


@pytest.mark.parametrize("order", simrun.PEER_ORDERS)
def test_the_paired_torch_npu_release_loads_beside_torch_mspti_and_ours_serves(order, tmp_path):
    import npu_peer

    minor = "{}.{}".format(*_minor(torch.__version__))
    release = PAIRED_RELEASE.get(minor)
    if release is None:
        pytest.skip(f"no torch_npu release is paired with torch {minor} here")
    if minor in CANNOT_HOST and torch.version.cuda:
        pytest.skip(CANNOT_HOST[minor])
    try:
        peer = npu_peer.real_peer(release)
    except npu_peer.PeerUnavailable as exc:
        pytest.skip(f"real torch_npu {release} wheel unavailable: {exc}")
    r = simrun.run(PEER_WORKLOAD, tmp_path, peer=(peer, order))
    assert sorted(k["name"] for k in kernels(r.trace)) == ["Add", "MatMulV2"]
    assert all(k["args"]["link"] == "verified" for k in kernels(r.trace)), kernels(r.trace)
    plugin = r.diagnostics["plugin"]
    assert plugin["last_trace_used_ours"] is True, plugin
    has_backend = b"MsptiActivityProfilerPoc" in Path(peer.library).read_bytes()
    if has_backend:
        assert release in json.dumps(plugin["other_profiler"]), plugin["other_profiler"]
    else:  # nothing to name: this release collects no MSPTI activity for kineto
        assert plugin["other_profiler"] is None, plugin["other_profiler"]
