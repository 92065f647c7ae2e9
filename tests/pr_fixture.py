"""The synthetic fork and results set the PR tests render from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evidence import bench
from evidence.bench import Case
from evidence.pr import make as pr
from forktool import results
from forktool.git import git, identity
from forktool.results import CheckResult

REPO = Path(__file__).resolve().parents[1]
NEUTRAL = "Test Project <test-project@noreply.invalid>"
SIGNER = "Jane Doe <jane@example.com>"
# Shaped like vLLM's template: headings, placeholder comments, a checklist.
TEMPLATE = """<!-- markdownlint-disable -->

## Overview

<!-- Summary. -->

## Claims

<!-- Bullets. -->

## Validation

<!-- Evidence. -->

## Details

<!-- Why. -->

---

<details>
<summary> Checklist </summary>

- [ ] I ran the checklist skill.
- [ ] AI assistance was used during the creation of this PR.
</details>
"""
BASE_FILES = {
    "pkg/core.py": "ZERO = False\n",
    "pkg/other.py": "X = 1\n",
    "README": "mini\n",
    ".github/PULL_REQUEST_TEMPLATE.md": TEMPLATE,
}


def commit(repo: Path, files: dict[str, str], message: str, tag: str = "") -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, env=identity(NEUTRAL))
    if tag:
        git(repo, "tag", tag)


def new_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "--initial-branch=main")
    return path


def mini_fork(path: Path) -> Path:
    """Base (tagged `base`) plus two patches, one editing and one adding a file."""
    repo = new_repo(path)
    commit(repo, BASE_FILES, "mini 0.1", tag="base")
    sign = f"\n\nSigned-off-by: {NEUTRAL}\n"
    commit(repo, {"pkg/core.py": "ZERO = True\n"}, "[Core] Keep zeroing" + sign)
    commit(repo, {"tests/test_core.py": "def test(): pass\n"}, "[Test] Pin it" + sign)
    return repo


def stored(store: Path, check: str) -> CheckResult:
    """The result `synthetic_results` wrote for `check`."""
    found = results.read(store, check)
    assert found is not None, f"no {check} result in {store}"
    return found


def matrix_made() -> tuple[dict[str, int], dict[str, str], dict[str, Any]]:
    """The regression matrix's result: the base fails two tests, a check too."""
    base_cmd = "$ python -m pytest -q tests -k zero"
    columns = {
        "base+tests": {
            "outcomes": {"t::a": "failed", "t::b": "failed", "t::c": "passed"}
        },
        "0001": {"outcomes": {"t::a": "passed", "t::b": "passed", "t::c": "passed"}},
        "0002": {"outcomes": {"t::a": "passed", "t::b": "passed", "t::c": "passed"}},
    }
    for column in columns.values():  # a check of the fork's repository
        failed = column is columns["base+tests"]
        column["outcomes"]["fork_tests/c.py::d"] = "failed" if failed else "passed"
    return (
        {"base+tests failed": 2},
        {
            "base": f"{base_cmd}\nFAILED t::a - "
            "assert False is True\nFAILED t::b - boom\n1 passed, 2 failed (3 s)",
            "base tracebacks": "FAILED t::a - assert False is True\n"
            "    E   assert False is True",
            "series": f"{base_cmd}\n3 passed (3 s)",
        },
        {"columns": columns, "table": "t::a  FAIL  ok  ok", "args": ["tests"]},
    )


def mutant(n: int, mutation: str, kind: str, detail: str, gpu_only: str = "") -> dict:
    line, text = (2, "n = 1") if kind == "equivalent" else (1, "ZERO = True")
    return {
        "id": f"a{n}",
        "file": "pkg/core.py",
        "line": line,
        "text": text,
        "mutation": mutation,
        "outcome": kind.split()[0],
        "kind": kind,
        "detail": detail,
        "gpu_only": gpu_only,
    }


MUTANTS = {
    "mutants": 3,
    "killed": 2,
    "killed by the series": 1,
    "killed only by fork tests": 1,
    "survived": 0,
    "equivalent": 1,
}

TEST_ZERO = "tests/test_core.py::test_zero[a|b]"


Made = tuple[dict[str, int], dict[str, str], dict[str, Any]]
GPU_ONLY: Made = (
    {"skipped": 2},
    {},
    {
        "args": ["tests/d/test_pp.py", "-k", "test_pp_mixed"],
        "outcomes": {
            "tests/d/test_pp.py::test_pp_mixed[a]": "skipped",
            "tests/d/test_pp.py::test_pp_mixed[b]": "skipped",
        },
        "reasons": {"tests/d/test_pp.py::test_pp_mixed[a]": "Need 2 GPUs"},
    },
)


