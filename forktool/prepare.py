"""The fork and its venv made ready, as `sync`, `install`, `setup` and `test`
need them: the fork synced, the venv installed and self-checked, vLLM started
once, and the offline HF cache laid out.

The self-check runs after every install and before any test: a venv that
works only by install order (two distributions writing the same file) or
that drifted from venv.lock fails there, naming the file and both
distributions, instead of as a collection error deep in a test run.
"""

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import DEVNULL

from forktool import hfcache, process, sync, venv_lock
from forktool.checks import Context, Measured
from forktool.layout import LAYOUT
from forktool.pins import Pins, fetch_sdist, normal, uv_binary
from forktool.process import ForkToolError
from forktool.pytest_runner import test_env
from forktool.selection import Selection
from forktool.venv import ensure_venv, install_fork, python, register_clone

PROBE = Path(__file__).with_name("venv_probe.py")
# What the checks and the regression matrix import: the model registry and
# the GPU model runners of Model Runner V1 and V2.
MODULES = (
    "vllm.model_executor.models.registry",
    "vllm.v1.worker.gpu_model_runner",
    "vllm.v1.worker.gpu.model_runner",
)
EDITABLE = "vllm"  # installed from the fork tree, not from the lock


def sync_fork(pins: Pins, force: bool = False) -> None:
    """build/vllm = base + series, or brought up to date (`sync`)."""
    message = (
        f"{pins.project} {pins.version}\n\nThe pristine {pins.sdist.filename}, "
        f"sha256 {pins.sdist.sha256}.\n"
    )
    register_clone()
    print(sync.sync(LAYOUT.fork, LAYOUT.patches, pins.author, message,
                    lambda: fetch_sdist(pins), pins.generated, force,
                    selection=LAYOUT.selection))  # fmt: skip


def install(pins: Pins, venv: Path | None = None) -> Path:
    """The venv made from the lock (unless `venv` is made), the fork
    installed into it."""
    venv = venv or ensure_venv(pins)
    print(f"venv: {venv}")
    install_fork(pins, venv, LAYOUT.fork)
    return venv


def self_checked(venv: Path) -> Measured:
    """The venv's self-check."""
    print("venv self-check:", flush=True)
    return self_check(python(venv), venv_lock.LOCK, test_env(LAYOUT.hf_home))


def self_check(
    python: str,
    lock_file: Path,
    env: dict[str, str],
    modules=MODULES,
) -> Measured:
    """Run forktool/venv_probe.py with `python` (outside any tree, so that
    `vllm` is the installed one) and name each problem it finds. A venv
    whose python cannot run it is the tool's error, saying how to remake it."""
    venv = Path(python).parent.parent
    remake = f"remove {venv} and run `python3 -m forktool install` to remake it"
    with tempfile.TemporaryDirectory() as tmp:
        out, cmd = Path(tmp, "probe.json"), [python, str(PROBE)]
        try:
            run = process.run([*cmd, str(out), *modules], cwd="/", env=env, check=False)
        except ForkToolError as e:
            raise ForkToolError(
                f"the venv's python does not run ({e}): {remake}"
            ) from e
        if not out.exists():
            said = f"({PROBE.name}, exit status {run.returncode}): {remake}. Its stderr"
            raise ForkToolError(
                f"the venv's python {python} could not run its self-check {said}:\n"
                f"{run.stderr[-2000:].rstrip()}"
            )
        report = json.loads(out.read_text())
    installed, clashes = report["installed"], report["clashes"]
    locked = venv_lock.packages(lock_file.read_text())
    have = {normal(name): version for name, version in installed.items()}
    have.pop(EDITABLE, None)
    failed = [i for i in report["imports"] if i["error"]]
    problems = [
        f"{name}: locked {version}, installed {have.get(name, 'nothing')}"
        for name, version in sorted(locked.items())
        if have.get(name) != version
    ]
    problems += [
        f"{n} {have[n]}: installed, not in the lock"
        for n in sorted(have.keys() - locked)
    ]
    problems += [
        f"{c['file']}: installed by {' and '.join(c['distributions'])}, different "
        "contents"
        for c in clashes
    ]
    problems += [
        f"import {i['module']} failed in "
        f"{', '.join(i['distributions']) or 'unknown package'}: {i['error']}"
        for i in failed
    ]
    lines = [
        f"{len(installed)} distributions; {lock_file.name}: {len(locked)} pinned",
        f"files claimed by two distributions with different contents: {len(clashes)}",
        f"imports: {len(modules) - len(failed)} of {len(modules)} succeed "
        f"({', '.join(modules)})",
        *problems,
    ]
    print("\n".join(lines), flush=True)
    counts = {
        "distributions": len(installed),
        "clashing files": len(clashes),
        "failed imports": len(failed),
        "problems": len(problems),
    }
    output = {"output": "\n".join(lines[:40])}
    return Measured(not problems, counts, output, {"installed": installed})


def prepare(pins: Pins) -> Context:
    """sync + install, both idempotent; the venv's self-check while `vllm
    serve --help` shows that vLLM starts; what the checks then run with."""
    uv_binary(pins)  # which both the sync and the venv run
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The fork is made while uv fills the venv (the fork's install needs
        # both): one waits on the network while the other unpacks.
        synced = pool.submit(sync_fork, pins)
        venv = ensure_venv(pins)
        synced.result()
    install(pins, venv)
    serve = process.start([venv / "bin" / "vllm", "serve", "--help"],
                          env=test_env(LAYOUT.hf_home), stdout=DEVNULL,
                          stderr=DEVNULL)  # fmt: skip
    checked = self_checked(venv)
    version = checked.data.get("installed", {}).get(EDITABLE, "not installed")
    print(f"vllm {version}, installed from {LAYOUT.fork}")
    print(f"vllm serve --help: exit status {serve.wait()}")
    if checked and serve.returncode:
        raise ForkToolError("vllm serve --help failed")
    ids = hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
    print(f"HF cache {LAYOUT.hf_home}: {', '.join(ids)}")
    return Context(pins, venv, checked, Selection.load(LAYOUT.selection))
