"""torch_mspti._communicators on torch_npu's ProcessGroupHCCL, with stand-ins for its Python surface
(docs/torch_npu.md 6): the communicator's name is asked with ``init_comm=False`` only (without that
keyword the call would create a communicator, a collective operation), and the group's sequence
number comes from ``_get_sequence_number_for_group()``. The simulated backend's side is tested end to
end by tests/test_sim_hccl.py (every joined row names its pg_config group and Seq agrees across ranks).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from torch_mspti import _communicators


class Backend:
    def __init__(self, name: str, keyword: bool = True, seq: int | None = 7):
        self.name, self.keyword, self.seq = name, keyword, seq
        self.calls: list[tuple] = []

    def get_hccl_comm_name(self, rank, **kwargs):
        self.calls.append((rank, kwargs))
        if kwargs and not self.keyword:
            raise TypeError("get_hccl_comm_name() got an unexpected keyword argument 'init_comm'")
        return self.name

    def _get_sequence_number_for_group(self):
        if self.seq is None:
            raise RuntimeError("no sequence number")
        return self.seq


class Group:
    def __init__(self, backend):
        self.backend = backend

    def _get_backend(self, device):
        return self.backend


def test_a_torch_npu_group_gives_its_communicator_name_and_sequence_number():
    backend = Backend("16898834563344171674")
    assert _communicators._from_torch_npu(Group(backend), 3) == ("16898834563344171674", 7)
    assert backend.calls == [(3, {"init_comm": False})]


def test_a_torch_npu_without_init_comm_is_never_asked_in_a_way_that_creates_a_communicator():
    backend = Backend("1", keyword=False)
    assert _communicators._from_torch_npu(Group(backend), 0) is None
    assert backend.calls == [(0, {"init_comm": False})]  # no second call without the keyword


def test_a_group_without_a_communicator_yet_or_a_sequence_number_says_so():
    assert _communicators._from_torch_npu(Group(Backend("")), 0) is None
    assert _communicators._from_torch_npu(Group(Backend("5", seq=None)), 0) == ("5", -1)
    assert _communicators._from_torch_npu(Group(object()), 0) is None


def test_without_torch_distributed_initialised_there_is_nothing_to_describe():
    assert _communicators.describe() == []
