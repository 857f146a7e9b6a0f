"""set_device_properties_provider keeps one provider: a replaced one is released (it leaked one
callable per call before), and the one set is the one a trace calls."""

from __future__ import annotations

from sim_support import run_child

CHILD = r"""
import gc, weakref
import torch, torch_mspti
from torch_mspti import _C, _device_properties

class Provider:
    def __call__(self, devices):
        return ""

first, second = Provider(), Provider()
gone = weakref.ref(first)
_C.set_device_properties_provider(first)
_C.set_device_properties_provider(second)
del first
gc.collect()
print("FIRST_RELEASED", gone() is None)
alive = weakref.ref(second)
del second
gc.collect()
print("CURRENT_KEPT", alive() is not None)
_C.set_device_properties_provider(_device_properties.describe)
gc.collect()
print("REPLACED_RELEASED", alive() is None)
"""


def test_a_replaced_provider_is_released_and_the_current_one_kept():
    proc = run_child(CHILD)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split() for line in proc.stdout.splitlines() if line.count(" ") == 1)
    assert lines == {"FIRST_RELEASED": "True", "CURRENT_KEPT": "True", "REPLACED_RELEASED": "True"}, proc.stdout
