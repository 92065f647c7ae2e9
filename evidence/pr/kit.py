"""Writing the kit: the series re-signed, format-patch, apply-to-vllm.sh and
the blobs it merges from (preimages.pack)."""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from evidence.pr.description import plain_text
from forktool.process import (
    BASE_TAG,
    ISOLATED,
    SERIES,
    ForkToolError,
    git,
    identity,
    series_commits,
)


def resign(fork: Path, signer: str, neutral: str, trailer: str) -> str:
    """A copy of base..HEAD authored and signed off by `signer`, with the AI
    attribution `trailer`; the neutral identity's sign-off is dropped. Built
    with commit-tree: no branch, worktree or ref of the fork changes."""
    parent = git(fork, "rev-parse", f"{BASE_TAG}^{{commit}}").stdout.strip()
    for commit in series_commits(fork):
        message = git(fork, "log", "-1", "--format=%B", commit).stdout
        drop = f"Signed-off-by: {neutral}"
        kept = [line for line in message.splitlines() if line.strip() != drop]
        add = ["--trailer", trailer, "--trailer", f"Signed-off-by: {signer}"]
        add = ["interpret-trailers", "--if-exists", "addIfDifferent", *add]
        message = git(None, *add, input="\n".join(kept).rstrip() + "\n").stdout
        date = git(fork, "log", "-1", "--format=%aI", commit).stdout.strip()
        env = {**identity(signer), "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        parent = git(fork, "commit-tree", f"{commit}^{{tree}}", "-p", parent, "-F", "-",
                     input=message, env=env).stdout.strip()  # fmt: skip
    return parent


def format_series(
    fork: Path, head: str, out: Path, subject: str, body: str, sender: str
) -> None:
    """`git format-patch --cover-letter base..head` into `out`, the cover
    letter from `sender`, its subject and blurb filled in."""
    env = {**ISOLATED, **identity(sender)}
    git(fork, "format-patch", "--cover-letter", "--no-signature", "--full-index",
        "-o", str(out), f"{BASE_TAG}..{head}", env=env)  # fmt: skip
    cover = out / "0000-cover-letter.patch"
    text = cover.read_text()
    if "*** SUBJECT HERE ***" not in text or "*** BLURB HERE ***" not in text:
        raise ForkToolError(f"git format-patch wrote an unexpected {cover.name}")
    text = text.replace("*** SUBJECT HERE ***", subject, 1)
    cover.write_text(text.replace("*** BLURB HERE ***", body.rstrip(), 1))


def preimage_blobs(fork: Path) -> list[str]:
    """The blob each patch changes or deletes, as the fork had it before that
    patch: what `git am -3` needs to merge a patch onto files that differ."""
    diff = git(fork, "log", "--format=", "--raw", "--no-abbrev", "--no-renames", SERIES)
    # ":100644 100644 <before> <after> M\t<path>"
    blobs = {line.split()[2] for line in diff.stdout.splitlines() if line}
    return sorted(b for b in blobs if set(b) != {"0"})


def pack_blobs(fork: Path, blobs: list[str], out: Path) -> None:
    """`blobs` as one self-contained pack file, `out`."""
    listed = "".join(f"{b}\n" for b in blobs).encode()
    packed = git(fork, "pack-objects", "--stdout", input=listed, binary=True)
    out.write_bytes(packed.stdout)


# The script's template, @@NAMES@@ filled in by `apply_script`.
APPLY = Path(__file__).with_name("apply-to-vllm.sh")


def apply_script(ref: str, branch: str, tests: tuple[str, ...]) -> str:
    """The script, `tests` the pytest arguments of the series' regression tests."""
    command = shlex.join(["python", "-m", "pytest", *tests])
    return (
        APPLY.read_text()
        .replace("@@REF@@", ref)
        .replace("@@BRANCH@@", branch)
        .replace("@@TESTS@@", shlex.quote(command))
    )


# --- the kit ------------------------------------------------------------------------


def write_kit(fork: Path, out: Path, documents: dict[str, str], subject: str,
              head: str, sender: str, ref: str, branch: str,
              tests: tuple[str, ...]) -> None:  # fmt: skip
    """Write the kit to a sibling directory, then move it over `out`.
    `documents`: description.md (also the cover letter) and the files beside it."""
    description = documents["description.md"]
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for name, text in documents.items():
            (partial / name).write_text(text)
        (partial / "title.txt").write_text(subject + "\n")
        series = partial / "series"
        format_series(fork, head, series, subject, plain_text(description), sender)
        pack_blobs(fork, preimage_blobs(fork), partial / "preimages.pack")
        script = partial / "apply-to-vllm.sh"
        script.write_text(apply_script(ref, branch, tests))
        script.chmod(0o755)
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
