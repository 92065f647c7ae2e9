"""Command line: python3 -m forktool <command>."""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from forktool import ci_impact, fork, hfcache, matrix, pr, precommit, results
from forktool.errors import ForkToolError
from forktool.pins import REPO, Pins, fetch
from forktool.results import Measured
from forktool.upstream import Runner, Selection, parse_junit, test_env
from forktool.venv import ensure_venv, install_fork, python

BUILD = REPO / "build"
FORK = BUILD / "vllm"
TREES = BUILD / "trees"
PATCHES = REPO / "patches"
FIXTURES = REPO / "fixtures" / "hf"
SELECTION = REPO / "upstream-tests.toml"
RESULTS = BUILD / "results"


def cmd_sync(pins: Pins, args: argparse.Namespace) -> None:
    message = (
        f"{pins.project} {pins.version}\n\n"
        f"The pristine {pins.sdist.filename}, sha256 {pins.sdist.sha256}.\n"
    )
    # pip needs vLLM's build requirements (torch) to read the sdist's metadata.
    sdist = lambda: fetch(pins, pins.sdist, python(ensure_venv(pins)))  # noqa: E731
    print(
        fork.sync(
            FORK, PATCHES, pins.author, message, sdist, pins.generated, args.force
        )
    )


def cmd_export(pins: Pins, args: argparse.Namespace) -> None:
    print(fork.export(FORK, PATCHES))


def cmd_install(pins: Pins, args: argparse.Namespace) -> Path:
    venv = ensure_venv(pins)
    install_fork(pins, venv, FORK)
    return venv


def _runner(venv: Path) -> Runner:
    selection = Selection.load(SELECTION)
    ids = hfcache.lay_out(FIXTURES, BUILD / "hf-home")
    print(f"HF cache {BUILD / 'hf-home'}: {', '.join(ids)}")
    return Runner(venv, FIXTURES, BUILD / "hf-home", selection.excluded, BUILD / "logs")


def _prepare(pins: Pins) -> Path:
    """sync + install, both idempotent; show the fork in use."""
    cmd_sync(pins, argparse.Namespace(force=False))
    venv = cmd_install(pins, argparse.Namespace())
    version = subprocess.run(
        [str(venv / "bin" / "vllm"), "--version"],
        env=test_env(BUILD / "hf-home"),
        capture_output=True,
        text=True,
    )
    print(f"vllm --version (from {FORK}): {version.stdout.strip() or version.stderr}")
    serve = subprocess.run(
        [str(venv / "bin" / "vllm"), "serve", "--help"],
        env=test_env(BUILD / "hf-home"),
        capture_output=True,
    )
    print(f"vllm serve --help: exit status {serve.returncode}")
    if version.returncode != 0 or serve.returncode != 0:
        raise ForkToolError("vllm --version or vllm serve --help failed")
    return venv


def cmd_setup(pins: Pins, args: argparse.Namespace) -> bool:
    start = time.monotonic()
    venv = _prepare(pins)
    prepared = time.monotonic() - start
    check = ("regression matrix", "regression-matrix", lambda: _matrix(pins, venv))
    return _run_checks(pins, [check], "python3 -m forktool setup", prepared)


def cmd_test(pins: Pins, args: argparse.Namespace) -> bool:
    start = time.monotonic()
    venv = _prepare(pins)
    prepared = time.monotonic() - start
    runner = _runner(venv)
    selection = Selection.load(SELECTION)
    checks: list[tuple[str, str, Callable[[], Measured]]] = [
        ("tool tests", "tool-tests", lambda: _pytest(venv, "tests")),
        (
            "regression matrix",
            "regression-matrix",
            lambda: matrix.regression_matrix(
                FORK, TREES, runner, selection, pins.author
            ),
        ),
        (
            "GPU-only tests collected, skipped here",
            "gpu-only",
            lambda: matrix.gpu_only_skipped(FORK, runner, selection),
        ),
        (
            "vLLM CI checkers",
            "ci-checkers",
            lambda: ci_impact.run_checkers(FORK, python(venv)),
        ),
        ("CI impact report", "ci-impact", lambda: _ci_impact(venv)),
        (
            "vLLM pre-commit",
            "pre-commit",
            lambda: precommit.run_precommit(FORK, TREES / "pre-commit"),
        ),
        ("planner fuzz", "planner-fuzz", lambda: _pytest(venv, "fuzz", "-s")),
        (
            "planner fuzz catches the base",
            "fuzz-catches-base",
            lambda: _fuzz_catches_base(venv),
        ),
        (
            "upstream selection, fork vs base",
            "upstream-selection",
            lambda: matrix.suite_vs_base(FORK, TREES, runner, selection),
        ),
    ]
    return _run_checks(pins, checks, "python3 -m forktool test", prepared)


