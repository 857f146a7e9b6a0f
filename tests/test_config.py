"""torch_mspti.config: typed values, validation messages, environment variables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch_mspti = pytest.importorskip("torch_mspti", reason="the package must be installed (README test command)")
config = torch_mspti.config

INT_SETTINGS = {
    # name: (a valid value, values out of range)
    "buffer_size": (4 << 20, [0, 8, (64 << 10) - 8, (256 << 20) + 8, (4 << 20) + 4]),
    "buffer_pool_cap": (8, [0, -1, 4097]),
    "drain_poll_interval_ms": (10, [0, 1001]),
    "drain_quiet_flushes": (5, [0, 1001]),
    "drain_timeout_ms": (250, [-1, 600001]),
    "max_session_records": (1000, [0, -1, (1 << 31) + 1]),
}
BOOL_SETTINGS = [
    "allow_missing_profapi",
    "synchronize_devices",
    "unsubscribe_at_stop",
    "enable_kernels",
    "enable_external_correlation",
    "enable_api_records",
    "enable_communication",
    "enable_memcpy_memset",
    "enable_memory",
    "enable_markers",
]


@pytest.fixture(autouse=True)
def _restore_defaults():
    yield
    config.reset()


def test_every_setting_is_listed_with_type_unit_range_default_and_value():
    names = {s["name"]: s for s in config.settings()}
    texts = {"drain_order", "profiler", "library_path", "marker_domains"}
    assert set(INT_SETTINGS) | set(BOOL_SETTINGS) | texts == set(names)
    for s in names.values():
        assert s["type"] in {"int", "bool", "path", "choice", "domains"} and s["range"] and s["description"]
        assert s["env"].startswith("TORCH_MSPTI_")
        assert s["value"] == getattr(config, s["name"])
        assert type(s["default"]) is type(s["value"])
    assert names["buffer_size"]["unit"] == "bytes" and names["buffer_size"]["default"] == 8 << 20
    assert names["drain_timeout_ms"]["unit"] == "ms"
    assert names["library_path"]["env"] == "TORCH_MSPTI_LIBRARY"
    assert names["profiler"]["import_only"] is True


def test_reading_returns_typed_values():
    assert config.buffer_size == 8 << 20 and type(config.buffer_size) is int
    assert config.enable_kernels is True
    assert config.enable_communication is True
    assert config.allow_missing_profapi is False
    assert config.drain_order == "auto"
    assert config.profiler == "auto"
    assert isinstance(config.library_path, str)
    assert json.loads(json.dumps(config.to_dict()))  # JSON-serialisable


@pytest.mark.parametrize("name", sorted(INT_SETTINGS))
def test_int_settings_accept_valid_and_reject_out_of_range(name):
    good, bad_values = INT_SETTINGS[name]
    setattr(config, name, good)
    assert getattr(config, name) == good
    for bad in bad_values:
        with pytest.raises(ValueError) as err:
            setattr(config, name, bad)
        message = str(err.value)
        assert name in message and str(bad) in message and ".." in message, message
        assert getattr(config, name) == good  # unchanged


@pytest.mark.parametrize("name", sorted(INT_SETTINGS))
@pytest.mark.parametrize("bad", ["8", 1.5, True, None])
def test_int_settings_reject_other_types(name, bad):
    with pytest.raises(TypeError, match=name):
        setattr(config, name, bad)


@pytest.mark.parametrize("name", BOOL_SETTINGS)
def test_bool_settings(name):
    setattr(config, name, False)
    assert getattr(config, name) is False
    for bad in [1, "true", None]:
        with pytest.raises(TypeError, match=name):
            setattr(config, name, bad)


def test_marker_domains_take_an_include_or_an_exclude_list():
    assert config.marker_domains == ""
    config.marker_domains = " include: train , default,train"
    assert config.marker_domains == "include:train,default"
    config.marker_domains = "exclude:noise"
    assert config.marker_domains == "exclude:noise"
    config.marker_domains = ""
    assert config.marker_domains == ""
    for bad in ("train", "include:", "include:a,,b", "only:a"):
        with pytest.raises(ValueError, match=r"marker_domains: .*include:NAME"):
            config.marker_domains = bad
    with pytest.raises(TypeError, match="marker_domains"):
        config.marker_domains = ["a"]


def test_drain_order_choices():
    for choice in ["disable_first", "poll_first", "auto"]:
        config.drain_order = choice
        assert config.drain_order == choice
    with pytest.raises(ValueError, match="drain_order: 'sometimes'.*auto, disable_first, poll_first"):
        config.drain_order = "sometimes"
    with pytest.raises(TypeError, match="drain_order"):
        config.drain_order = 1


def test_unknown_setting_is_an_attribute_error():
    with pytest.raises(AttributeError, match="unknown torch-mspti setting 'bufer_size'"):
        config.bufer_size = 1
    with pytest.raises(AttributeError):
        _ = config.bufer_size


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120)


def test_environment_variables_set_settings():
    r = _run(
        "import torch_mspti as m; print(m.config.buffer_size, m.config.allow_missing_profapi, m.config.drain_order)",
        TORCH_MSPTI_BUFFER_SIZE="2M",
        TORCH_MSPTI_ALLOW_MISSING_PROFAPI="1",
        TORCH_MSPTI_DRAIN_ORDER="poll_first",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(2 << 20), "True", "poll_first"]


BUFFER_RANGE = "allowed 65536..268435456 bytes, a multiple of 8; the default 8388608 is kept"


@pytest.mark.parametrize(
    "var,value,expected,allowed",
    [
        ("TORCH_MSPTI_BUFFER_SIZE", "abc", "is not an integer", BUFFER_RANGE),
        ("TORCH_MSPTI_BUFFER_SIZE", "12", "out of range", BUFFER_RANGE),
        ("TORCH_MSPTI_BUFFER_SIZE", "512M", "out of range", BUFFER_RANGE),
        ("TORCH_MSPTI_DRAIN_TIMEOUT_MS", "-5", "out of range", "the default 1000 is kept"),
        ("TORCH_MSPTI_ENABLE_KERNELS", "maybe", "is not a boolean", "the default true is kept"),
        ("TORCH_MSPTI_DRAIN_ORDER", "later", "is not allowed", "the default auto is kept"),
        ("TORCH_MSPTI_PROFILER", "bogus", "is not allowed", "use auto, mspti, off; the default auto is kept"),
        ("TORCH_MSPTI_BUFFER_SIZE", "64X", "is not an integer", BUFFER_RANGE),
        ("TORCH_MSPTI_BUFFER_SIZE", "99999999999999999999", "is out of range", BUFFER_RANGE),
        ("TORCH_MSPTI_BUFFER_SIZE", "9999999999999G", "is out of range", BUFFER_RANGE),
    ],
)
def test_bad_environment_values_are_reported_and_ignored(var, value, expected, allowed):
    code = (
        "import json, torch_mspti as m; d = m.diagnostics(load_library=False).to_dict();"
        "print(json.dumps({'errors': m.config.environment_errors(), 'diag': d['environment_errors'],"
        " 'values': m.config.to_dict()}))"
    )
    r = _run(code, **{var: value})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert len(out["errors"]) == 1 and out["errors"] == out["diag"]
    assert out["errors"][0].startswith(f"{var}='{value}' is ignored: "), out["errors"]
    assert expected in out["errors"][0] and out["errors"][0].endswith(allowed), out["errors"]
    # said once, at import, by a warning naming the variable (not from inside importlib)
    warned = [ln for ln in r.stderr.splitlines() if "RuntimeWarning" in ln and var in ln]
    assert len(warned) == 1 and "importlib" not in warned[0], r.stderr
    defaults = {"buffer_size": 8 << 20, "drain_timeout_ms": 1000, "enable_kernels": True, "drain_order": "auto"}
    for key, default in defaults.items():
        assert out["values"][key] == default


def test_buffer_size_with_a_suffix_is_accepted_silently():
    r = _run(
        "import torch_mspti as m; print(m.config.buffer_size, m.config.environment_errors())",
        TORCH_MSPTI_BUFFER_SIZE="64M",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split(maxsplit=1) == [str(64 << 20), "[]\n"], r.stdout
    assert "RuntimeWarning" not in r.stderr, r.stderr


def test_several_bad_variables_give_one_warning_at_import_and_plain_doctor_shows_each():
    bad = {"TORCH_MSPTI_BUFFER_SIZE": "abc", "TORCH_MSPTI_PROFILER": "bogus"}
    r = _run("import torch_mspti", **bad)
    assert r.returncode == 0, r.stderr
    warned = [ln for ln in r.stderr.splitlines() if "RuntimeWarning" in ln]
    assert len(warned) == 1 and all(f"{k}='{v}'" in warned[0] for k, v in bad.items()), r.stderr
    doctor = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **bad, "COLUMNS": "1000"},
    )
    assert "Settings (TORCH_MSPTI_* variables ignored)" in doctor.stdout, doctor.stdout
    shown = [ln.strip() for ln in doctor.stdout.splitlines() if ln.strip().startswith("! TORCH_MSPTI_")]
    assert len(shown) == 2, doctor.stdout
    assert shown[0].endswith(BUFFER_RANGE) and "TORCH_MSPTI_PROFILER='bogus'" in shown[1], shown


def test_a_name_cut_short_is_pointed_at_the_setting_it_begins():
    # MEMCPY is spelled closer to ENABLE_MEMORY than to ENABLE_MEMCPY_MEMSET, the switch it is short for.
    code = "import json, torch_mspti as m; print(json.dumps(m.config.environment_errors()))"
    r = _run(code, TORCH_MSPTI_ENABLE_MEMCPY="0")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [
        "TORCH_MSPTI_ENABLE_MEMCPY is not a torch-mspti variable and is ignored "
        "(did you mean TORCH_MSPTI_ENABLE_MEMCPY_MEMSET?)"
    ]


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("TORCH_MSPTI_DISBALE", "TORCH_MSPTI_DISABLE"),  # a variable that is not a setting
        ("TORCH_MSPTI_DISABL", "TORCH_MSPTI_DISABLE"),
        ("TORCH_MSPTI_SIM_CANN_ROO", "TORCH_MSPTI_SIM_CANN_ROOT"),
        ("TORCH_MSPTI_TEST_DEVICE", "TORCH_MSPTI_TEST_DEVICES"),
        ("TORCH_MSPTI_enable_kernels", "TORCH_MSPTI_ENABLE_KERNELS"),  # case
        (
            "TORCH_MSPTI_DRAIN",
            "TORCH_MSPTI_DRAIN_ORDER or TORCH_MSPTI_DRAIN_POLL_INTERVAL_MS or "
            "TORCH_MSPTI_DRAIN_QUIET_FLUSHES or TORCH_MSPTI_DRAIN_TIMEOUT_MS",
        ),  # fmt: skip
    ],
)
def test_a_misspelt_variable_is_pointed_at_the_one_meant_setting_or_not(name, meant):
    from torch_mspti.config import _unknown_variables

    (message,) = _unknown_variables({name: "1"})
    assert message == f"{name} is not a torch-mspti variable and is ignored (did you mean {meant}?)", message


def test_an_unknown_variable_is_reported_with_the_closest_setting():
    code = (
        "import json, torch_mspti as m; d = m.diagnostics(load_library=False).to_dict();"
        "print(json.dumps({'errors': m.config.environment_errors(), 'diag': d['environment_errors'],"
        " 'buffer_size': m.config.buffer_size}))"
    )
    r = _run(code, TORCH_MSPTI_BUFER_SIZE="64M")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (
        out["errors"]
        == out["diag"]
        == [
            "TORCH_MSPTI_BUFER_SIZE is not a torch-mspti variable and is ignored (did you mean TORCH_MSPTI_BUFFER_SIZE?)"
        ]
    )
    assert out["buffer_size"] == 8 << 20  # the typo set nothing
    warned = [ln for ln in r.stderr.splitlines() if "RuntimeWarning" in ln]
    assert len(warned) == 1 and "did you mean TORCH_MSPTI_BUFFER_SIZE?" in warned[0], r.stderr
    doctor = subprocess.run(
        [sys.executable, "-m", "torch_mspti_cli", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TORCH_MSPTI_BUFER_SIZE": "64M", "COLUMNS": "1000"},
    )
    shown = [ln.strip() for ln in doctor.stdout.splitlines() if ln.strip().startswith("! TORCH_MSPTI_BUFER_SIZE")]
    assert len(shown) == 1 and "TORCH_MSPTI_BUFFER_SIZE" in shown[0], doctor.stdout


def test_variables_the_package_reads_that_are_not_settings_are_not_unknown():
    r = _run("import torch_mspti as m; print(m.config.environment_errors())", TORCH_MSPTI_DISABLE="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


@pytest.mark.parametrize("statement", ["import torch", "import torch_mspti"])
def test_a_settings_warning_points_at_the_users_import_line(tmp_path, statement):
    script = tmp_path / "train.py"
    script.write_text(f"import os\nimport sys\n{statement}\n")
    r = subprocess.run(
        [sys.executable, "-W", "always", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TORCH_MSPTI_BUFER_SIZE": "64M", "TORCH_MSPTI_DRAIN_TIMEOUT_MS": "abc"},
    )
    assert r.returncode == 0, r.stderr
    warned = [ln for ln in r.stderr.splitlines() if "RuntimeWarning: torch-mspti" in ln]
    assert len(warned) == 1, r.stderr
    # "<file>:<line>: RuntimeWarning: ...": the user's import, not importlib, torch or torch_mspti
    assert warned[0].startswith(f"{script}:3: RuntimeWarning"), warned[0]
    assert "TORCH_MSPTI_DRAIN_TIMEOUT_MS='abc'" in warned[0] and "TORCH_MSPTI_BUFER_SIZE" in warned[0]


def test_library_path_is_fixed_once_a_library_is_loaded():
    code = """
