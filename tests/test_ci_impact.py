"""ci_impact's matching rules and -k evaluation on synthetic inputs."""

import sys

import pytest
from evidence_fixture import REPO, new_repo

from evidence import ci_impact
from forktool.layout import Layout
from forktool.process import ForkToolError

FORK = REPO / "build" / "vllm"
PP = "distributed/test_pipeline_parallel.py"
NAME = "test_pp_mixed_precision_kv_cache"
PARAMS = ["mp-first", "mp-last", "ray-first", "ray-last"]
# The keywords pytest gives each item: its name, module, directories, markers.
PARENTS = {"test_pipeline_parallel.py", "distributed", "tests", "parametrize"}
ITEMS = {f"{NAME}[{p}]": frozenset({f"{NAME}[{p}]", *PARENTS}) for p in PARAMS}
AMD, NVIDIA = ci_impact.AMD, ci_impact.NVIDIA
WORKER = "vllm/v1/worker/gpu/"
GPU_WORKER = "vllm/v1/worker/gpu_worker.py"


@pytest.mark.parametrize(("entry", "path", "expected"), [
    (GPU_WORKER, GPU_WORKER, True), (WORKER, WORKER + "model_runner.py", True),
    ("tests/distributed", "tests/distributed/test_pipeline_parallel.py", True),
    # A prefix at a `/` boundary only, never a bare string prefix.
    (WORKER, GPU_WORKER, False), ("vllm/v1/worker/gpu", GPU_WORKER, False),
    ("vllm/x.py", "vllm/x.pyi", False),
    # No globs; a file does not select its directory; empty entries nothing.
    ("vllm/*/core/", "vllm/v1/core/kv_cache_utils.py", False),
    ("vllm/v1/core/x.py", "vllm/v1/core", False), ("/", "vllm/x.py", False),
    ("", "vllm/x.py", False),
])  # fmt: skip
def test_entry_matches_the_path_or_a_subtree(entry, path, expected):
    assert ci_impact.entry_matches(entry, path) is expected


@pytest.mark.parametrize("deps", [
    ["vllm/", "!vllm/distributed/kv_transfer/", "tests/distributed/"],
    ["!vllm/distributed/kv_transfer/", "tests/distributed/", "vllm/"],
])  # fmt: skip
def test_exclusions_drop_only_the_files_they_match_in_any_order(deps):
    changed = ["vllm/distributed/kv_transfer/base.py"]
    changed += ["vllm/distributed/parallel_state.py", "tests/distributed/test_x.py"]
    assert ci_impact.triggers(deps, changed) == {
        "vllm/distributed/parallel_state.py": ["vllm/"],
        "tests/distributed/test_x.py": ["tests/distributed/"],
    }
    assert ci_impact.triggers(deps, changed[:1]) == {}
    # No includes, no match; every matching entry is kept.
    assert ci_impact.triggers(["!vllm/"], ["vllm/x.py", "setup.py"]) == {}
    assert ci_impact.triggers([], ["vllm/x.py"]) == {}
    utils = "vllm/v1/core/kv_cache_utils.py"
    deps = ["vllm/v1/", "vllm/v1/core/", utils]
    assert ci_impact.triggers(deps, [utils]) == {utils: deps}


def pp_doc(**mirror: object) -> dict:
    """distributed.yaml's pipeline-parallel step and its AMD mirror, reduced."""
    parent = {"label": "PP", "key": "pp", "optional": True, "device": "l4",
              "source_file_dependencies": ["vllm/distributed/", WORKER],
              "commands": [f"pytest -v -s {PP}"],
              "mirror": {"amd": {"device": "mi250_4", "optional": False,
                                 **mirror}}}  # fmt: skip
    return {"steps": ["wait", parent]}


def test_mirrors_amd_steps_and_a_steps_row():
    """A mirror takes its own entries, then its parent's."""
    doc = pp_doc(source_file_dependencies=["vllm/distributed/", "tests/distributed/"])
    nvidia, amd = ci_impact.job_steps(doc, "d.yaml")
    assert (nvidia.pipeline, nvidia.key, nvidia.runs) == (NVIDIA, "pp", "optional")
    assert (amd.pipeline, amd.key, amd.runs) == (AMD, "amd-pp", "PR")
    assert amd.deps == ["vllm/distributed/", "tests/distributed/", WORKER]
    assert amd.inherited == (WORKER,)
    assert amd.commands == nvidia.commands  # none of its own: the parent's
    changed = ["vllm/v1/worker/gpu/model_runner.py"]
    assert ci_impact.triggers(amd.deps, changed)  # only through the parent's entry
    cell = "`vllm/v1/worker/gpu/` (parent's) ← `model_runner.py`"
    assert ci_impact.trigger_cell(amd, changed) == cell
    # Without entries or `optional` of its own, a mirror inherits them.
    doc = pp_doc(commands=["pytest -v -s distributed -k ray"])
    del doc["steps"][1]["mirror"]["amd"]["optional"]
    _, amd = ci_impact.job_steps(doc, "d.yaml")
    assert amd.deps == ["vllm/distributed/", WORKER]
    assert (amd.runs, amd.commands) == ("optional", ["pytest -v -s distributed -k ray"])
    # Steps on an AMD GPU and those of the legacy AMD YAML are AMD's.
    doc = {"steps": [{"key": "a", "device": "mi355_1"}, {"key": "c", "device": "h100"}]}
    assert [s.pipeline for s in ci_impact.job_steps(doc, "x.yaml")] == [AMD, NVIDIA]
    legacy = {"steps": [{"label": "PP", "agent_pool": "mi250_4", "command": "pytest"}]}
    (step,) = ci_impact.job_steps(legacy, ci_impact.TEST_AMD_YAML, AMD)
    assert (step.pipeline, step.key, step.commands) == (AMD, None, ["pytest"])
    # A row shows each revision, and a step missing at one.
    _, amd = ci_impact.job_steps(pp_doc(), "d.yaml")
    changed = ["vllm/v1/worker/gpu/model_runner.py", "tests/distributed/test_x.py"]
    new = ci_impact.Found(amd, list(ITEMS)[2:], False)
    assert ci_impact.table_row(None, new, len(ITEMS), changed) == (
        "| AMD | AMD: PP (mi250_4) | `amd-pp` | PR | [ray-first], [ray-last] | absent "
        f"| {cell} |"
    )