def _run_checks(
    pins: Pins,
    checks: list[tuple[str, str, Callable[[], Measured]]],
    command: str,
    prepared: float,
) -> bool:
    """Run each check, write its result to build/results/, print a summary."""
    tree = results.fork_tree(FORK)
    written = []
    for title, name, check in checks:
        print(f"\n=== {title} ===", flush=True)
        start = time.monotonic()
        found = check()
        result = results.CheckResult(
            name,
            found.ok,
            tree,
            pins.version,
            command,
            seconds=round(time.monotonic() - start, 1),
            counts=found.counts,
            excerpts=found.excerpts,
            data=found.data,
        )
        results.write(RESULTS, result)
        written.append((title, result))
    print(f"\n=== summary (results in {RESULTS}) ===")
    print(f"{'':4}  {prepared:6.0f} s  prepare (sync, install, vllm --version)")
    for title, result in written:
        print(f"{'PASS' if result.ok else 'FAIL'}  {result.seconds:6.0f} s  {title}")
    return all(result.ok for _, result in written)


def _matrix(pins: Pins, venv: Path) -> Measured:
    selection = Selection.load(SELECTION)
    return matrix.regression_matrix(FORK, TREES, _runner(venv), selection, pins.author)


def _tee(cmd: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run `cmd` in this repository, printing its output as it comes; return
    its exit status and output."""
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert proc.stdout is not None
    lines = []
    for raw in proc.stdout:
        line = raw.decode(errors="replace")
        print(line, end="", flush=True)
        lines.append(line)
    return proc.wait(), "".join(lines)


def _pytest(venv: Path, *args: str) -> Measured:
    """This repository's own tests, in the fork's venv (pytest, vLLM for fuzz)."""
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp, "junit.xml")
        cmd = [python(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
        code, output = _tee([*cmd, f"--junitxml={junit}"], test_env(BUILD / "hf-home"))
        counts = parse_junit(REPO, junit).counts() if junit.exists() else {}
    shown = shlex.join(["python", *cmd[1:]])
    tail = "\n".join(output.strip().splitlines()[-15:])
    return Measured(code == 0, dict(counts), {"output": f"$ {shown}\n{tail}"})


def _fuzz_catches_base(venv: Path) -> Measured:
    """The fuzz's invariants, with the pristine base as the candidate, must fail."""
    cmd = [python(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", "fuzz", "-s"]
    env = {**test_env(BUILD / "hf-home"), "FUZZ_AGAINST": "base"}
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    shrunk = [line for line in run.stdout.splitlines() if "_violated" in line]
    print("\n".join(shrunk) or run.stdout[-3000:])
    ok = run.returncode != 0 and any("agree" in line for line in shrunk)
    shown = shlex.join(["FUZZ_AGAINST=base", "python", *cmd[1:]])
    output = "\n".join(shrunk) or run.stdout[-3000:]
    return Measured(ok, {"violations": len(shrunk)}, {"base": f"$ {shown}\n{output}"})


def _ci_impact(venv: Path) -> Measured:
    """The report reads Buildkite YAML, so it runs in the venv (PyYAML)."""
    cmd = [python(venv), "-m", "forktool.ci_impact", "--fork", str(FORK)]
    run = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    print(run.stdout + run.stderr, end="")
    shown = "python -m forktool.ci_impact --fork build/vllm"
    return Measured(run.returncode == 0, data={"report": run.stdout, "command": shown})


def cmd_pr(pins: Pins, args: argparse.Namespace) -> None:
    print(
        pr.make_kit(
            FORK,
            RESULTS,
            BUILD / "pr",
            REPO / "pr" / "description.toml",
            REPO / "REVIEW.md",
            pins.version,
            pins.author,
            args.signoff,
            args.allow_partial,
            pr.markdownlint,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m forktool", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sync = sub.add_parser("sync", help="materialise build/vllm: base + series")
    sync.add_argument(
        "--force",
        action="store_true",
        help="rebuild a fork whose commits differ from the series "
        "(they are kept on a backup branch)",
    )
    sync.set_defaults(run=cmd_sync)
    for name, run, text in [
        ("export", cmd_export, "write build/vllm's commits back to patches/"),
        ("install", cmd_install, "create the cached venv, install the fork into it"),
        ("setup", cmd_setup, "sync, install, show the fork, run the regression matrix"),
        ("test", cmd_test, "everything setup does, plus every check CI runs"),
    ]:
        sub.add_parser(name, help=text).set_defaults(run=run)
    kit = sub.add_parser(
        "pr", help="write build/pr/: PR description, series, apply-to-vllm.sh"
    )
    kit.add_argument(
        "--signoff",
        metavar='"NAME <EMAIL>"',
        help="re-sign the kit's series (never patches/) for this submitter, "
        "with the AI-attribution trailer",
    )
    kit.add_argument(
        "--allow-partial",
        action="store_true",
        help='render without missing or stale results, marked "not measured"',
    )
    kit.set_defaults(run=cmd_pr)
    args = parser.parse_args(argv)
    try:
        ok = args.run(Pins.load(), args)
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 1 if ok is False else 0


if __name__ == "__main__":
    sys.exit(main())
