"""The evidence tests' setup: synthetic fork and results, git trees, programs."""

import shutil
import sys
from pathlib import Path
from typing import Any

from evidence import bench
from evidence.pr import make as pr
from forktool import checks
from forktool.process import git, identity

REPO = Path(__file__).resolve().parents[1]
NEUTRAL = "Test Project <test-project@noreply.invalid>"
SIGNER = "Jane Doe <jane@example.com>"
# Shaped like vLLM's template: headings, placeholder comments, a checklist.
SECTIONS = ("Overview", "Summary"), ("Claims", "Bullets"), ("Validation", "Evidence")
TEMPLATE = (
    "<!-- markdownlint-disable -->\n\n"
    + "".join(
        f"## {h}\n\n<!-- {c}. -->\n\n" for h, c in (*SECTIONS, ("Details", "Why"))
    )
    + "---\n\n<details>\n<summary> Checklist </summary>\n\n"
    "- [ ] I ran the checklist skill.\n"
    "- [ ] AI assistance was used during the creation of this PR.\n</details>\n"
)
BASE_FILES = {
    "pkg/core.py": "ZERO = False\n",
    "pkg/other.py": "X = 1\n",
    "README": "mini\n",
    ".github/PULL_REQUEST_TEMPLATE.md": TEMPLATE,
}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def commit(repo: Path, files: dict[str, str], message: str, tag: str = "") -> None:
    write(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, env=identity(NEUTRAL))
    if tag:
        git(repo, "tag", tag)


def new_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "--initial-branch=main")
    if files:
        commit(path, files, "files")
    return path


def programs(bin_dir: Path, **scripts: str) -> Path:
    bin_dir.mkdir(parents=True)
    for name, script in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{script}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def link_venv(venv: Path) -> Path:
    """`venv` as this interpreter's: bin/python, and a venv's pyvenv.cfg and lib/."""
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    if sys.prefix != sys.base_prefix:
        shutil.copy(Path(sys.prefix, "pyvenv.cfg"), venv)
        (venv / "lib").symlink_to(Path(sys.prefix, "lib"))
    return venv


def mini_fork(path: Path) -> Path:
    """Base (tagged `base`) plus two patches, one editing and one adding a file."""
    repo = new_repo(path)
    commit(repo, BASE_FILES, "mini 0.1", tag="base")
    sign = f"\n\nSigned-off-by: {NEUTRAL}\n"
    commit(repo, {"pkg/core.py": "ZERO = True\n"}, "[Core] Keep zeroing" + sign)
    commit(repo, {"tests/test_core.py": "def test(): pass\n"}, "[Test] Pin it" + sign)
    return repo


def stored(store: Path, check: str) -> checks.CheckResult:
    """The result `synthetic_results` wrote for `check`."""
    found = checks.read(store, check)
    assert found is not None, f"no {check} result in {store}"
    return found


def _outcomes(a: str, b: str, c: str, d: str) -> dict[str, Any]:
    tests = ("t::a", "t::b", "t::c", "fork_tests/c.py::d")  # d: a fork check
    return {"outcomes": dict(zip(tests, (a, b, c, d), strict=True))}


BASE_CMD = "$ python -m pytest -q tests -k zero"
# The regression matrix: the base fails two tests, a check too.
MATRIX = (
    {"base+tests failed": 2},
    {"base": f"{BASE_CMD}\nFAILED t::a - assert False is True\nFAILED t::b - boom"
             "\n1 passed, 2 failed (3 s)",
     "base tracebacks": "FAILED t::a - assert False is True\n"
                        "    E   assert False is True",
     "series": f"{BASE_CMD}\n3 passed (3 s)"},
    {"columns": {"base+tests": _outcomes("failed", "failed", "passed", "failed"),
                 "0001": _outcomes("passed", "passed", "passed", "passed"),
                 "0002": _outcomes("passed", "passed", "passed", "passed")},
     "table": "t::a  FAIL  ok  ok"},
)  # fmt: skip
MUTANT_ROWS = [  # mutation, kind, detail, gpu_only
    ("True -> False", "killed (series)", "tests/test_core.py::test_zero[a|b]", ""),
    ("assignment deleted", "killed (fork tests only)", "fork_tests/c.py::d",
     "only a GPU zeroes"),
    ("1 -> 2", "equivalent", "no test asks about 2", ""),
]  # fmt: skip
MUTANTS = [
    {"id": f"a{n}", "file": "pkg/core.py",
     **({"line": 2, "text": "n = 1"} if kind == "equivalent" else
        {"line": 1, "text": "ZERO = True"}),
     "mutation": mutation, "outcome": kind.split()[0], "kind": kind,
     "detail": detail, "gpu_only": gpu_only}
    for n, (mutation, kind, detail, gpu_only) in enumerate(MUTANT_ROWS, 1)
]  # fmt: skip
PP = "tests/d/test_pp.py::test_pp_mixed"
SUITE_RUN = {
    "args": ["-m", "cpu_test", "tests/v1/core"],
    "base": {"collected": 1207, "rerun": 0, "counts": {}},
    "fork": {"collected": 1210, "counts": {"passed": 1203, "skipped": 7}},
    "added": ["a", "b", "c"],
    **{key: [] for key in ("lost", "new", "pre_existing")},
}
HOOKS = [["ruff-check", "PASS", ""], ["typos", "PASS", ""],
         ["actionlint", "SKIPPED", "no wheel has it"]]  # fmt: skip
