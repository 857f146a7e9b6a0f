"""The CANN-aware build (cmake/CannSdkCheck.cmake): our MSPTI declarations against an SDK's.

Each test configures the top-level CMake project without torch (TORCH_MSPTI_SIM_ONLY=ON) against
a fake CANN root made in tmp_path, and builds only the check target. A fake SDK is a copy of our
headers under the SDK's file names, made SDK-like (the SDK's own packing macro, no static_asserts),
then edited: identical it must pass, with a moved field or a changed enum value the build must
fail and name each mismatch, and an older SDK lacking optional kinds must pass with a note.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OUR_HEADERS = REPO / "third_party" / "mspti" / "include" / "mspti"
CHECK_TARGET = "mspti_sdk_check"

pytestmark = [
    pytest.mark.skipif(not (REPO / "cmake" / "CannSdkCheck.cmake").is_file(), reason="needs the source tree"),
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not on PATH"),
    pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler"),
]


def make_fake_sdk(root: Path, layout: str = "tools/mspti/include") -> Path:
    """A CANN root whose MSPTI headers (in ``layout``) are SDK-like copies of ours."""
    include = root / layout
    include.mkdir(parents=True)
    for header in OUR_HEADERS.glob("*.h"):
        text = header.read_text()
        text = text.replace("TORCH_MSPTI_PACKED_ALIGNMENT", "PACKED_ALIGNMENT")
        # The SDK has no ABI pins; dropping ours lets an edited copy compile to a different layout.
        pins = re.compile(r"\s*(static_assert|TORCH_MSPTI_PIN)\(")
        text = "\n".join(line for line in text.splitlines() if not pins.match(line))
        (include / header.name).write_text(text + "\n")
    return include


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, 1))


def configure_and_check(
    tmp_path: Path, cann_home: Path | None, env_home: Path | None
) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess | None]:
    """Configure (SIM_ONLY, no torch) and build only the check target; returns both results."""
    env = {k: v for k, v in os.environ.items() if k != "ASCEND_HOME_PATH"}
    if env_home is not None:
        env["ASCEND_HOME_PATH"] = str(env_home)
    build = tmp_path / "build"
    args = ["cmake", "-S", str(REPO), "-B", str(build), "-DTORCH_MSPTI_SIM_ONLY=ON", "-DCMAKE_BUILD_TYPE=Release"]
    if shutil.which("ninja"):
        args += ["-G", "Ninja"]
    if cann_home is not None:
        args.append(f"-DTORCH_MSPTI_CANN_HOME={cann_home}")
    configure = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert configure.returncode == 0, configure.stdout + configure.stderr
    if "checking third_party/mspti" not in configure.stdout:  # no SDK: the target does not exist
        return configure, None
    built = subprocess.run(
        ["cmake", "--build", str(build), "--target", CHECK_TARGET],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return configure, built


def test_matching_sdk_passes(tmp_path):
    root = tmp_path / "cann"
    make_fake_sdk(root)
    configure, built = configure_and_check(tmp_path, cann_home=root, env_home=None)
    assert "checking third_party/mspti against the CANN SDK headers" in configure.stdout
    assert built is not None
    out = built.stdout + built.stderr
    assert built.returncode == 0, out
    assert "our MSPTI declarations match the CANN SDK headers" in out


def test_mismatching_sdk_fails_and_names_each_mismatch(tmp_path):
    # The other documented layout (<root>/include/mspti), found through ASCEND_HOME_PATH.
    root = tmp_path / "cann"
    include = make_fake_sdk(root, layout="include/mspti")
    activity = include / "mspti_activity.h"
    # A field moved: two bytes inserted before msptiActivityKernel.correlationId.
    kernel_field = "  uint64_t correlationId;  // shared with"
    edit(activity, kernel_field, "  uint16_t reserved;\n" + kernel_field)
    # An enum value changed.
    edit(activity, "MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 8,", "MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION = 18,")
    configure, built = configure_and_check(tmp_path, cann_home=None, env_home=root)
    assert "from ASCEND_HOME_PATH" in configure.stdout
    assert built is not None
    out = built.stdout + built.stderr
    assert built.returncode != 0, out
    assert "torch-mspti SDK check FAILED" in out
    assert "msptiActivityKernel.correlationId: ours 28, SDK 30" in out
    assert "msptiActivityKernel.name: ours 44, SDK 46" in out
    assert "MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: ours 8, SDK 18" in out
    # sizeof is still rounded up to 56: only the offsets betray the moved field.
    assert "sizeof(msptiActivityKernel)" not in out


def test_older_sdk_without_optional_declarations_passes_with_a_note(tmp_path):
    root = tmp_path / "cann"
    include = make_fake_sdk(root)
    activity = include / "mspti_activity.h"
    for kind in ("ACL_API = 10", "NODE_API = 11", "RUNTIME_API = 12"):
        text = activity.read_text()
        activity.write_text(re.sub(rf"\n\s*MSPTI_ACTIVITY_KIND_{kind},[^\n]*", "", text, count=1))
    text = activity.read_text()
    header = "typedef struct PACKED_ALIGNMENT {\n  msptiActivityKind kind;  // MSPTI_ACTIVITY_KIND_COMMUNICATION"
    start = text.index(header)
    end = text.index("} msptiActivityCommunication;") + len("} msptiActivityCommunication;")
    activity.write_text(text[:start] + text[end:])
    _, built = configure_and_check(tmp_path, cann_home=root, env_home=None)
    assert built is not None
    out = built.stdout + built.stderr
    assert built.returncode == 0, out
    assert "optional declarations this (older) SDK lacks" in out
    assert "MSPTI_ACTIVITY_KIND_RUNTIME_API" in out
    assert "msptiActivityCommunication.correlationId" in out


def test_without_sdk_the_check_is_skipped_with_a_message(tmp_path):
    configure, built = configure_and_check(tmp_path, cann_home=None, env_home=None)
    assert built is None
    assert "skipped the check of third_party/mspti" in configure.stdout


def test_cann_root_without_mspti_headers_is_skipped_with_a_message(tmp_path):
    root = tmp_path / "cann"
    (root / "lib64").mkdir(parents=True)
    configure, built = configure_and_check(tmp_path, cann_home=None, env_home=root)
    assert built is None
    assert "has no MSPTI headers" in configure.stdout
