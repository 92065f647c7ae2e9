"""`forktool pr` against a synthetic fork and results set: no vLLM, no network."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest

from evidence import bench
from evidence.bench import Case
from evidence.matrix import EVIDENCE_FAILURES, failure_evidence
from evidence.pr import description
from evidence.pr import make as pr
from forktool import results
from forktool.check_runs import all_checks
from forktool.errors import ForkToolError
from forktool.git import git, identity
from forktool.pytest_outcomes import Result
from forktool.pytest_runner import Runner
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


@pytest.fixture
def fork(tmp_path) -> Path:
    return mini_fork(tmp_path / "fork")


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


def synthetic_results(store: Path, tree: str) -> None:
    """One result per required check, shaped as `test` writes them."""
    base_cmd = "$ python -m pytest -q -rfE --tb=short tests -k zero"
    columns = {
        "base+tests": {
            "outcomes": {"t::a": "failed", "t::b": "failed", "t::c": "passed"}
        },
        "0001": {"outcomes": {"t::a": "passed", "t::b": "passed", "t::c": "passed"}},
        "0002": {"outcomes": {"t::a": "passed", "t::b": "passed", "t::c": "passed"}},
    }
    for column in columns.values():  # a check of the fork's repository
        failed = column is columns["base+tests"]
        column["outcomes"]["checks/c.py::d"] = "failed" if failed else "passed"
    made: dict[str, tuple[dict[str, int], dict[str, str], dict[str, Any]]] = {
        "regression-matrix": (
            {"base+tests failed": 2},
            {
                "base": f"{base_cmd}\nFAILED t::a - "
                "assert False is True\nFAILED t::b - boom\n1 passed, 2 failed (3 s)",
                "base tracebacks": "FAILED t::a - assert False is True\n"
                "    E   assert False is True",
                "series": f"{base_cmd}\n3 passed in 2.9s",
            },
            {"columns": columns, "table": "t::a  FAIL  ok  ok", "args": ["tests"]},
        ),
        "gpu-only": (
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
        ),
        "upstream-selection": (
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
        ),
        "pre-commit": (
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
        ),
        "ci-checkers": ({"passed": 2, "failed": 0}, {}, {}),
        "ci-impact": (
            {},
            {},
            {"report": "### CI impact\n\n| A | B |\n|---|---|\n| 1 | 2 |\n"},
        ),
        "mutants": (
            {
                "mutants": 3,
                "killed": 2,
                "killed by the series": 1,
                "killed only by checks": 1,
                "survived": 0,
                "equivalent": 1,
            },
            {"table": "$ python3 -m forktool mutate\n..."},
            {
                "key": "k",
                "mutants": [
                    {
                        "id": "a1",
                        "file": "pkg/core.py",
                        "line": 1,
                        "text": "ZERO = True",
                        "mutation": "True -> False",
                        "outcome": "killed",
                        "kind": "killed (series)",
                        "detail": "tests/test_core.py::test_zero[a|b]",
                        "gpu_only": "",
                    },
                    {
                        "id": "a2",
                        "file": "pkg/core.py",
                        "line": 1,
                        "text": "ZERO = True",
                        "mutation": "assignment deleted",
                        "outcome": "killed",
                        "kind": "killed (checks only)",
                        "detail": "checks/c.py::d",
                        "gpu_only": "only a GPU zeroes",
                    },
                    {
                        "id": "a3",
                        "file": "pkg/core.py",
                        "line": 2,
                        "text": "n = 1",
                        "mutation": "1 -> 2",
                        "outcome": "equivalent",
                        "kind": "equivalent",
                        "detail": "no test asks about 2",
                        "gpu_only": "",
                    },
                ],
            },
        ),
        "planner-fuzz": ({"passed": 4}, {}, {}),
        "fuzz-catches-base": ({"violations": 3}, {}, {}),
        "overrides": (
            {"passed": 2},
            {},
            {
                "table": "check  base  fork\nreplace  ok  ok",
                "base": {
                    "checks/t.py::replace": "passed",
                    "checks/t.py::new": "failed",
                },
                "fork": {
                    "checks/t.py::replace": "passed",
                    "checks/t.py::new": "passed",
                },
            },
        ),
    }
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


def test_renders_the_kit_from_a_results_set(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    (fork / "REVIEW.md").write_text(
        "# Review\n\n## Runners assessed\n\nMRV2 read, not run.\n\n## Next\n\nx\n"
    )
    make_kit(fork, store, out)

    text = (out / "description.md").read_text()
    runners = "<summary>Runners assessed</summary>\n\nMRV2 read, not run.\n\n</details>"
    assert runners in text
    for section in ("## Overview", "## Claims", "## Validation", "## Details"):
        assert text.count(section) == 1
    assert "<!-- Evidence. -->" not in text
    assert (
        "| Regression tests of the series (its test files on the base's code) "
        "| 1 passed, 2 failed | 3 passed |" in text
    )
    # The Validation table holds what a reviewer reruns from the PR branch;
    # the fork's own checks sit below it, collapsed, with their commands.
    validation, fork_own = text.split("The fork's own checks (not in this PR)")
    assert "0001: 3 passed; 0002: 3 passed" in validation
    assert "checks/" not in validation and "planner fuzz" not in validation
    assert "copies of the decision (`checks/`) | 1 failed | 1 passed |" in fork_own
    assert "0001: 1 passed; 0002: 1 passed" in fork_own
    assert "python3 -m forktool mutate" in fork_own
    assert (
        "| 1207 collected; not run, as every test passes on the fork "
        "| 1203 passed, 7 skipped (3 added by the series, 0 lost) |" in text
    )
    assert "FAILED t::a - assert False is True" in text  # the base's failure
    assert "3 passed in 2.9s" in text  # and the series' pass
    assert "| --- | --- |\n| 1 | 2 |" in text  # the CI report, delimiters spaced
    assert "no pass is claimed" in text and "Need 2 GPUs" in text
    assert "CUDA_VISIBLE_DEVICES=0,1" in text and "-k test_pp_mixed" in text
    assert "Benchmark: not measured" in text
    assert "`__dict__` lookup) | 1 passed, 1 failed | 2 passed |" in fork_own
    assert "replace  ok  ok" in fork_own  # the override table, as measured
    assert "Sign-off still to do" in text
    assert "- [x] AI assistance was used" in text
    assert "- [ ] I ran the checklist skill." in text
    assert "#49623" in text and "1. [Core] Keep zeroing" in text

    patches = sorted(p.name for p in (out / "series").iterdir())
    assert patches == [
        "0000-cover-letter.patch",
        "0001-Core-Keep-zeroing.patch",
        "0002-Test-Pin-it.patch",
    ]
    cover = (out / "series" / "0000-cover-letter.patch").read_text()
    assert "[PATCH 0/2] [Bugfix][Core] Keep KV cache zeroing" in cover
    assert "1203 passed" in cover and "<details>" not in cover
    assert os.access(out / "apply-to-vllm.sh", os.X_OK)
    assert (out / "preimages.pack").stat().st_size > 0


def test_refuses_missing_results_and_writes_nothing(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    (store / "pre-commit.json").unlink()
    with pytest.raises(ForkToolError) as e:
        make_kit(fork, store, out)
    assert "pre-commit: no result; run `python3 -m forktool test`" in str(e.value)
    assert not out.exists()

    make_kit(fork, store, out, partial=True)
    text = (out / "description.md").read_text()
    assert "### Pre-commit\n\nnot measured." in text


def test_refuses_stale_results_and_writes_nothing(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    commit(fork, {"pkg/other.py": "X = 2\n"}, "[Core] More")
    with pytest.raises(ForkToolError) as e:
        make_kit(fork, store, out)
    message = str(e.value)
    assert "regression-matrix: stale" in message
    assert "run `python3 -m forktool setup`" in message
    assert "gpu-only: stale" in message
    assert not out.exists()


def test_no_fork_names_what_to_run(tmp_path):
    with pytest.raises(ForkToolError, match="forktool setup.*forktool test"):
        make_kit(tmp_path / "none", tmp_path / "results", tmp_path / "kit")
    assert not (tmp_path / "kit").exists()


def test_signoff_resigns_the_kit_only(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    with pytest.raises(ForkToolError, match="Name <email>"):
        make_kit(fork, store, out, signer="jane@example.com")
    assert not out.exists()
    head = git(fork, "rev-parse", "HEAD").stdout
    make_kit(fork, store, out, signer=SIGNER)

    assert git(fork, "rev-parse", "HEAD").stdout == head
    assert "Sign-off still to do" not in (out / "description.md").read_text()
    cover = (out / "series" / "0000-cover-letter.patch").read_text()
    assert f"From: {SIGNER}" in cover
    for patch in sorted((out / "series").glob("000[12]-*.patch")):
        text = patch.read_text()
        assert f"From: {SIGNER}" in text
        assert text.count(f"Signed-off-by: {SIGNER}") == 1
        assert "Co-authored-by: Claude" in text
        assert NEUTRAL not in text


def test_a_failed_check_is_said_so(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    failed = stored(store, "ci-checkers")
    failed.ok, failed.counts = False, {"passed": 1, "failed": 1}
    results.write(store, failed)
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "**Checks that failed on this tree: ci-checkers.**" in text
    assert "| — | 1 passed, 1 failed |" in text


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


def test_renders_a_bench_result_when_there_is_one(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    results.write(store, bench_result(tree, [100, 100.5, 99.5]))
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "(goals met)" in text
    assert "PASS          mixed: fork/base over all 1 cases 1.004" in text
    assert "mixed   1.004" in text  # the table, collapsed
    assert "Benchmark: not measured" not in text


def test_renders_only_checks_of_the_registry(fork, tmp_path, monkeypatch):
    """Every result the description reads is looked up as a check of the
    registry that the PR renders; any other lookup fails."""
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    asked = []

    class Watched(dict):
        def __getitem__(self, check):
            asked.append(check)
            if check not in all_checks() or not check.in_pr:
                raise AssertionError(f"pr renders {check!r}, not in the registry")
            return super().__getitem__(check)

    load = pr.load_results
    monkeypatch.setattr(pr, "load_results", lambda *a: Watched(load(*a)))
    make_kit(fork, store, out)
    rows = {check.name for check in all_checks() if check.pr_row}  # all rendered
    assert {check.name for check in asked} | rows == {*pr.required(), "bench"}


def test_a_bench_result_the_noise_cannot_support_is_inconclusive(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    results.write(store, bench_result(tree, [66, 152, 100]))  # once said PASS
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "(inconclusive: the A/A noise is wider than a goal's margin" in text
    assert "INCONCLUSIVE  mixed: fork/base over all 1 cases 1.004" in text
    assert "goals met" not in text


def test_renders_the_mutants_counts_and_each_mutant(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "Mutation testing of the lines the series adds: each line" in text
    assert (
        "3 mutants, 1 killed by the series' regression tests, 1 only by the "
        "fork's checks, 0 survived, 1 equivalent" in text
    )
    assert (
        "`pkg/core.py:1` is killed only by the fork's checks: only a GPU zeroes."
        in text
    )
    assert "<summary>Each mutant</summary>" in text
    assert (
        "| `pkg/core.py:1` | True -> False | killed (series) | "
        "tests/test_core.py::test_zero[a\\|b] |" in text
    )
    assert (
        "| `pkg/core.py:1` | assignment deleted | killed (checks only) | "
        "checks/c.py::d |" in text
    )
    assert "| `pkg/core.py:2` | 1 -> 2 | equivalent | no test asks about 2 |" in text


def test_mutants_that_could_not_run_say_why(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    failed = CheckResult(
        "mutants",
        False,
        tree,
        "0.1",
        "python3 -m forktool test",
        excerpts={"error": "the regression selection does not pass"},
    )
    results.write(store, failed)
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "did not run: the regression selection does not pass" in text
    assert "**Checks that failed on this tree: mutants.**" in text


def test_mutants_recorded_without_their_kind_are_not_counted(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    tree = results.fork_tree(fork)
    synthetic_results(store, tree)
    old = stored(store, "mutants")
    for row in old.data["mutants"]:
        del row["kind"]
    results.write(store, old)
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert "recorded without who killed each mutant; run `" in text
    assert "<summary>Each mutant</summary>" not in text


# What a traceback's end holds besides the assertion: captured log noise.
HF_RETRY = (
    "ERROR    vllm.transformers_utils.repo_utils:repo_utils.py:126 Error "
    "retrieving safetensors: Cannot reach https://huggingface.co/Qwen/Qwen3-0.6B/"
    "resolve/main/model.safetensors: offline mode is enabled., retrying 1 of 2"
)
RUNNER = Runner(Path("venv"), Path("fixtures"), Path("hf"), {}, Path("logs"))


def failing(count: int) -> Result:
    """A run of the regression selection with `count` failures and a pass."""
    result = Result(outcomes={"tests/test_core.py::test_ok": "passed"}, seconds=3.1)
    for i in range(count):
        test = f"tests/test_core.py::test_zero[{i}]"
        result.outcomes[test] = "failed"
        result.reasons[test] = f"assert None == [{i}]\n +  where None = output.x"
        result.exception_types[test] = "AssertionError"
        result.tails[test] = f"E   assert None == [{i}]\n{HF_RETRY}"
    return result


def test_the_failure_evidence_is_each_failure_with_its_message():
    found = failure_evidence(RUNNER, failing(2), ("tests", "-k", "zero"), "base")
    assert found["base"].splitlines() == [
        "$ HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES='' VLLM_TARGET_DEVICE=cpu "
        "python -m pytest -q tests -k zero",
        "FAILED tests/test_core.py::test_zero[0] - assert None == [0]",
        "FAILED tests/test_core.py::test_zero[1] - assert None == [1]",
        "1 passed, 2 failed (3 s)",
    ]
    assert "offline mode is enabled" in found["base tracebacks"]
    many = failure_evidence(RUNNER, failing(EVIDENCE_FAILURES + 5), (), "base")
    kept = many["base"].splitlines()
    assert kept[-2] == "(5 more failing tests)"
    assert len(kept) == EVIDENCE_FAILURES + 3


def heavy_results(store: Path, tree: str) -> None:
    """The synthetic results made as long as real ones get: a noisy base run
    with many failures, many mutants, long CI and matrix tables, a bench."""
    synthetic_results(store, tree)
    matrix = stored(store, "regression-matrix")
    matrix.excerpts.update(failure_evidence(RUNNER, failing(30), ("tests",), "base"))
    matrix.data["table"] = "\n".join(f"t::t{i}  FAIL  ok  ok" for i in range(60))
    results.write(store, matrix)
    mutants = stored(store, "mutants")
    row = mutants.data["mutants"][0]
    mutants.data["mutants"] = [{**row, "id": f"m{i}", "line": i} for i in range(80)]
    results.write(store, mutants)
    impact = stored(store, "ci-impact")
    impact.data["report"] = "| A | B |\n|---|---|\n" + "| x | y |\n" * 60
    results.write(store, impact)
    results.write(store, bench_result(tree, [100, 100.5, 99.5]))


def test_the_description_shows_at_most_the_line_budget_outside_details(fork, tmp_path):
    store, out = tmp_path / "results", tmp_path / "kit"
    heavy_results(store, results.fork_tree(fork))
    make_kit(fork, store, out)
    text = (out / "description.md").read_text()
    assert description.visible_lines(text) <= description.LINE_BUDGET
    # The long tables are in the description, collapsed.
    collapsed = "".join(re.findall(r"<details>.*?</details>", text, re.S))
    assert "| `pkg/core.py:79` |" in collapsed  # each mutant
    assert collapsed.count("| x | y |") == 60  # the CI impact report
    assert "t::t59  FAIL  ok  ok" in collapsed  # the per-test matrix
    assert "Differential planner fuzz" in collapsed  # the fork's checks
    # The visible excerpt has the failures' messages, the noise only the
    # tracebacks' ends.
    visible = re.sub(r"<details>.*?</details>", "", text, flags=re.S)
    assert "test_zero[0] - assert None == [0]" in visible
    assert "offline mode is enabled" not in visible
    assert "offline mode is enabled" in collapsed


def test_a_description_over_the_line_budget_is_refused(fork, tmp_path, monkeypatch):
    store, out = tmp_path / "results", tmp_path / "kit"
    synthetic_results(store, results.fork_tree(fork))
    monkeypatch.setattr(description, "LINE_BUDGET", 20)
    with pytest.raises(ForkToolError, match=r"lines outside <details>, more than 20"):
        make_kit(fork, store, out)
    assert not out.exists()


def test_visible_lines_count_a_collapsed_block_as_its_summary():
    text = (
        "a\n<details>\n<summary>s</summary>\n\nb\n"
        "<details>\nc\n</details>\n</details>\nd"
    )
    assert description.visible_lines(text) == 3
