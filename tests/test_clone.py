"""What each clone keeps as its own: a fork per worktree, its cache, its backups."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fork_fixture as fx
import pytest
from evidence_fixture import new_repo

from forktool import backups, pins, venv
from forktool.__main__ import main
from forktool.layout import LAYOUT, Layout
from forktool.pins import Pins, cache_dir


def test_each_git_worktree_has_its_own_fork(ws):
    ws.series_of(*fx.THREE)
    repo = ws.patches.parent
    wt = repo.parent / "wt"
    fx.git(repo, "worktree", "add", "-q", "-b", "wt-branch", str(wt))
    wt_fork = wt / "build" / "mini"
    on_wt = ws._replace(patches=wt / "patches", tree=wt_fork)
    assert "base + 3 patches" in on_wt.sync()
    fx.commit(wt_fork, "DOC.md", "from the worktree\n", "[Doc] From the worktree")
    on_wt.publish()
    assert fx.subjects(ws.tree) == fx.SUBJECTS
    assert "is what export writes (3 patches)" in ws.export(check=True)
    fx.git(repo, "merge", "-q", "wt-branch")
    message = ws.sync()
    assert "applied 1 patches" in message
    assert "0004-Doc-From-the-worktree.patch" in message, message
    assert fx.trees(ws.tree) == fx.trees(wt_fork)
    assert "is what export writes (4 patches)" in ws.export(check=True)


def test_a_relative_cache_is_the_clones_root_from_any_folder(tmp_path, monkeypatch):
    files = {".gitignore": "build/\n", "patches/series": "# empty\n"}
    clone = new_repo(tmp_path / "clone", files)
    fork_tree = new_repo(clone / "build" / "vllm")
    monkeypatch.setattr(pins, "LAYOUT", Layout(clone))  # the cache's clone
    monkeypatch.setenv("VLLM_FORK_CACHE", "relcache")
    monkeypatch.chdir(fork_tree)  # `python3 ../../forktool sync` from the fork
    assert cache_dir() == clone / "relcache"
    venv.register_clone(clone)
    (cache_dir() / "downloads").mkdir()
    (cache_dir() / "downloads" / "base.tar.gz").write_text("sdist")
    assert list((clone / "relcache" / "clones").glob("*.json"))
    assert not (fork_tree / "relcache").exists()
    assert fx.clean(fork_tree) and fx.clean(clone)
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "elsewhere"))
    assert cache_dir() == tmp_path / "elsewhere"
    assert not (tmp_path / "elsewhere").exists()  # nothing written outside
    monkeypatch.setenv("VLLM_FORK_CACHE", "patches")  # tracked files
    assert cache_dir() == clone / "patches"
    assert not (clone / "patches" / ".gitignore").exists()  # it would hide them


def clone_on(pins_text: str, clone: Path) -> Path:
    """A clone with `pins_text`, noted in the cache."""
    clone.mkdir()
    (clone / "pins.toml").write_text(pins_text)
    venv.register_clone(clone)
    return clone


def test_cache_lists_what_is_there_and_removes_only_what_no_clone_uses(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    pins = Pins.load()
    # Clones on the same pins, as a team's are.
    others = [clone_on(LAYOUT.pins.read_text(), tmp_path / f"c{i}") for i in range(3)]
    sdist = cache_dir() / "downloads" / pins.sdist.filename
    (uv_build := cache_dir() / "tools" / pins.uv.replace("==", "-")).mkdir(parents=True)
    sdist.parent.mkdir()
    sdist.write_text("x")  # the wheel was never downloaded
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert out.count("in use by") == 1, out
    assert f"in use by {', '.join(map(str, sorted([*others, LAYOUT.root])))}:" in out
    assert out.count(str(sdist)) == 1 and out.count(str(uv_build)) == 1
    assert pins.wheel.filename not in out and "nothing stale" in out
    assert venv.stale(pins) == [] and sdist.exists() and uv_build.exists()
    # A new cache: another clone on older pins, and one that is gone.
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache2"))
    old_pins = LAYOUT.pins.read_text().replace("0.33.0", "0.32.0")
    other = clone_on(old_pins, tmp_path / "other")
    venv.register_clone(tmp_path / "gone")
    downloads, tools = cache_dir() / "downloads", cache_dir() / "tools"
    # An older forktool's shared venv, still holding the other clone's fork.
    shared = cache_dir() / "venv-0123456789abcdef"
    record = shared / "lib" / "python3.11" / "site-packages" / "vllm-0.dist-info"
    record.mkdir(parents=True)
    (other / "build" / "vllm").mkdir(parents=True)
    url = {"url": f"file://{other / 'build' / 'vllm'}"}
    (record / "direct_url.json").write_text(json.dumps(url))
    (unused := cache_dir() / "venv-fedcba9876543210").mkdir()
    keep = [downloads / pins.sdist.filename, downloads / "vllm-0.32.0.tar.gz",
            tools / "uv-0.13.8"]  # fmt: skip
    drop = [downloads / "vllm-0.31.0.tar.gz", tools / "uv-0.1.0"]
    for path in keep + drop:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    assert venv.stale(pins) == [*drop, unused]
    assert main(["cache", "--remove"]) == 0
    assert f"in use by {other}" in capsys.readouterr().out
    assert all(p.exists() for p in keep) and shared.exists()
    assert not any(p.exists() for p in [*drop, unused])


def local_work_then_a_teammates_change(ws) -> None:
    fx.commit(ws.tree, *fx.LOCAL)  # never exported
    fx.teammate_changes_second(ws)
    ws.sync(force=True)


def local_work_then_a_teammates_reorder(ws) -> None:
    fx.commit(ws.tree, *fx.LOCAL)
    ws.sync(force=True)  # [Core] Local is on this backup only
    theirs = ws.clone("teammate")
    fx.edit_series(theirs, "sed -i -n '1h;1!p;${g;p}'")  # first patch last
    ws.publish(theirs)
    ws.sync()  # backs up the old order: every patch is in the fork


SECOND = "      [Core] Second  (a version committed in patches/)"
BACKUPS = {  # how the fork got its backups: (commits, lacking, superseded) of
    # each, what the listing says, how many `--prune` deletes and keeps
    "a teammate's change": (
        lambda ws: (fx.teammate_changes_second(ws), ws.sync()),
        [(3, [], ["[Core] Second"])],
        [": 3 commits, 1 not in the fork\n", SECOND,
         "deletes the 1 whose patches are all in the fork or in"], 1, 0),
    "local work, then a teammate's change": (
        local_work_then_a_teammates_change,
        [(4, ["[Core] Local"], ["[Core] Second"])],
        ["[Core] Local  (local work, saved nowhere else)", SECOND], 0, 1),
    "local work, then a teammate's reorder": (
        local_work_then_a_teammates_reorder,
        [(4, ["[Core] Local"], []), (3, [], [])],
        ["2 backup branches", "      [Core] Local",
         "deletes the 1 whose patches are all in the fork"], 1, 1),
}  # fmt: skip


@pytest.mark.parametrize("case", BACKUPS)
def test_backups_prune_deletes_only_what_the_fork_or_the_series_holds(ws, case):
    make, found, said, deleted, kept = BACKUPS[case]
    ws.series_of(*fx.THREE)
    make(ws)
    before = backups.backups(ws.tree, ws.patches)
    assert [(b.commits, b.lacking, b.superseded) for b in before] == found
    listed = backups.report(ws.tree, False, ws.patches)
    assert all(line in listed for line in said), listed
    pruned = backups.report(ws.tree, True, ws.patches)
    assert f"deleted {deleted} backup branches" in pruned
    assert (f"; kept {kept} holding" in pruned) if kept else "kept" not in pruned
    left = [b.name for b in backups.backups(ws.tree, ws.patches)]
    assert left == [b.name for b in before if b.lacking]


def test_backups_are_dated_when_they_were_made(ws):
    ws.series_of(*fx.THREE)
    for name in ("20240102T030405", "20240102T030405-1", "by-hand"):  # by hand: no time
        fx.git(ws.tree, "branch", f"backup/{name}", "HEAD~1")
    listed = backups.report(ws.tree, False, ws.patches)
    committed = fx.git(ws.tree, "log", "-1", "--format=%cs").stdout.strip()
    made = "  backup/20240102T030405 (made 2024-01-02 03:04:05 UTC): "
    assert f"{made}2 commits, 0 not in the fork" in listed  # all in the fork
    assert "  backup/20240102T030405-1 (made 2024-01-02 03:04:05 UTC): " in listed
    assert f"  backup/by-hand (committed {committed}): " in listed


def test_clones_noted_from_threads_at_once_warn_nothing(tmp_path, monkeypatch, capsys):
    """`setup` notes the clone from its sync thread and its venv thread at once."""
    monkeypatch.setenv("VLLM_FORK_CACHE", str(tmp_path / "cache"))
    gates = [threading.Barrier(4) for _ in range(20)]

    def note(i: int) -> None:
        gates[i].wait()
        venv.register_clone(tmp_path / f"clone{i}")

    with ThreadPoolExecutor(4) as pool:  # four at once for each clone
        list(pool.map(note, [i for i in range(20) for _ in range(4)]))
    assert capsys.readouterr().err == ""
