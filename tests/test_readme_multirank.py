"""The README's multi-rank snippet ("Collectives and multi-rank runs"), run as the README says, with
more ranks than the simulated NPU's default two devices: every rank writes its trace, and each
passes ``torch-mspti check`` with its collective joined. The snippet is read from the README itself,
so the test fails when the README's code stops working."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import simrun
from sim_support import require_simulator

from torch_mspti_cli.check import check_trace

README = Path(__file__).resolve().parent.parent / "README.md"
RANKS = 3  # more than the simulated NPU's default device_count (2)


def _snippet() -> str:
    text = README.read_text()
    section = text.split("### Collectives and multi-rank runs", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    found = [b for b in blocks if "init_process_group" in b and "tensorboard_trace_handler" in b]
    assert found, "the README's multi-rank snippet is gone"
    return found[0]


def test_the_readme_multirank_snippet_runs_with_more_ranks_than_default_devices(tmp_path):
    require_simulator()
    script = tmp_path / "train.py"
    script.write_text(_snippet())
    env = simrun.clean_environment()
    env["TASK_QUEUE_ENABLE"] = "0"  # as the README runs it
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={RANKS}", str(script)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=540, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-6000:]
    traces = sorted((tmp_path / "traces").glob("rank*.json"))
    assert [t.name.split(".")[0] for t in traces] == [f"rank{r}" for r in range(RANKS)], traces
    for path in traces:
        trace = json.loads(path.read_text())
        report = check_trace(trace)
        assert report.ok, (path.name, report.to_dict())
        assert report.stats.collectives.get("joined", 0) >= 1, (path.name, report.stats.collectives)
