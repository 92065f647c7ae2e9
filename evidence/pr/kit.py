"""Writing the kit: the series re-signed, format-patch with a cover letter,
apply-to-vllm.sh and the blobs it merges from (preimages.pack)."""

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
    drop, sign = f"Signed-off-by: {neutral}", f"Signed-off-by: {signer}"
    add = ("--if-exists", "addIfDifferent", "--trailer", trailer, "--trailer", sign)
    for commit in series_commits(fork):
        message = git(fork, "log", "-1", "--format=%B", commit).stdout
        kept = "\n".join(s for s in message.splitlines() if s.strip() != drop)
        message = git(
            None, "interpret-trailers", *add, input=kept.rstrip() + "\n"
        ).stdout
        date = git(fork, "log", "-1", "--format=%aI", commit).stdout.strip()
        env = {**identity(signer), "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        parent = git(fork, "commit-tree", f"{commit}^{{tree}}", "-p", parent, "-F", "-",
                     input=message, env=env).stdout.strip()  # fmt: skip
    return parent


def pack_preimages(fork: Path, out: Path) -> None:
    """The blob each patch changes or deletes, as the fork had it before that
    patch (what `git am -3` needs to merge a patch onto files that differ), as
    one self-contained pack file, `out`."""
    diff = git(fork, "log", "--format=", "--raw", "--no-abbrev", "--no-renames", SERIES)
    # ":100644 100644 <before> <after> M\t<path>"
    blobs = {line.split()[2] for line in diff.stdout.splitlines() if line}
    listed = "".join(f"{b}\n" for b in sorted(blobs) if set(b) != {"0"}).encode()
    packed = git(fork, "pack-objects", "--stdout", input=listed, binary=True)
    out.write_bytes(packed.stdout)


def write_kit(fork: Path, out: Path, documents: dict[str, str], subject: str,
              head: str, sender: str, ref: str, branch: str,
              tests: tuple[str, ...]) -> None:  # fmt: skip
    """Write the kit to a sibling directory, then move it over `out`.
    `documents`: description.md (also the cover letter) and the files beside it;
    `tests`: the pytest arguments of the series' regression tests, which
    apply-to-vllm.sh (@@NAMES@@ filled in) prints."""
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        for name, text in documents.items():
            (partial / name).write_text(text)
        (partial / "title.txt").write_text(subject + "\n")
        # The series from `sender`, the cover letter's subject and blurb filled in.
        series, env = partial / "series", {**ISOLATED, **identity(sender)}
        opts = ("--cover-letter", "--no-signature", "--full-index", "-o", str(series))
        git(fork, "format-patch", *opts, f"{BASE_TAG}..{head}", env=env)
        cover = series / "0000-cover-letter.patch"
        text = cover.read_text()
        if "*** SUBJECT HERE ***" not in text or "*** BLURB HERE ***" not in text:
            raise ForkToolError(f"git format-patch wrote an unexpected {cover.name}")
        blurb = plain_text(documents["description.md"]).rstrip()
        text = text.replace("*** SUBJECT HERE ***", subject, 1)
        cover.write_text(text.replace("*** BLURB HERE ***", blurb, 1))
        pack_preimages(fork, partial / "preimages.pack")
        command = shlex.quote(shlex.join(["python", "-m", "pytest", *tests]))
        script = partial / "apply-to-vllm.sh"
        template = Path(__file__).with_name(script.name).read_text()
        filled = template.replace("@@REF@@", ref).replace("@@BRANCH@@", branch)
        script.write_text(filled.replace("@@TESTS@@", command))
        script.chmod(0o755)
        old = out.with_name(f".{out.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        if out.exists():
            os.replace(out, old)
        os.replace(partial, out)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
