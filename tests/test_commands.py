"""The command line: help, exit statuses, the programs each command needs (in
one line), `env`, `run`, the matrix table and the tool run by its path."""

import argparse
import importlib.util
import shutil
import subprocess
import sys
from unittest.mock import Mock

import pytest
from evidence_fixture import programs, write
from fork_fixture import THREE, git, refused

from evidence import ci_impact, cli, precommit_install
from evidence.matrix import table as _table
from forktool import advice, commands, prerequisites, venv
from forktool.__main__ import main
from forktool.checks import all_checks
from forktool.commands import COMMANDS, Command
from forktool.layout import REPO, Layout
from forktool.pins import Pins, uv_path
from forktool.process import ConflictError, ForkToolError
from forktool.pytest_runner import Result


def test_env_prints_the_exact_export_lines(tmp_path):
    env = tmp_path / "venv"
    lines = venv.export_lines(venv.user_env(env, tmp_path / "hf home", gpu=False))
    shell = 'eval "$(cat)"; echo "$VLLM_TARGET_DEVICE|$HF_HOME|$HF_HUB_OFFLINE|$PATH"'
    ran = subprocess.run(["bash", "-c", shell], input=lines, capture_output=True,
                         text=True, check=True)  # fmt: skip
    device, hf_home, offline, path = ran.stdout.strip().split("|")
    assert (device, hf_home, offline) == ("cpu", str(tmp_path / "hf home"), "1")
    assert path.startswith(f"{env}/bin:") and len(path) > len(f"{env}/bin:")
    # With a GPU the device is left to vLLM.
    assert "VLLM_TARGET_DEVICE" not in venv.user_env(env, tmp_path, gpu=True)


