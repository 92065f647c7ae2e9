"""vLLM's Buildkite steps, read from the pipeline YAML at a revision, and
which changed files trigger them.

NVIDIA steps: those of the YAMLs under the `job_dirs:` of
.buildkite/ci_config*.yaml, found as
tools/pre_commit/check_buildkite_step_keys.py finds them (counted per job dir:
the Intel and CPU ones live there too). AMD steps: each step's `mirror.amd`
block (`amd-<key>`), steps on an AMD GPU (`mi…`), .buildkite/test-amd.yaml.

Where the matching rules come from: the pipeline generator, vllm-project/ci-infra
buildkite/pipeline_generator/buildkite_step.py at 0009bdf5 (not in the sdist,
not pinned by vLLM).
* `_matches_source_dependency`: an entry, trailing `/` stripped, matches a path
  equal to it or under it at a `/` boundary; no globs.
* `_source_file_dependencies_match`: a file matching a `!` entry does not
  count, whatever the order; no entries, no match.
* `_get_amd_mirror_effective_step`: a mirror's entries are its own followed by
  its parent's; `optional` is the mirror's, else the parent's.
* `_step_should_run`: an `optional: true` step gets a block step (nightly or a
  manual unblock). run_all patterns, always-run keys and the AMD runtime-script
  rule are not modelled.
In-tree: .buildkite/test-amd.yaml lines 12 (`optional`) and 27
(`source_file_dependencies`: "prefixes to opt-in the test for");
.buildkite/test_areas/distributed.yaml line 13 (a `!` entry).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forktool.process import git

TEST_AMD_YAML = ".buildkite/test-amd.yaml"
NVIDIA, AMD = "NVIDIA", "AMD"
AMD_GPU = re.compile(r"mi\d+_\w+")


def entry_matches(entry: str, path: str) -> bool:
    prefix = entry.rstrip("/")
    return bool(prefix) and (path == prefix or path.startswith(prefix + "/"))


def triggers(deps: list[str], changed: Iterable[str]) -> dict[str, list[str]]:
    """Changed file -> the include entries selecting it, for each file that
    some include entry selects and no `!` entry excludes."""
    excludes = [d[1:] for d in deps if d.startswith("!")]
    hits = {
        path: [d for d in deps if d[:1] != "!" and entry_matches(d, path)]
        for path in changed
        if not any(entry_matches(e, path) for e in excludes)
    }
    return {path: entries for path, entries in hits.items() if entries}


@dataclass(frozen=True)
class Step:
    pipeline: str
    source: str  # the YAML file
    raw: dict[str, Any] = field(compare=False, repr=False)
    key: str | None = None
    inherited: tuple[str, ...] = ()  # a mirror's entries taken from its parent

    @property
    def label(self) -> str:
        return str(self.raw.get("label") or self.key)

    @property
    def runs(self) -> str:
        """Blocked until nightly or a manual unblock, or run on a PR."""
        return "optional" if self.raw.get("optional") else "PR"

    @property
    def deps(self) -> list[str]:
        return [str(d) for d in self.raw.get("source_file_dependencies") or ()]

    @property
    def commands(self) -> list[str]:
        listed = self.raw.get("commands") or [self.raw.get("command")]
        flat = [c for i in listed for c in (i if isinstance(i, list) else [i])]
        return [c for c in flat if isinstance(c, str)]


def mirror_step(parent: dict[str, Any], amd: dict[str, Any], source: str) -> Step:
    """The AMD step the generator publishes for `parent`'s `mirror.amd` block:
    the parent's fields overridden by the mirror's, entries excepted."""
    own = [str(d) for d in amd.get("source_file_dependencies") or ()]
    theirs = [str(d) for d in parent.get("source_file_dependencies") or ()]
    inherited = tuple(d for d in theirs if d not in own)
    label = amd.get("label") or f"AMD: {parent.get('label')} ({amd.get('device')})"
    raw = {**parent, **amd, "label": label}
    raw["source_file_dependencies"] = [*own, *inherited]
    key = f"amd-{parent['key']}" if parent.get("key") else None
    return Step(AMD, source, raw, key, inherited)


def job_steps(doc: Any, source: str, pipeline: str | None = None) -> list[Step]:
    """The steps of one pipeline YAML document, each followed by its AMD mirror."""
    steps = []
    raws = doc.get("steps") if isinstance(doc, dict) else None
    for raw in [r for r in raws or () if isinstance(r, dict)]:
        gpu = AMD_GPU.fullmatch(str(raw.get("device") or ""))
        kind = pipeline or (AMD if gpu else NVIDIA)
        steps.append(Step(kind, source, raw, raw.get("key")))
        amd = (raw.get("mirror") or {}).get("amd")
        if isinstance(amd, dict):
            steps.append(mirror_step(raw, amd, source))
    return steps


def steps_at(fork: Path, rev: str) -> list[Step]:
    """Both pipelines' steps, as the YAML at `rev` defines them."""
    import yaml  # the fork venv's

    def load(path: str) -> Any:
        return yaml.safe_load(git(fork, "show", f"{rev}:{path}").stdout)

    def listed(directory: str, *recursive: str) -> list[str]:
        out = git(fork, "ls-tree", "--name-only", *recursive, rev, "--", directory)
        return sorted(p for p in out.stdout.splitlines() if p.endswith(".yaml"))

    buildkite = listed(".buildkite/")
    configs = [p for p in buildkite if Path(p).name.startswith("ci_config")]
    job_dirs = {d.rstrip("/") + "/" for c in configs for d in load(c)["job_dirs"]}
    files = sorted({p for d in job_dirs for p in listed(d, "-r")})
    steps = [s for path in files for s in job_steps(load(path), path)]
    if TEST_AMD_YAML in buildkite:
        steps += job_steps(load(TEST_AMD_YAML), TEST_AMD_YAML, AMD)
    return steps
