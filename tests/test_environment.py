"""The fork's environment (`env`, `run`) and the regression matrix's table:
no vLLM, no network."""

from __future__ import annotations

import subprocess

import pytest

from evidence.matrix import table as _table
from forktool import venv
from forktool.__main__ import main
from forktool.commands import COMMANDS
from forktool.layout import Layout
from forktool.pytest_runner import Result


def test_issue_5_env_prints_the_exact_export_lines(tmp_path):
    env = tmp_path / "venv"
    variables = venv.user_env(env, tmp_path / "hf home", gpu=False)
    lines = venv.export_lines(variables)
    print(lines)
    shell = 'eval "$(cat)"; echo "$VLLM_TARGET_DEVICE|$HF_HOME|$HF_HUB_OFFLINE|$PATH"'
    out = subprocess.run(
        ["bash", "-c", shell], input=lines, capture_output=True, text=True, check=True
    ).stdout.strip()
    device, hf_home, offline, path = out.split("|")
    assert (device, hf_home, offline) == ("cpu", str(tmp_path / "hf home"), "1")
    assert path.startswith(f"{env}/bin:") and len(path) > len(f"{env}/bin:")
    # With a GPU the device is left to vLLM.
    assert "VLLM_TARGET_DEVICE" not in venv.user_env(env, tmp_path, gpu=True)


def test_issue_5_run_uses_the_venv_and_keeps_the_directory(tmp_path, monkeypatch):
    env = tmp_path / "venv"
    (env / "bin").mkdir(parents=True)
    tool = env / "bin" / "probe"
    tool.write_text('#!/bin/sh\necho "$PWD $HF_HUB_OFFLINE" > out.txt\nexit 3\n')
    tool.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    assert venv.run_in(venv.user_env(env, tmp_path, gpu=False), ["probe"]) == 3
    assert (tmp_path / "out.txt").read_text() == f"{tmp_path} 1\n"


def test_issue_5_run_command_needs_the_venv_and_passes_the_exit_status(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr("forktool.commands.run.LAYOUT", Layout(tmp_path))
    env = tmp_path / "build" / ".venv"
    assert main(["run", "--", "true"]) == 1  # no venv: a clear error
    (env / "bin").mkdir(parents=True)
    (env / venv.COMPLETE).write_text("lock digest\n")
    out = tmp_path / "out.txt"
    command = f'echo "$VIRTUAL_ENV $HF_HUB_OFFLINE" > {out}; exit 4'
    assert main(["run", "-C", str(tmp_path), "--", "sh", "-c", command]) == 4
    assert out.read_text() == f"{env} 1\n"
    assert f"venv {env} (no editable vLLM yet)" in capsys.readouterr().err


def test_issue_7_matrix_table_fits_120_columns_with_a_legend():
    long = "tests/v1/engine/test_kv_zeroing_contract.py::test_" + "x" * 150 + "[p]"
    short = "tests/v1/core/test_kv_cache_utils.py::test_zeroing"
    columns = {"base+tests": Result({long: "failed", short: "failed"})}
    for n in range(1, 10):
        outcomes = {long: "passed"} | ({short: "skipped"} if n > 2 else {})
        columns[f"{n:04d}"] = Result(outcomes)
    table = _table(columns)
    print(table)
    lines = table.splitlines()
    assert max(map(len, lines)) <= 120
    row = next(line for line in lines if "test_zeroing" in line)
    assert row.split()[1:] == ["FAIL", "-", "-"] + ["skip"] * 7
    assert any(line.startswith("base: the pristine base's code") for line in lines)
    assert any("- not present at that patch" in line for line in lines)


def test_issue_7_every_command_says_what_it_refuses_and_writes(capsys):
    for name in COMMANDS:
        with pytest.raises(SystemExit) as exit_status:
            main([name, "--help"])
        assert exit_status.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "Writes" in text and "refuse" in text.lower()