import torch_mspti as m
sim = m.simulator_library()
m.use_library(sim)
assert m.diagnostics().library.available, m.diagnostics().library
m.use_library(sim)  # the same path stays allowed
try:
    m.config.library_path = "/somewhere/else/libmspti.so"
except RuntimeError as e:
    print("refused:", e)
"""
    r = _run(code)
    assert r.returncode == 0, r.stderr
    assert "refused: library_path: cannot change" in r.stdout
    assert "already loaded" in r.stdout


def test_use_library_rejects_non_paths():
    with pytest.raises(TypeError, match="library_path"):
        torch_mspti.use_library(42)


def _readme_settings_rows() -> dict[str, str]:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme.split("### Settings", 1)[1].split("\n#", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`") and cells[0] != "`setting`":
            rows[cells[0].strip("`")] = cells[2]
    return rows


def test_readme_settings_table_lists_every_setting_with_its_default():
    rows = _readme_settings_rows()
    settings = {s["name"]: s for s in config.settings()}
    assert set(rows) == set(settings), set(rows) ^ set(settings)
    for name, s in settings.items():
        default = s["default"]
        text = rows[name]
        expected = {True: "true", False: "false"}.get(default, str(default)) if default != "" else '""'
        assert expected in text.replace("`", ""), (name, text, expected)


def test_config_docstring_table_is_the_settings_table():
    doc = type(config).__doc__
    for s in config.settings():
        assert s["name"] in doc and s["env"] in doc, s["name"]
