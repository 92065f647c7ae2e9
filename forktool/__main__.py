"""Command line: python3 -m forktool <command>."""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from forktool import (
    bench,
    ci_impact,
    fork,
    hfcache,
    matrix,
    mutate,
    pr,
    precommit,
    results,
)
from forktool.errors import ForkToolError
from forktool.pins import REPO, Pins, fetch
from forktool.results import Measured
from forktool.upstream import Runner, Selection, parse_junit, test_env
from forktool.venv import (
    COMPLETE,
    ensure_venv,
    export_lines,
    install_fork,
    python,
    run_in,
    size,
    stale,
    user_env,
    venv_dir,
)

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
    print(f"venv: {venv}")
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
        (
            "out-of-tree override patterns",
            "overrides",
            lambda: matrix.override_patterns(FORK, TREES, runner),
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
            Selection.load(SELECTION).regression,
        )
    )


COMMANDS = {
    "sync": (
        "materialise build/vllm: base + series, or bring it up to date",
        "Materialise build/vllm as the pinned base (commit tagged `base`) plus one "
        "commit per patch of patches/series, or bring an existing fork up to date. "
        "It compares the fork's patches with the series (git patch-id --stable, "
        "subjects) and reports, per patch, which side changed. It updates the fork "
        "when only the series changed (a teammate added, changed or dropped a "
        "patch), and rebuilds it with `git am -3` when pins.toml names another "
        "base; the fork's previous commits stay on a backup/<time> branch. It "
        "refuses, changing nothing, while a git operation (am, rebase, "
        "cherry-pick, revert, merge, bisect) is stopped in the fork, while the "
        "fork has uncommitted changes, while it holds work the series lacks (run "
        "export), and when both sides changed. Writes: build/vllm, "
        "build/logs/sync-git-am.log, the sdist download in the cache.",
    ),
    "export": (
        "write build/vllm's commits back to patches/",
        "Write build/vllm's commits since `base` to patches/ as normalised "
        "`git format-patch` files and rewrite patches/series; exporting an "
        "unchanged fork changes nothing. It warns about commits without a "
        "Signed-off-by: matching their author and subjects not in vLLM's "
        "`[Area] Subject` style. It refuses, changing nothing, while a git "
        "operation is stopped in the fork, while the fork has uncommitted "
        "changes, when the series has changes the fork lacks (run sync), and "
        "when it would delete a patch file, or overwrite one it did not write, "
        "that is not committed in this repository. Writes: patches/ only.",
    ),
    "install": (
        "create the cached venv, install the fork into it",
        "Create the venv for these pins (vLLM's dependencies from the pinned "
        "wheel) unless it is cached, and install build/vllm into it, editable, "
        "with VLLM_USE_PRECOMPILED=1. The venv is shared by every clone with the "
        "same pins: installing points it at this clone's build/vllm and says "
        "which clone it pointed at before. It refuses a download whose sha256 "
        "differs from pins.toml (nothing is unpacked). Writes: the venv and "
        "downloads under "
        "${VLLM_FORK_CACHE:-~/.cache/vllm-fork}, build outputs in build/vllm "
        "(ignored by git).",
    ),
    "setup": (
        "sync, install, show the fork, run the regression matrix",
        "sync, then install, then show `vllm --version` from the fork and run "
        "the series' regression matrix. Refuses what sync refuses. Writes what "
        "sync and install write, and build/trees, build/logs, build/hf-home.",
    ),
    "test": (
        "everything setup does, plus every check CI runs",
        "Everything setup does, then the tool's tests, the GPU-only tests "
        "(collected, skipped here), vLLM's CI checkers and pre-commit, the CI "
        "impact report, the out-of-tree override checks, the planner fuzz, and "
        "vLLM's CPU selection on the fork (the pristine base runs only what does "
        "not pass there); prints a summary with each phase's time. Refuses what "
        "sync refuses. Writes what setup writes, and one result per check in "
        "build/results/ (what `pr` renders).",
    ),
    "env": (
        "print the shell lines for the fork's environment",
        'Print `export` lines, for eval "$(python3 -m forktool env)": the cached '
        "venv (VIRTUAL_ENV, PATH), VLLM_TARGET_DEVICE=cpu where there is no GPU "
        "(no nvidia-smi), HF_HOME=build/hf-home with the fixtures' configs, "
        "HF_HUB_OFFLINE=1. It refuses nothing and installs nothing (run install). "
        "Writes: build/hf-home.",
    ),
    "run": (
        "run a command in the fork's environment",
        "Run a command in the environment `env` prints, in the current "
        "directory or the one -C names, e.g. `python3 -m forktool run -C "
        "build/vllm -- pytest tests/v1/core/test_kv_cache_utils.py -k zeroing`. "
        "Exits with the command's status. Refuses when the venv is missing (run "
        "install). Writes: build/hf-home, and whatever the command writes.",
    ),
    "cache": (
        "list (and remove) venvs and downloads of other pins",
        "List the venvs and downloads in ${VLLM_FORK_CACHE:-~/.cache/vllm-fork} "
        "that this clone's pins.toml does not use (old pins), with their sizes; "
        "--remove deletes them. A clone or branch on other pins downloads and "
        "builds again what it needs. It refuses to list or remove what this "
        "clone's pins use. Writes: nothing without --remove.",
    ),
    "pr": (
        "write build/pr/: PR description, series, apply-to-vllm.sh",
        "Render the upstream PR kit from the results `setup` and `test` wrote to "
        "build/results/: description.md (vLLM's PR template, checked with vLLM's "
        "markdownlint settings), series/ (format-patch with a cover letter) and "
        "apply-to-vllm.sh. It refuses, writing nothing, when a result is missing "
        "or was measured on another tree than the fork's HEAD, and names the "
        "command that refreshes it. Writes: build/pr/ only; never patches/.",
    ),
}