def test_run_needs_the_venv_runs_its_programs_and_passes_the_exit_status(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr("forktool.commands.run.LAYOUT", Layout(tmp_path))
    env = tmp_path / "build" / ".venv"
    assert main(["run", "--", "true"]) == 1  # no venv: a clear error
    err = capsys.readouterr().err
    assert f"{env} does not exist; run `python3 -m forktool install`" in err
    probe = 'echo "$PWD $VIRTUAL_ENV $HF_HUB_OFFLINE" > out\nexit 4'
    programs(env / "bin", probe=probe)  # not on PATH: found in the venv's bin/
    (env / venv.COMPLETE).write_text("lock digest\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "-C", str(env), "--", "probe"]) == 4
    assert (env / "out").read_text() == f"{env} {env} 1\n"
    assert f"venv {env} (no editable vLLM yet)" in capsys.readouterr().err
    assert main(["run", "--", "probe"]) == 4 and (tmp_path / "out").exists()


def test_the_matrix_table_fits_120_columns_with_a_legend():
    long = "tests/v1/engine/test_kv_zeroing_contract.py::test_" + "x" * 150 + "[p]"
    short = "tests/v1/core/test_kv_cache_utils.py::test_zeroing"
    columns = {"base+tests": Result({long: "failed", short: "failed"})}
    for n in range(1, 10):
        outcomes = {long: "passed"} | ({short: "skipped"} if n > 2 else {})
        columns[f"{n:04d}"] = Result(outcomes)
    lines = _table(columns).splitlines()
    assert max(map(len, lines)) <= 120
    row = next(line for line in lines if "test_zeroing" in line)
    assert row.split()[1:] == ["FAIL", "-", "-"] + ["skip"] * 7
    assert any(line.startswith("base: the pristine base's code") for line in lines)
    assert any("- not present at that patch" in line for line in lines)


def test_every_command_says_what_it_refuses_and_writes_and_each_option_why(capsys):
    for name in COMMANDS:
        with pytest.raises(SystemExit) as exit_status:
            main([name, "--help"])
        assert exit_status.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        assert "Writes" in text and "refuse" in text.lower()
        parser = argparse.ArgumentParser()
        commands.command(name).options(parser)
        for action in parser._actions:
            assert action.help, f"{name} {action.dest}: no help"


@pytest.mark.parametrize(
    "module, work", [(ci_impact, "report"), (precommit_install, "write_lock")]
)
def test_the_evidence_modules_run_by_path_refuse_bad_arguments_doing_nothing(
    module, work, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(module, work, Mock(side_effect=AssertionError(f"{work} ran")))
    for argv, status in (["--help"], 0), (["--bogus"], 2), ([str(tmp_path / "no")], 2):
        with pytest.raises(SystemExit) as exit_status:
            module.main(argv)
        assert exit_status.value.code == status
    out, err = capsys.readouterr()
    assert module.__doc__.splitlines()[0] in out
    assert "unrecognized arguments: --bogus" in err and "no is not a folder" in err


def test_a_conflict_exits_3_other_errors_1_and_the_readme_says_usage_errors_2(
    monkeypatch, capsys
):
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "Exit status: 0 done, 1 refused or failed" in readme
    assert "2 a usage error" in readme
    raised = {ConflictError: (3, "stopped"), ForkToolError: (1, "error"),
              OSError: (1, "error")}  # fmt: skip
    for error, (status, word) in raised.items():
        again = " (fix that, then run the command again)" if error is OSError else ""
        said = f"{word}: stopped{again}\n"
        # No lock: `test` holds this clone's while it runs these tests.
        fail = Mock(side_effect=error("stopped"))
        failing = Command("d", fail, locks=False)
        monkeypatch.setattr(commands, "command", lambda name, f=failing: f)
        assert main(["sync"]) == status
        assert capsys.readouterr().err == said
        # The evidence modules' command lines report as the tool does.
        assert cli.main("m", None, [str(REPO)], fail) == status
        assert capsys.readouterr().err == said
    # A Python without tarfile's extraction filters is refused.
    monkeypatch.setattr(sys, "version_info", (3, 11, 2, "final", 0))
    assert main(["sync"]) == 1
    out = capsys.readouterr().out
    assert out == "error: the tool needs Python 3.11.4 or later, not 3.11.2\n"


def test_malformed_pins_name_the_missing_field(tmp_path):
    lines = (REPO / "pins.toml").read_text().splitlines(keepends=True)
    no_author = "".join(x for x in lines if not x.startswith("author = "))
    broken = tmp_path / "pins.toml"
    for text, said in ((no_author, "lacks `fork.author`"), ("[base\n", "cannot read")):
        broken.write_text(text)
        with pytest.raises(ForkToolError, match=said):
            Pins.load(broken)


@pytest.mark.parametrize("where", ["inside the fork", "any folder"])
def test_the_tool_run_by_its_path_uses_its_clones_paths(tmp_path, monkeypatch, where):
    """A copy of the tool is a clone of its own: every path it uses is there."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPATH", raising=False)
    clone = tmp_path / "clone"
    shutil.copytree(REPO / "forktool", clone / "forktool",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(REPO / "pins.toml", clone)
    (inside := clone / "build" / "vllm" / "vllm").mkdir(parents=True)
    write(clone, {"patches/series": "# empty\n"})
    git(clone, "init", "-q")
    cwd, tool = (inside, "../../../forktool") if where == "inside the fork" else (
        tmp_path, str(clone / "forktool"))  # fmt: skip

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        ran = subprocess.run([sys.executable, *args], cwd=cwd,
                             capture_output=True, text=True)  # fmt: skip
        print(ran.stdout, ran.stderr)
        assert "Traceback" not in ran.stderr
        return ran

    by_module = run("-m", "forktool", "export", "--check")
    assert by_module.returncode == 1 and "No module named forktool" in by_module.stderr
    helped = run(tool, "--help")
    assert helped.returncode == 0 and "usage:" in helped.stdout
    nowhere = run(tool, "run", "-C", str(tmp_path / "nope"), "--", "true")
    assert nowhere.returncode == 1 and "no such folder" in nowhere.stderr
    checked, fork = run(tool, "export", "--check"), clone / "build" / "vllm"
    assert checked.returncode == 1
    assert checked.stderr == f"error: {fork} is not a fork tree; run `sync` first\n"
    assert (clone / "build" / "forktool.lock").exists()  # the clone's, not REPO's
    assert not (tmp_path / "cache").exists()


def hide(monkeypatch, *names: str) -> None:
    """This machine without the programs and Python modules `names`."""
    which, find_spec = shutil.which, importlib.util.find_spec
    hidden = {shutil: ("which", which), importlib.util: ("find_spec", find_spec)}
    for module, (name, real) in hidden.items():
        found = lambda n, *a, real=real, **k: None if n in names else real(n, *a)  # noqa: E731
        monkeypatch.setattr(module, name, found)


def lacks(command: str, needs: list[prerequisites.Program]) -> str:
    said = refused(lambda: prerequisites.require(command, needs))
    assert "\n" not in said  # one line
    return said


def test_setup_and_test_name_every_missing_program_in_one_line(tmp_path, monkeypatch):
    """git always; pip while the cache lacks uv; the pinned Python while there
    is no venv; what the checks that gate `test` need."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))  # empty
    pins, env = Pins.load(), tmp_path / "venv"
    gating = [p for c in all_checks() if c.gates_test for p in c.needs]
    python = f"Python {pins.python} (python{pins.python})"
    names = [p.name for p in prerequisites.for_setup(pins, env)]
    assert names == ["git", prerequisites.PIP.name, python]
    hide(monkeypatch, "npm", "node", "pip", "ensurepip")
    said = lacks("test", prerequisites.for_test(pins, gating, env))
    assert said.startswith("`test` needs what this machine lacks: ")
    assert all(name in said for name in ("Node.js (node)", "npm, for", "pip for"))
    assert "git" not in said.replace("markdownlint", "")  # git is there
    # uv in the cache and the venv made: setup needs only git, test no pip.
    for path in (uv_path(pins), env / "bin" / "python"):
        path.parent.mkdir(parents=True)
        path.write_text("")
    assert prerequisites.for_setup(pins, env) == [prerequisites.GIT]
    prerequisites.require("setup", [prerequisites.GIT])  # the tool's tests have git
    said = lacks("test", prerequisites.for_test(pins, gating, env))
    assert "npm" in said and "pip" not in said
    hide(monkeypatch, "git")
    said = lacks("setup", [prerequisites.GIT])
    assert said.startswith("`setup` needs what this machine lacks: git, for the fork")


@pytest.mark.parametrize(
    "argv",
    [["sync", "--froce"], ["sync", "extra-arg"], ["sync", "--f"], ["export", "--c"],
     ["backups", "--p"],  # no option is abbreviated
     ["snyc"], []],
)  # fmt: skip
def test_a_usage_error_exits_2_with_the_commands_usage(capsys, argv):
    with pytest.raises(SystemExit) as exit_status:
        main(argv)
    assert exit_status.value.code == 2
    err = capsys.readouterr().err
    if len(argv) < 2:  # an unknown or missing command: it reads as <command>
        assert "command_name" not in err and "<command>" in err
        return
    options = " [--force]" if argv[0] == "sync" else ""
    assert err.startswith(f"usage: python3 -m forktool {argv[0]} [-h]{options}")
    said = f"python3 -m forktool {argv[0]}: error: unrecognized arguments: {argv[1]}"
    assert said in err


def test_a_git_revert_of_a_patch_is_told_how_to_drop_it(ws):
    ws.series_of(*THREE)
    git(ws.tree, "revert", "--no-edit", "HEAD~1")  # [Core] Second, patch 2
    exported, names = ws.export(), ws.names()
    assert f"warning: {names[3]}: reverts patch 2 ({names[1]})" in exported
    assert names[3].startswith("0004-Revert-Core-Second")
    assert advice.revert_hints(ws.tree, names) == [
        f"warning: {names[3]}: reverts patch 2 ({names[1]}): to drop patch 2, "
        f"`git -C {ws.tree} rebase -i base` and delete its line and this "
        "revert's (a revert keeps both in the series)"
    ]
    # Reworded, its "This reverts commit" gone: found by the quoted subject.
    git(ws.tree, "commit", "-q", "--amend", "-m", 'Revert "[Core] Second"')
    assert len(advice.revert_hints(ws.tree, names)) == 1
    # A revert of nothing in the series: no hint.
    message = 'Revert "[Core] Elsewhere"\n\nThis reverts commit 1234567.'
    git(ws.tree, "commit", "-q", "--amend", "-m", message)
    assert advice.revert_hints(ws.tree, names) == []
