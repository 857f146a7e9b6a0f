"""deviceProperties for NPU traces: what the plugin asks Python for each device of a trace.

kineto merges each child profiler session's ``getDeviceProperties()`` into the trace's top-level
``"deviceProperties"`` array (kineto GenericActivityProfiler::processTraceInternal), which
TensorBoard's profiler plugin and HTA read to tell what ran the device lanes. The properties come
from the PrivateUse1 device module (``torch.npu``: torch_npu's on Ascend, the simulated one
otherwise): ``get_device_properties(i)`` with torch_npu's field names (name, total_memory,
cube_core_num, vector_core_num, L2_cache_size). Keys follow kineto's CUDA entries where the fact
is the same (``id``, ``name``, ``totalGlobalMem``, ``numSms`` for the cube cores), plus NPU ones.

Called by the plugin from kineto's processing thread with the GIL held; never raises (returns ""
when the device module cannot say).
"""

from __future__ import annotations

import json
from typing import Any

import torch


def _device_module() -> Any:
    name = torch._C._get_privateuse1_backend_name()
    return getattr(torch, name, None) if name != "privateuseone" else None


def describe(devices: list[int]) -> str:
    """JSON objects (comma-joined) for the logical devices ``devices``; "" when unknown."""
    try:
        mod = _device_module()
        get = getattr(mod, "get_device_properties", None)
        if get is None:
            return ""
        out = []
        for i in devices:
            p = get(int(i))
            entry: dict[str, Any] = {"id": int(i), "name": str(getattr(p, "name", f"NPU {i}")), "deviceType": "NPU"}
            facts = {
                "totalGlobalMem": "total_memory",
                "numSms": "cube_core_num",
                "cubeCoreNum": "cube_core_num",
                "vectorCoreNum": "vector_core_num",
                "L2CacheSize": "L2_cache_size",
            }
            for key, attr in facts.items():
                value = getattr(p, attr, None)
                if isinstance(value, int):
                    entry[key] = value
            out.append(json.dumps(entry))
        return ",".join(out)
    except Exception:
        return ""