OVERRIDE_TESTS = ("fork_tests/t.py::replace", "fork_tests/t.py::new")


def made_checks() -> dict[str, tuple[dict, dict, dict]]:
    """Each required check's counts, excerpts and data."""
    return {
        "regression-matrix": MATRIX,
        "gpu-only": ({"skipped": 2}, {}, {
            "args": ["tests/d/test_pp.py", "-k", "test_pp_mixed"],
            "outcomes": {f"{PP}[a]": "skipped", f"{PP}[b]": "skipped"},
            "reasons": {f"{PP}[a]": "Need 2 GPUs"},
        }),
        "upstream-selection": ({}, {}, {"runs": {"v1-core": SUITE_RUN}}),
        "pre-commit": ({"PASS": 2, "SKIPPED": 1}, {}, {
            "version": "pre-commit 9.9.9",
            "files": ["pkg/core.py", "tests/test_core.py"],
            "hooks": HOOKS,
            "messages": [["0001 x", "signoff", "PASS", ""],
                         ["0002 y", "signoff", "PASS", ""]],
        }),
        "ci-checkers": ({"passed": 2, "failed": 0}, {}, {}),
        "ci-impact": ({}, {}, {"report": "### CI impact\n\n| A | B |\n| --- | --- |\n"
                                         "| 1 | 2 |\n"}),
        "mutants": (
            {"mutants": 3, "killed": 2, "killed by the series": 1,
             "killed only by fork tests": 1, "survived": 0, "equivalent": 1},
            {"table": "$ python3 -m forktool mutate\n..."},
            {"key": "k", "mutants": MUTANTS},
        ),
        "planner-fuzz": ({"passed": 4}, {}, {}),
        "fuzz-catches-base": ({"violations": 3}, {}, {}),
        "overrides": ({"passed": 2}, {}, {
            "table": "check  base  fork\nreplace  ok  ok",
            "base": dict(zip(OVERRIDE_TESTS, ("passed", "failed"), strict=True)),
            "fork": dict.fromkeys(OVERRIDE_TESTS, "passed"),
        }),
    }  # fmt: skip


def required() -> dict[str, str]:
    """The results the description needs, and the command that refreshes each."""
    return {c.name: c.command for c in checks.all_checks() if c.in_pr and c.gates_test}


def synthetic_results(store: Path, tree: str) -> None:
    """One result per required check, shaped as `test` writes them."""
    made = made_checks()
    missing, extra = set(required()) - set(made), set(made) - set(required())
    assert not (missing or extra), f"made_checks(): add {missing}, remove {extra}"
    for check, counts_excerpts_data in made.items():
        args = (check, True, tree, "0.1", required()[check], "", 1.0)
        result = checks.CheckResult(*args, *counts_excerpts_data, checks.inputs_id())
        checks.write(store, result)


def make_kit(fork: Path, store: Path, out: Path, signer=None, partial=False) -> str:
    return pr.make_kit(
        fork, store, out, REPO / "pr" / "description.toml", "0.1", NEUTRAL,
        signer, partial, lambda fork, text: None,
        ("tests/test_core.py", "-k", "zero"),
    )  # fmt: skip


def summarised(base, fork, aa, config="mixed", ids=(0, 0), n=64) -> dict:
    """Each process's `steps` answers: one list of step times (µs) per repeat."""
    runs = {"base": (base, ids[0]), "fork": (fork, ids[1]), "base-aa": (aa, ids[0])}
    return bench.summarise(bench.Case(config, "decode", n), {
        p: [{"cpu_ns": [t * 1000 for t in s], "zero_ids": [i] * len(s)} for s in reps]
        for p, (reps, i) in runs.items()})  # fmt: skip


def bench_row(config: str, fork: list[float], aa: list[float], ids=(0, 0), n=64):
    """One step a repeat, the base's always 100 µs."""
    one = [[t] for t in fork], [[t] for t in aa]
    return summarised([[100.0]] * len(fork), *one, config, ids, n)


def bench_result(tree: str, aa: list[float]) -> checks.CheckResult:
    """A bench result of one mixed case: fork/base 1.004, A/A ratios `aa`."""
    row = bench_row("mixed", [100.4] * 3, aa)
    table = "config  fork/base\nmixed   1.004"
    return checks.CheckResult(
        "bench", True, tree, "0.1", "python3 -m forktool bench",
        excerpts={"goals": "as printed", "table": table}, data={"rows": [row]},
        inputs=checks.inputs_id(),
    )  # fmt: skip
