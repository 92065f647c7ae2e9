"""Command line: python3 -m forktool <command>."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from forktool import bench, ci_impact, fork, hfcache, matrix, precommit
from forktool.errors import ForkToolError
from forktool.pins import REPO, Pins, fetch
from forktool.upstream import Runner, Selection, test_env
from forktool.venv import ensure_venv, install_fork, python

BUILD = REPO / "build"
FORK = BUILD / "vllm"
TREES = BUILD / "trees"
PATCHES = REPO / "patches"
FIXTURES = REPO / "fixtures" / "hf"
SELECTION = REPO / "upstream-tests.toml"


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
    return _matrix(pins, _prepare(pins))


def cmd_test(pins: Pins, args: argparse.Namespace) -> bool:
    venv = _prepare(pins)
    runner = _runner(venv)
    selection = Selection.load(SELECTION)
    checks: list[tuple[str, Callable[[], bool]]] = [
        ("tool tests", lambda: _pytest(venv, "tests")),
        (
            "regression matrix",
            lambda: matrix.regression_matrix(
                FORK, TREES, runner, selection, pins.author
            ),
        ),
        (
            "GPU-only tests collected, skipped here",
            lambda: matrix.gpu_only_skipped(FORK, runner, selection),
        ),
        ("vLLM CI checkers", lambda: ci_impact.run_checkers(FORK, python(venv))),
        ("CI impact report", lambda: _ci_impact(venv)),
        (
            "vLLM pre-commit",
            lambda: precommit.run_precommit(FORK, TREES / "pre-commit"),
        ),
        ("planner fuzz", lambda: _pytest(venv, "fuzz", "-s")),
        ("planner fuzz catches the base", lambda: _fuzz_catches_base(venv)),
        (
            "upstream selection, fork vs base",
            lambda: matrix.suite_vs_base(FORK, TREES, runner, selection),
        ),
    ]
    results = {}
    for name, check in checks:
        print(f"\n=== {name} ===", flush=True)
        results[name] = check()
    print("\n=== summary ===")
    for name, ok in results.items():
        print(f"{'PASS' if ok else 'FAIL'}  {name}")
    return all(results.values())


def _matrix(pins: Pins, venv: Path) -> bool:
    selection = Selection.load(SELECTION)
    return matrix.regression_matrix(FORK, TREES, _runner(venv), selection, pins.author)


def _pytest(venv: Path, *args: str) -> bool:
    """This repository's own tests, in the fork's venv (pytest, vLLM for fuzz)."""
    cmd = [python(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    env = test_env(BUILD / "hf-home")
    return subprocess.run(cmd, cwd=REPO, env=env).returncode == 0


def _fuzz_catches_base(venv: Path) -> bool:
    """The fuzz's invariants, with the pristine base as the candidate, must fail."""
    cmd = [python(venv), "-m", "pytest", "-q", "-p", "no:cacheprovider", "fuzz", "-s"]
    env = {**test_env(BUILD / "hf-home"), "FUZZ_AGAINST": "base"}
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    shrunk = [line for line in run.stdout.splitlines() if "_violated" in line]
    print("\n".join(shrunk) or run.stdout[-3000:])
    return run.returncode != 0 and any("agree" in line for line in shrunk)


def _ci_impact(venv: Path) -> bool:
    """The report reads Buildkite YAML, so it runs in the venv (PyYAML)."""
    cmd = [python(venv), "-m", "forktool.ci_impact", "--fork", str(FORK)]
    return subprocess.run(cmd, cwd=REPO).returncode == 0


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
    bench.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        ok = args.run(Pins.load(), args)
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 1 if ok is False else 0


if __name__ == "__main__":
    sys.exit(main())
