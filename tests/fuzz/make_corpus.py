"""Writes the seed corpus of the record-walker fuzzer (tests/fuzz/corpus/).

Records are packed back to back, each padded to its documented size (mspti.md 3.1, 3.4; the same
numbers as tests/cpp/core/DocumentedLayout.h, against which the fuzzer checks the plugin's kind
table at start-up). String pointers
are small integers: the harness replaces every pointer field with one of its own strings, chosen
by the value (0 = NULL). Seeds named valid_* must walk without abandoning a byte; ci/fuzz.sh runs
them with TORCH_MSPTI_FUZZ_EXPECT_VALID=1.

    python tests/fuzz/make_corpus.py   # rewrites tests/fuzz/corpus/*.bin
"""

from __future__ import annotations

import struct
from pathlib import Path

OUT = Path(__file__).parent / "corpus"
SIZES = {1: 56, 2: 56, 3: 48, 4: 56, 5: 64, 6: 56, 7: 56, 8: 24, 9: 72, 10: 48, 11: 48, 12: 48}
T0 = 1_780_000_000_000_000_000  # ns since the epoch


def pad(kind: int, body: bytes) -> bytes:
    size = SIZES[kind]
    assert len(body) <= size, (kind, len(body))
    return body + b"\0" * (size - len(body))


def kernel(corr: int, start: int, dur: int, device=0, stream=1, type_ptr=2, name_ptr=1) -> bytes:
    return pad(2, struct.pack("<IQQIIQQQ", 2, start, (start + dur) % 2**64, device, stream, corr, type_ptr, name_ptr))


def api(corr: int, start: int, tid=4242, kind=12, name_ptr=1) -> bytes:
    return pad(kind, struct.pack("<IQQIIQQ", kind, start, start + 500, 4141, tid, corr, name_ptr))


def external(corr: int, ext_id: int, ext_kind=2) -> bytes:
    return pad(8, struct.pack("<IIQQ", 8, ext_kind, ext_id, corr))


def communication(corr: int, start: int, dur: int, data_type=4, count=1024, alg_ptr=2, name_ptr=1, comm_ptr=3) -> bytes:
    body = struct.pack("<IIQIIQQQQQQ", 9, data_type, count, 0, 2, start, start + dur, alg_ptr, name_ptr, comm_ptr, corr)
    return pad(9, body)


def copy(kind: int, corr: int, start: int, dur: int, subkind=2, nbytes=4096, is_async=1) -> bytes:
    """MEMCPY (7; subkind = copyKind) or MEMSET (6; subkind = the value written)."""
    body = struct.pack("<IIQQQIIQB", kind, subkind, nbytes, start, start + dur, 0, 3, corr, is_async)
    return pad(kind, body)


def marker(name_ptr=1, domain_ptr=0) -> bytes:
    return pad(1, struct.pack("<IIIQQIIQQ", 1, 1, 0, T0, 7, 4141, 4242, name_ptr, domain_ptr))


def other(kind: int) -> bytes:
    """A record of a kind the walker sizes but does not keep (pointer fields get small values)."""
    body = struct.pack("<I", kind) + bytes(range(1, SIZES[kind] - 4 + 1))
    return pad(kind, body[: SIZES[kind]])


def launch(i: int, kernels_per_launch=1) -> bytes:
    corr = 100 + i
    out = external(corr, 10 + i) + api(corr, T0 + i * 1000)
    for k in range(kernels_per_launch):
        out += kernel(corr, T0 + i * 1000 + 200 + k * 50, 40, name_ptr=1 + (i + k) % 9)
    return out


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("*.bin"):
        old.unlink()
    seeds = {
        "valid_one_kernel.bin": kernel(1, T0, 1000),
        "valid_launches.bin": b"".join(launch(i) for i in range(8)),
        "valid_multi_kernel_launch.bin": launch(0, kernels_per_launch=5),
        "valid_every_kind.bin": b"".join(
            [
                marker(),
                kernel(2, T0, 10),
                api(2, T0, kind=3),
                other(4),
                other(5),
                other(6),
                other(7),
                external(2, 99),
                other(9),
                api(2, T0, kind=10),
                api(2, T0, kind=11),
                api(2, T0, kind=12),
            ]
        ),
        "valid_device_kinds.bin": external(20, 5)
        + api(20, T0, name_ptr=7)
        + communication(20, T0 + 100, 1000)
        + api(21, T0 + 10, name_ptr=8)
        + copy(7, 21, T0 + 200, 50)
        + api(22, T0 + 20, name_ptr=8)
        + copy(6, 22, T0 + 300, 50, subkind=0xAB, is_async=0),
        "valid_null_and_odd_names.bin": kernel(3, T0, 10, type_ptr=0, name_ptr=0)
        + kernel(4, T0, 10, type_ptr=3, name_ptr=4)
        + api(4, T0, name_ptr=5)
        + marker(0, 6),
        "valid_zero_and_inverted_timing.bin": kernel(5, 0, 0) + kernel(6, T0 + 10, -20),
        "empty.bin": b"",
        "kind_only.bin": struct.pack("<I", 2),
        "short_tail.bin": kernel(7, T0, 10) + b"\x02\x00",
        "truncated_kernel.bin": launch(1)[:-13],
        "truncated_external.bin": kernel(8, T0, 10) + external(8, 1)[:20],
        "unknown_kind.bin": launch(2) + struct.pack("<I", 99) + b"\xab" * 60 + kernel(9, T0, 10),
        "kind_zero.bin": kernel(10, T0, 10) + b"\0" * 56,
        "kind_count.bin": struct.pack("<I", 13) + b"\0" * 52,
        "kind_huge.bin": struct.pack("<I", 0xFFFFFFFF) + b"\xff" * 60,
    }
    for name, data in seeds.items():
        (OUT / name).write_bytes(data)
    print(f"wrote {len(seeds)} seeds to {OUT}")


if __name__ == "__main__":
    main()