@pytest.mark.parametrize(("tokens", "keyword", "marker", "deselect"), [
    (["pytest", "-v", "-s", "a.py", "-k", "ray"], "ray", None, []),
    (["pytest", "-kray", "-n", "2", "a.py"], "ray", None, []),
    (["pytest", "--keyword=ray", "-k", "mp", "a.py"], "mp", None, []),  # the last
    (["pytest", "-m", "not x", "--deselect=a::t", "a"], None, "not x", ["a::t"]),
])  # fmt: skip
def test_pytest_options(tokens, keyword, marker, deselect):
    opts = ci_impact.pytest_options(tokens)
    assert (opts.keyword, opts.marker, opts.deselect) == (keyword, marker, deselect)


@pytest.mark.parametrize(("expr", "expected"), [
    ("ray", ["ray-first", "ray-last"]),
    ("RAY", ["ray-first", "ray-last"]),  # case-insensitive
    ("not ray", ["mp-first", "mp-last"]), ("ray and last", ["ray-last"]),
    ("(mp or ray) and not first", ["mp-last", "ray-last"]),
    ("pipeline_parallel", PARAMS),  # the module's name is a keyword
    ("tp", []), ("", PARAMS),  # no filter
])  # fmt: skip
def test_k_is_evaluated_by_pytest_against_item_keywords(expr, expected):
    chosen = [i for i, kw in ITEMS.items() if ci_impact.k_selects(expr, kw)]
    assert chosen == [f"{NAME}[{p}]" for p in expected]


@pytest.mark.parametrize("selector, selects", [
    (PP, True), (f"{PP}::{NAME}", True), (f"{PP}::{NAME}[ray-last]", True),
    (f"{PP}::{NAME}[mp-last]", False), (f"{PP}::test_pp", False),
])  # fmt: skip
def test_node_selectors(selector, selects):
    assert ci_impact.node_selects(selector, f"{NAME}[ray-last]") is selects


@pytest.mark.skipif(not (FORK / ci_impact.TETHERING).is_file(), reason="no fork")
@pytest.mark.parametrize(("command", "expected", "flagged"), [
    (f"pytest -v -s {PP} -k 'ray'", 2, False), ("pytest -v -s distributed", 4, False),
    (f"pytest tests/{PP}::test_other", 0, False),
    ('bash run.sh 2 "VLLM_MULTI_NODE=1 pytest -v -s distributed -k mp"', 2, False),
    (f"pytest distributed --ignore={PP}", 0, False), (f"echo pytest {PP}", 0, False),
    (f"pytest -k ray --deselect {PP}::{NAME}[ray-last] {PP}", 1, False),
    (f"pytest -m 'not slow' {PP}", 4, True),
])  # fmt: skip
def test_collected_through_the_forks_parser(command, expected, flagged):
    step = ci_impact.Step(NVIDIA, "x.yaml", {"commands": [command]}, "x")
    tk = ci_impact.load_tethering(FORK)
    items, unevaluated = ci_impact.collected(step, f"tests/{PP}", ITEMS, tk)
    assert (len(items), unevaluated) == (expected, flagged)


def test_keywords_are_collected_in_the_tree_through_the_runner(tmp_path, monkeypatch):
    """A --collect-only in the tree, by the runner (its report beside its log)."""
    test = "@pytest.mark.parametrize('backend', ['ray', 'mp'])\ndef test_pp(backend):"
    text = f"import pytest\n\n{test}\n    pass\n"
    tree = new_repo(tmp_path / "tree", {"tests/test_pp.py": text})
    monkeypatch.setattr(ci_impact, "LAYOUT", Layout(tmp_path))
    items = ci_impact.collect(tree, "tests/test_pp.py", sys.executable)
    assert set(items) == {"test_pp[ray]", "test_pp[mp]"}
    assert ci_impact.k_selects("ray", items["test_pp[ray]"])
    assert not ci_impact.k_selects("ray", items["test_pp[mp]"])
    assert (tmp_path / "build" / "logs" / "ci-impact-collect.jsonl").exists()


def test_the_report_takes_its_test_from_gpu_only_as_one_node_id(tmp_path, monkeypatch):
    real = (REPO / "upstream-tests.toml").read_text()
    node = f'"tests/{PP}::{NAME}"'
    assert node in real  # the test the report is on
    as_k = real.replace(node, f'"tests/{PP}", "-k", "{NAME}"')
    (tmp_path / "upstream-tests.toml").write_text(as_k)
    monkeypatch.setattr(ci_impact, "LAYOUT", Layout(tmp_path))
    with pytest.raises(ForkToolError, match=r"args is \['tests/.*'-k'.*one node id"):
        ci_impact.report(FORK, sys.executable)
