"""A check is one registry entry: with a measure and a PR row it is run by
`test`, recorded and rendered by `pr`; gating `test` without a measure is refused."""

import argparse
import contextlib
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from unittest.mock import Mock

import pytest
from evidence_fixture import make_kit, mini_fork, synthetic_results, write

from evidence.commands import pr as pr_command
from forktool import checks
from forktool.checks import Check, Measured, all_checks, run_checks
from forktool.commands import test as test_command
from forktool.layout import Layout
from forktool.pins import Pins
from forktool.process import ForkToolError

SAMPLE = """
from forktool.checks import TEST, Check, Measured
def measure(ctx):
    print("the sample check ran")
    return Measured(True, {"found": 7})
def row(result):
    counts = result.counts if result else {}
    return f"| A sample check | — | {counts.get('found', 'not measured')} found |"
CHECKS = (Check("sample", "a sample check", TEST, measure, pr_row=row),)
"""


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    """In a clone whose build/vllm is a small fork, the checks' results there."""
    mini_fork(Layout(tmp_path).fork)
    monkeypatch.setattr("forktool.checks.LAYOUT", Layout(tmp_path))
    return checks.Context(Pins.load(), tmp_path, None, None)  # type: ignore[arg-type]


def wait_for(done, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def check(name: str, measure, **how) -> checks.Check:
    return checks.Check(name, name, checks.TEST, measure, **how)


def test_a_check_added_as_one_entry_runs_in_test_renders_in_pr_a_bad_one_refused(
    ctx, tmp_path, monkeypatch, capsys
):
    clone = Layout(tmp_path)
    fork, store = clone.fork, clone.results
    synthetic_results(store, checks.fork_tree(fork))  # all but the new check's
    (tmp_path / "sample_checks.py").write_text(SAMPLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(checks, "REGISTERED", (*checks.REGISTERED, "sample_checks"))
    monkeypatch.delitem(sys.modules, "sample_checks", raising=False)
    sample = next(c for c in all_checks() if c.name == "sample")
    ran: list[checks.Check] = []  # what `test` would run
    monkeypatch.setattr(test_command, "prepare", lambda pins: "ready")
    monkeypatch.setattr(test_command, "run_checks", lambda c, r, *_: ran.extend(r))
    test_command.run(Pins.load(), argparse.Namespace())
    assert ran[-1] == sample  # after the others, as its plug-in comes last
    with pytest.raises(ForkToolError, match="sample: no result"):
        make_kit(fork, store, clone.kit)  # it gates test: pr needs it
    assert run_checks(ctx, [sample], checks.TEST, 0.0) == 0
    assert "the sample check ran" in capsys.readouterr().out
    recorded = checks.read(store, "sample")
    assert recorded is not None and recorded.counts == {"found": 7}
    make_kit(fork, store, clone.kit)
    shown = (clone.kit / "description.md").read_text()
    assert "| A sample check | — | 7 found |" in shown
    # An entry gating `test` without a measure, or of a taken name, is refused.
    with pytest.raises(ForkToolError, match="'broken' gates `test` but says"):
        check("broken", None)
    module = argparse.Namespace(CHECKS=(check("ruff", lambda ctx: None),))
    monkeypatch.setitem(sys.modules, "twice_checks", module)
    monkeypatch.setattr(checks, "REGISTERED", (*checks.REGISTERED, "twice_checks"))
    with pytest.raises(ForkToolError, match="two checks have the name ruff"):
        checks.all_checks()


def test_a_background_check_runs_while_the_others_run_and_ends_with_the_tool(
    ctx, tmp_path, capsys
):
    """Recorded (a broken one fails); holding no read end of its answer's pipe, its
    write fails (EPIPE) once the tool is gone; it ends when another check raises."""
    started, pid_file = tmp_path / "started", tmp_path / "sleeper"
    broken = Mock(side_effect=RuntimeError("a bug in a check"))

    def in_turn(ctx):
        wait_for(started.exists, "the other check did not run in the background")
        return Measured(True)

    def background(ctx):
        print("said in the background")
        started.touch()
        return Measured(True, {"found": 3})

    def pipes_held(ctx):
        modes: dict[str, set[int]] = {}
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/self/fd/{fd}")
                info = Path(f"/proc/self/fdinfo/{fd}").read_text()
                flags = int(info.split("flags:")[1].split()[0], 8)
                if link.startswith("pipe:"):
                    modes.setdefault(link, set()).add(flags & os.O_ACCMODE)
        both = [pipe for pipe, held in modes.items() if len(held) == 2]
        return Measured(not both, excerpts={"both ends held": " ".join(both)})

    ran = [
        check("in-turn", in_turn),
        check("background", background, background=True),
        check("broken", broken, background=True),
        check("pipes", pipes_held, background=True),
    ]
    assert run_checks(ctx, ran, checks.TEST, 0.0) == 1
    out = capsys.readouterr().out
    assert out.index("=== in-turn ===") < out.index("said in the background")
    assert "RuntimeError: a bug in a check" in out
    clone = Layout(tmp_path)
    assert f"broken ended with status 1: see {clone.logs / 'broken.out'}" in out
    found = checks.read(clone.results, "background")
    assert found and found.ok and found.counts == {"found": 3}
    assert not checks.read(clone.results, "broken").ok  # type: ignore[union-attr]
    assert checks.read(clone.results, "pipes").ok  # type: ignore[union-attr]

    def sleeper(ctx):
        sleeper = subprocess.Popen(["sleep", "60"])
        pid_file.write_text(str(sleeper.pid))
        sleeper.wait()
        return Measured(True)

    def raising(ctx):
        wait_for(pid_file.exists, "the background check did not start")
        raise ForkToolError("a check found bad input")

    ran = [check("sleeper", sleeper, background=True), check("r", raising)]
    with pytest.raises(ForkToolError, match="bad input"):
        run_checks(ctx, ran, checks.TEST, 0.0)
    stat = Path(f"/proc/{pid_file.read_text()}/stat")
    wait_for(lambda: _ended(stat), "the check's process outlived the tool", 10)


def _ended(stat: Path) -> bool:
    """Gone, or ended and not yet reaped by its parent (state Z)."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


@pytest.mark.parametrize(
    "path",
    ["forktool/a.py", "evidence/pr/b.py", "fork_tests/t.py", "fuzz/f.py"]
    + ["fixtures/hf/o/m/config.json"]
    + ["upstream-tests.toml", "mutants-equivalent.toml", "venv.lock"]
    + ["precommit.lock", "pyproject.toml"],
)
def test_what_the_checks_read_beside_the_fork_is_in_each_results_inputs(tmp_path, path):
    """An edit to it makes the results stale (pr refuses them); README's or
    compiled code's do not."""
    layout, file = Layout(tmp_path), write(tmp_path, {path: "a"}) / path
    before = checks.inputs_id(layout)
    write(tmp_path, {"README.md": "a", "evidence/__pycache__/b.pyc": "a"})
    assert checks.inputs_id(layout) == before
    file.write_text("b")
    after = checks.inputs_id(layout)
    changed = [name for name in after if after[name] != before[name]]
    assert changed == [path.split("/")[0]]


def test_a_result_is_stale_by_the_inputs_its_check_reads(tmp_path):
    names = checks.inputs_id(Layout(tmp_path))  # each input, by its name
    said = str(pr_command.__doc__)  # pr --help names each
    assert [n for n in names if not re.search(rf"\b{re.escape(n)}\b", said)] == []
    assert [c.name for c in all_checks() if set(c.reads or ()) - set(names)] == []
    by_name = {c.name: c for c in all_checks()}
    was = dict.fromkeys(names, "a")
    result = checks.CheckResult("c", True, "t", "0.1", "cmd", inputs=was)
    stale = {  # (check, the input edited): stale?
        ("bench", "venv.lock"): True, ("bench", "fork_tests"): True,
        ("bench", "fixtures"): True, ("bench", "fuzz"): False,
        ("gpu-e2e", "upstream-tests.toml"): True, ("gpu-e2e", "venv.lock"): True,
        ("gpu-e2e", "fixtures"): False, ("planner-fuzz", "pyproject.toml"): True,
        ("bench", "evidence"): False, ("gpu-e2e", "forktool"): False,
        ("planner-fuzz", "forktool"): True, ("ci-impact", "evidence"): True,
    }  # fmt: skip
    for (name, edited), expected in stale.items():
        said = checks.problem(result, by_name[name], "t", was | {edited: "b"})
        assert bool(said) == expected, (name, edited)
        assert not said or f"with another {edited}; run `cmd`" in said
    older = checks.CheckResult("c", True, "t", "0.1", "cmd", inputs=dict(names))
    del older.inputs["evidence"]  # recorded before the tool's code was an input
    assert "with another evidence" in checks.problem(
        older, by_name["ci-impact"], "t", names
    )
    nothing = Check("c", "c", "cmd", gates_test=False, reads=())
    assert checks.problem(result, nothing, "t", was | {"fuzz": "b"}) == ""
    store = tmp_path / "results"  # a file from before inputs were recorded
    old = checks.CheckResult("planner-fuzz", True, "t", "0.1", "cmd")
    old.inputs = "x"  # type: ignore[assignment]
    checks.write(store, old)
    said = checks.problem(checks.read(store, old.check), by_name[old.check], "t", was)
    assert "fuzz: stale, measured on 20" in said and "no record of its" in said
    (store / "listed.json").write_text("[]")
    with pytest.raises(ForkToolError, match="listed.json is not a results file"):
        checks.read(store, "listed")
    fuzz = tmp_path / "fuzz"  # an input's id tells a file's name from its content
    write(fuzz, {"ab": "c"})
    before = checks.inputs_id(Layout(tmp_path))
    (fuzz / "ab").rename(fuzz / "a")
    (fuzz / "a").write_text("bc")
    assert checks.inputs_id(Layout(tmp_path)) != before
    before = checks.inputs_id(Layout(tmp_path))
    (fuzz / "a").rename(fuzz / "b")  # the same content
    assert checks.inputs_id(Layout(tmp_path)) != before
