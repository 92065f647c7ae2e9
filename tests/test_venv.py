"""The venv: its lock, its self-check (on a venv of synthetic wheels), one per clone."""

import base64
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from evidence_fixture import programs

from forktool import prepare, venv, venv_lock
from forktool.__main__ import main
from forktool.layout import LAYOUT, Layout
from forktool.pins import Pins
from forktool.process import ForkToolError


def test_the_committed_lock_is_current_and_a_pins_change_needs_a_relock(
    tmp_path, monkeypatch
):
    pins = Pins.load()
    assert venv_lock.current(pins) == venv_lock.LOCK
    pinned = venv_lock.packages(venv_lock.LOCK.read_text())
    # cuda-python 13 brings no files under cuda/bindings/; the fork provides vllm.
    assert pinned["cuda-python"].startswith("13.")
    assert pinned["cuda-bindings"].startswith("13.") and "vllm" not in pinned
    moved = dataclasses.replace(pins, test_requirements=(*pins.test_requirements, "x"))
    relocked = tmp_path / "venv.lock"
    for args in ((moved,), (pins, relocked)):  # pins moved; no lock
        with pytest.raises(ForkToolError, match="run `python3 -m forktool lock`"):
            venv_lock.current(*args)
    # The command that fixes it is the one that records the digest.
    relocked.write_text(f"# pins-digest: {venv_lock.pins_digest(moved)}\nx==1 \\\n")
    assert venv_lock.current(moved, relocked) == relocked
    assert venv_lock.packages(relocked.read_text()) == {"x": "1"}
    # Only the first digest counts: a lock merged with conflicts is refused.
    ours = f"# pins-digest: {venv_lock.pins_digest(moved)}\n"
    relocked.write_text(f"<<<<<<< ours\n# pins-digest: old\n=======\n{ours}")
    with pytest.raises(ForkToolError, match="pins.toml changed"):
        venv_lock.current(moved, relocked)
    # A re-lock hands uv the current lock as its -o file: adding a pin moves no other.
    relocked.write_text("# pins-digest: old\nkept==1.0 \\\n    --hash=sha256:aa\n")
    seen = []

    def compile_(uv, *args):
        out = Path(args[args.index("-o") + 1])
        seen.append(out.read_text())
        out.write_text("kept==1.0 \\\n    --hash=sha256:aa\nnew==2.0 \\\n")

    monkeypatch.setattr(venv_lock, "uv_binary", lambda pins: Path("uv"))
    monkeypatch.setattr(venv_lock, "run_uv", compile_)
    assert venv_lock.write(pins, relocked) == "venv.lock: 2 packages, 1 changed"
    assert seen == ["# pins-digest: old\nkept==1.0 \\\n    --hash=sha256:aa\n"]
    assert venv_lock.current(pins, relocked) == relocked


def wheel(directory: Path, name: str, files: dict[str, str]) -> Path:
    """A minimal wheel of distribution `name` 1.0 holding `files`."""
    info = f"{name}-1.0.dist-info"
    contents = {
        **files,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n",
    }
    record = []
    for path, text in contents.items():
        b64 = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest())
        record.append(f"{path},sha256={b64.rstrip(b'=').decode()},{len(text.encode())}")
    contents[f"{info}/RECORD"] = "\n".join([*record, f"{info}/RECORD,,", ""])
    with zipfile.ZipFile(made := directory / f"{name}-1.0-py3-none-any.whl", "w") as zf:
        for member, text in contents.items():
            zf.writestr(member, text)
    return made


def make_venv(tmp_path: Path, *wheels: Path) -> str:
    """A venv without pip, the wheels installed into it by pip, in order."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env], check=True)
    python = str(env / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q"]
    for path in wheels:
        subprocess.run([*pip, "--no-index", "--no-deps", path], check=True)
    return python


def lock_of(tmp_path: Path, *names: str) -> Path:
    path = tmp_path / "venv.lock"
    path.write_text("".join(f"{n}==1.0 \\\n    --hash=sha256:00\n" for n in names))
    return path


SELF_CHECK = {  # wheels (name, files), the lock's names, imports, counts, printed
    "a clashing file": (
        [("clash_a", {"shared/bindings.py": "A = 1\n"}),
         ("clash_b", {"shared/bindings.py": "B = 2\n"})], ["clash-a", "clash-b"], (),
        (2, 1, 0, 1), ["shared/bindings.py: installed by clash_a and clash_b"]),
    "a venv that is its lock": (
        [("fine", {"fine/__init__.py": ""})], ["fine"], ("fine",), (1, 0, 0, 0), []),
    "a failed import and lock drift": (
        [("broken", {"broken/__init__.py": "import types\ntypes.cudaLibrary_t\n"})],
        ["other"], ("broken",), (1, 0, 1, 3),
        ["import broken failed in broken: AttributeError",
         "other: locked 1.0, installed nothing",
         "broken 1.0: installed, not in the lock"]),
}  # fmt: skip


@pytest.mark.parametrize("case", SELF_CHECK)
def test_the_self_check_names_each_problem_of_a_venv(tmp_path, capsys, case):
    wheels, locked, imports, counts, said = SELF_CHECK[case]
    python = make_venv(tmp_path, *(wheel(tmp_path, *w) for w in wheels))
    lock = lock_of(tmp_path, *locked)
    found = prepare.self_check(python, lock, dict(os.environ), imports)
    printed = capsys.readouterr().out
    keys = ("distributions", "clashing files", "failed imports", "problems")
    assert found.counts == dict(zip(keys, counts, strict=True))
    assert found.ok == (counts[-1] == 0)
    assert all(line in printed for line in said), printed


def test_a_venv_whose_python_cannot_run_the_self_check_is_an_error_line(tmp_path):
    """Not a traceback: the tool's error, naming the venv and how to remake it."""
    script = "echo 'no such interpreter' >&2\nexit 127"
    broken = programs(tmp_path / "venv" / "bin", python=script) / "python"
    lock_file = lock_of(tmp_path, "fine")
    with pytest.raises(ForkToolError, match="exit status 127") as failed:
        prepare.self_check(str(broken), lock_file, dict(os.environ), ())
    said = str(failed.value)
    assert f"remove {tmp_path / 'venv'} and run `python3 -m forktool install`" in said
    assert "no such interpreter" in said
    broken.unlink()  # a venv whose interpreter is gone
    with pytest.raises(ForkToolError, match="does not run"):
        prepare.self_check(str(broken), lock_file, dict(os.environ), ())


def test_each_clone_has_its_own_venv_and_env_names_it(tmp_path, monkeypatch, capsys):
    envs = {clone: tmp_path / clone / "build" / ".venv" for clone in ("a", "b")}
    for clone, env in envs.items():
        site = env / "lib" / "python3.11" / "site-packages" / "vllm-0.dist-info"
        site.mkdir(parents=True)
        (env / venv.COMPLETE).write_text("digest\n")
        url = {"url": f"file://{tmp_path / clone / 'build' / 'vllm'}"}
        (site / "direct_url.json").write_text(json.dumps(url))
    for clone, env in envs.items():
        monkeypatch.setattr("forktool.commands.env.LAYOUT", Layout(tmp_path / clone))
        assert main(["env"]) == 0
        out = capsys.readouterr().out
        assert f"# venv {env} (vLLM from {tmp_path / clone / 'build' / 'vllm'})" in out
        assert f"export VIRTUAL_ENV={env}" in out
    assert LAYOUT.venv == LAYOUT.root / "build" / ".venv"
