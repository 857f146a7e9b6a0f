"""Session setup shared by all test modules: the hardware tier (see README "Running the tests on
Ascend hardware").

* Device pinning: with ``pytest -n N`` and ``TORCH_MSPTI_TEST_DEVICES=0,1,2,3``, each xdist worker
  exports ``ASCEND_RT_VISIBLE_DEVICES=<devices[N % len]>`` in ``pytest_configure``, which runs in
  the worker before any test module is imported, hence before any NPU runtime starts.
* Markers: ``npu`` tests are skipped with a reason unless torch_npu, an Ascend device and CANN
  are found; ``cann`` tests unless a real libmspti.so is. Probes never import torch_npu or load
  libmspti. Unmarked tests (the simulator tier) always run.
"""

from __future__ import annotations

import os

import hw_support
import pytest

_MARKERS = {
    "npu": "needs an Ascend device + CANN + torch_npu",
    "cann": "needs a real libmspti.so",
}


def pytest_configure(config: pytest.Config) -> None:
    try:
        hw_support.pin_worker_from_env()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    # Registered here too, for runs outside the repository (no pyproject.toml ini section).
    registered = " ".join(config.getini("markers"))
    for name, text in _MARKERS.items():
        if f"{name}:" not in registered:
            config.addinivalue_line("markers", f"{name}: {text}")


def pytest_report_header(config: pytest.Config) -> list[str]:
    npu_ok, npu_reason = hw_support.npu_status()
    cann_ok, cann_reason = hw_support.cann_status()
    lines = [
        f"torch-mspti hardware tier: npu tests {'run' if npu_ok else 'skipped'} ({npu_reason})",
        f"torch-mspti hardware tier: cann tests {'run' if cann_ok else 'skipped'} ({cann_reason})",
    ]
    devices = os.environ.get(hw_support.DEVICES_ENV)
    if devices:
        lines.append(
            f"torch-mspti hardware tier: {hw_support.DEVICES_ENV}={devices}: xdist worker gwN uses "
            f"{hw_support.VISIBLE_ENV}=devices[N % {len(hw_support.parse_devices(devices))}]"
        )
    return lines


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = {name for name in _MARKERS if any(item.get_closest_marker(name) for item in items)}
    if not wanted:
        return
    status = {"npu": hw_support.npu_status, "cann": hw_support.cann_status}
    skips = {}
    for name in wanted:
        ok, reason = status[name]()
        if not ok:
            skips[name] = pytest.mark.skip(reason=f"[{name}] {reason}")
    for item in items:
        for name, skip in skips.items():
            if item.get_closest_marker(name):
                item.add_marker(skip)
                break