SUITE: Made = (
    {},
    {},
    {
        "runs": {
            "v1-core": {
                "args": ["-m", "cpu_test", "tests/v1/core"],
                "base": {"collected": 1207, "rerun": 0, "counts": {}},
                "fork": {
                    "collected": 1210,
                    "counts": {"passed": 1203, "skipped": 7},
                },
                "added": ["a", "b", "c"],
                "lost": [],
                "new": [],
                "pre_existing": [],
            }
        }
    },
)


PRE_COMMIT: Made = (
    {"PASS": 2, "SKIPPED": 1},
    {},
    {
        "version": "pre-commit 9.9.9",
        "files": ["pkg/core.py", "tests/test_core.py"],
        "hooks": [
            ["ruff-check", "PASS", ""],
            ["typos", "PASS", ""],
            ["actionlint", "SKIPPED", "no wheel has it"],
        ],
        "messages": [
            ["0001 x", "signoff", "PASS", ""],
            ["0002 y", "signoff", "PASS", ""],
        ],
    },
)


OVERRIDES: Made = (
    {"passed": 2},
    {},
    {
        "table": "check  base  fork\nreplace  ok  ok",
        "base": {
            "fork_tests/t.py::replace": "passed",
            "fork_tests/t.py::new": "failed",
        },
        "fork": {
            "fork_tests/t.py::replace": "passed",
            "fork_tests/t.py::new": "passed",
        },
    },
)


def made_checks() -> dict[str, Made]:
    """Each required check's counts, excerpts and data."""
    return {
        "regression-matrix": matrix_made(),
        "gpu-only": GPU_ONLY,
        "upstream-selection": SUITE,
        "pre-commit": PRE_COMMIT,
        "ci-checkers": ({"passed": 2, "failed": 0}, {}, {}),
        "ci-impact": (
            {},
            {},
            {"report": "### CI impact\n\n| A | B |\n|---|---|\n| 1 | 2 |\n"},
        ),
        "mutants": (
            MUTANTS,
            {"table": "$ python3 -m forktool mutate\n..."},
            {
                "key": "k",
                "mutants": [
                    mutant(1, "True -> False", "killed (series)", TEST_ZERO),
                    mutant(
                        2,
                        "assignment deleted",
                        "killed (fork tests only)",
                        "fork_tests/c.py::d",
                        "only a GPU zeroes",
                    ),
                    mutant(3, "1 -> 2", "equivalent", "no test asks about 2"),
                ],
            },
        ),
        "planner-fuzz": ({"passed": 4}, {}, {}),
        "fuzz-catches-base": ({"violations": 3}, {}, {}),
        "overrides": OVERRIDES,
    }


def synthetic_results(store: Path, tree: str) -> None:
    """One result per required check, shaped as `test` writes them."""
    made = made_checks()
    assert set(made) == set(pr.required())
    for check, (counts, excerpts, data) in made.items():
        results.write(
            store,
            CheckResult(
                check,
                True,
                tree,
                "0.1",
                pr.required()[check],
                seconds=1.0,
                counts=counts,
                excerpts=excerpts,
                data=data,
            ),
        )


def make_kit(fork: Path, store: Path, out: Path, signer=None, partial=False) -> str:
    return pr.make_kit(
        fork,
        store,
        out,
        REPO / "pr" / "description.toml",
        fork / "REVIEW.md",
        "0.1",
        NEUTRAL,
        signer,
        partial,
        lambda fork, text: None,
        ("tests/test_core.py", "-k", "zero"),
    )


def bench_result(tree: str, aa: list[float]) -> CheckResult:
    """A bench result of one mixed case: fork/base 1.004, A/A ratios `aa`."""

    def answers(step_us: list[float]) -> list[dict]:
        return [{"cpu_ns": [t * 1000], "zero_ids": [0]} for t in step_us]

    runs = {"base": answers([100] * 3), "fork": answers([100.4] * 3)}
    row = bench.summarise(Case("mixed", "decode", 64), {**runs, "base-aa": answers(aa)})
    return CheckResult(
        "bench",
        True,
        tree,
        "0.1",
        "python3 -m forktool bench",
        excerpts={"goals": "as printed", "table": "config  fork/base\nmixed   1.004"},
        data={"rows": [row]},
    )
