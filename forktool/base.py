"""The fork's base: the pristine sdist, unpacked and committed.

The fork is a git repository whose first commit is the pristine sdist
(tagged `base`) and whose following commits are the series, one per patch
(forktool.am applies them). The tool's identity (pins.toml's fork author) is
used only for the commits the tool makes; people's commits in the fork carry
their own git identity.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from pathlib import Path

from forktool.process import BASE_TAG, ISOLATED, ForkToolError, git, identity

# A fixed date for the base commit, and committer dates taken from the
# patches' author dates (forktool.am): the same base and series give the same
# commit ids.
BASE_DATE = "2000-01-01T00:00:00+00:00"


def _extract(sdist: Path, dest: Path) -> None:
    """Unpack the sdist's single top-level directory into `dest`."""
    with tarfile.open(sdist) as tar:
        tops = {Path(m.name).parts[0] for m in tar.getmembers()}
        if len(tops) != 1:
            raise ForkToolError(f"{sdist} has {len(tops)} top-level entries, not one")
        # A fixed name, so that what a killed run left is found and removed.
        unpack = dest.with_name(f"{dest.name}.unpack")
        shutil.rmtree(unpack, ignore_errors=True)
        try:
            # The "data" filter refuses unsafe paths and drops the archive's
            # owners, so the tree belongs to us and git trusts it.
            tar.extractall(unpack, filter="data")
            os.replace(unpack / tops.pop(), dest)
        finally:
            shutil.rmtree(unpack, ignore_errors=True)


def create_base(
    sdist: Path, fork: Path, author: str, message: str, generated: tuple[str, ...]
) -> None:
    """Make `fork`, which must not exist, a repository whose only commit is
    the unpacked sdist.

    `generated` names sdist paths that builds rewrite; they stay untracked
    (and ignored) so that installing the fork leaves its tree clean.
    """
    fork.parent.mkdir(parents=True, exist_ok=True)
    _extract(sdist, fork)
    # No user.name/user.email here: people commit in the fork as themselves.
    # No template and nobody's config (core.autocrlf, ...): the same blobs
    # and commit in every clone.
    init = ["init", "-q", "--template=", "--initial-branch=main"]
    git(fork, *init, env=ISOLATED)
    # Every source file, also those the sdist's .gitignore matches.
    git(fork, "add", "-A", "--force", env=ISOLATED)
    untrack = ["rm", "-r", "-q", "--cached", "--ignore-unmatch", *generated]
    git(fork, *untrack, env=ISOLATED)
    exclude = fork / ".git" / "info" / "exclude"
    exclude.parent.mkdir(exist_ok=True)
    exclude.write_text("".join(f"/{path}\n" for path in generated))
    dated = {"GIT_AUTHOR_DATE": BASE_DATE, "GIT_COMMITTER_DATE": BASE_DATE}
    env = {**ISOLATED, **identity(author), **dated}
    git(fork, "commit", "-q", "-m", message, env=env)
    git(fork, "tag", BASE_TAG, env=ISOLATED)
