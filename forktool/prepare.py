"""The fork and its venv made ready, as `sync`, `install`, `setup`, `test`
and `mutate` need them: the fork synced, the venv installed and
self-checked, vLLM started once, and the pytest runner over them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import DEVNULL

from forktool import hfcache, process, sync, venv_lock
from forktool.checks import Context, Measured
from forktool.layout import LAYOUT
from forktool.pins import Pins, fetch_sdist, uv_binary
from forktool.process import ForkToolError
from forktool.pytest_runner import Runner, test_env
from forktool.selection import Selection
from forktool.venv import ensure_venv, install_fork, python, register_clone, venv_id
from forktool.venv_check import EDITABLE, self_check


def sync_fork(pins: Pins, force: bool = False) -> None:
    """build/vllm = base + series, or brought up to date (`sync`)."""
    message = (
        f"{pins.project} {pins.version}\n\n"
        f"The pristine {pins.sdist.filename}, sha256 {pins.sdist.sha256}.\n"
    )
    register_clone()
    sdist = lambda: fetch_sdist(pins)  # noqa: E731
    print(
        sync.sync(
            LAYOUT.fork,
            LAYOUT.patches,
            pins.author,
            message,
            sdist,
            pins.generated,
            force,
            selection=LAYOUT.selection,
        )
    )


def install(pins: Pins) -> Path:
    """The venv made from the lock, the fork installed into it."""
    return _installed(pins, ensure_venv(pins))


def _installed(pins: Pins, venv: Path) -> Path:
    print(f"venv: {venv}")
    install_fork(pins, venv, LAYOUT.fork)
    return venv


def self_checked(venv: Path) -> Measured:
    """The venv's self-check."""
    print("venv self-check:", flush=True)
    return self_check(python(venv), venv_lock.LOCK, test_env(LAYOUT.hf_home))


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
    _installed(pins, venv)
    serve = process.start(
        [str(venv / "bin" / "vllm"), "serve", "--help"],
        env=test_env(LAYOUT.hf_home),
        stdout=DEVNULL,
        stderr=DEVNULL,
    )
    checked = self_checked(venv)
    version = checked.data.get("installed", {}).get(EDITABLE, "not installed")
    print(f"vllm {version}, installed from {LAYOUT.fork}")
    print(f"vllm serve --help: exit status {serve.wait()}")
    if checked and serve.returncode:
        raise ForkToolError("vllm serve --help failed")
    return Context(
        pins, venv, checked, vllm_runner(venv), Selection.load(LAYOUT.selection)
    )


def require_setup(what: str) -> None:
    """Refuse `what` while the clone has no fork or no complete venv."""
    missing = [
        f"no fork at {LAYOUT.fork}" if not (LAYOUT.fork / ".git").exists() else "",
        f"no complete venv at {LAYOUT.venv}" if not venv_id(LAYOUT.venv) else "",
    ]
    if any(missing):
        raise ForkToolError(
            f"{what} needs the fork and its venv: "
            + "; ".join(filter(None, missing))
            + "; run `python3 -m forktool setup` first"
        )


def vllm_runner(venv: Path) -> Runner:
    """The pytest runner for vLLM's tests, the HF cache laid out afresh."""
    selection = Selection.load(LAYOUT.selection)
    ids = hfcache.lay_out(LAYOUT.fixtures, LAYOUT.hf_home)
    print(f"HF cache {LAYOUT.hf_home}: {', '.join(ids)}")
    return Runner(
        venv, LAYOUT.fixtures, LAYOUT.hf_home, selection.excluded, LAYOUT.logs
    )