def _hf_home() -> Path:
    """build/hf-home, laid out unless it is (setup and test refresh it; a run
    in progress may be reading it)."""
    if not (BUILD / "hf-home" / "hub").exists():
        hfcache.lay_out(FIXTURES, BUILD / "hf-home")
    return BUILD / "hf-home"


def cmd_env(pins: Pins, args: argparse.Namespace) -> None:
    venv = venv_dir(pins)
    _hf_home()
    if not (venv / COMPLETE).exists():
        print(f"# {venv} does not exist yet: run `python3 -m forktool install`")
    print(export_lines(user_env(venv, BUILD / "hf-home")))


def cmd_run(pins: Pins, args: argparse.Namespace) -> int:
    venv = venv_dir(pins)
    if not (venv / COMPLETE).exists():
        raise ForkToolError(f"{venv} does not exist; run `python3 -m forktool install`")
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise ForkToolError("nothing to run: python3 -m forktool run -- <command>")
    _hf_home()
    variables = user_env(venv, BUILD / "hf-home")
    return run_in(variables, command, args.directory)


def cmd_cache(pins: Pins, args: argparse.Namespace) -> None:
    old = stale(pins)
    print(f"in use by {REPO / 'pins.toml'}: {venv_dir(pins)}")
    for path in old:
        print(f"{'removing' if args.remove else 'stale'}  {path}  {size(path)} bytes")
        if args.remove:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if not old:
        print("nothing stale")
    elif not args.remove:
        print("remove them with `python3 -m forktool cache --remove`")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m forktool", description=__doc__)
    sub = parser.add_subparsers(dest="command_name", required=True)
    runs = {
        "sync": cmd_sync,
        "export": cmd_export,
        "install": cmd_install,
        "setup": cmd_setup,
        "test": cmd_test,
        "env": cmd_env,
        "run": cmd_run,
        "cache": cmd_cache,
        "pr": cmd_pr,
    }
    commands = {}
    for name, (text, description) in COMMANDS.items():
        commands[name] = sub.add_parser(name, help=text, description=description)
        commands[name].set_defaults(run=runs[name])
    commands["sync"].add_argument(
        "--force",
        action="store_true",
        help="rebuild the fork from the series even though it holds work the "
        "series lacks (its commits are kept on a backup/<time> branch)",
    )
    commands["run"].add_argument(
        "-C", dest="directory", default=".", help="run in this directory"
    )
    commands["run"].add_argument("command", nargs=argparse.REMAINDER)
    commands["cache"].add_argument(
        "--remove", action="store_true", help="delete what is listed"
    )
    kit = commands["pr"]
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
    bench.add_parser(sub)
    mutate.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        ok = args.run(Pins.load(), args)
    except ForkToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if type(ok) is int:
        return ok
    return 1 if ok is False else 0


if __name__ == "__main__":
    sys.exit(main())
