"""The synthetic fork's fixtures and the tests' own git config."""

import os
import shutil
import tempfile
from pathlib import Path

from fork_fixture import workspace, ws  # noqa: F401

_GIT_HOME = Path(tempfile.mkdtemp(prefix="tool-tests-git-"))


def pytest_configure(config):
    """No global or system git config (signing, hooks) reaches the tests' git."""
    gitconfig = _GIT_HOME / ".gitconfig"
    gitconfig.write_text(
        "[user]\n\tname = Tool Tests\n\temail = tool-tests@noreply.invalid\n"
    )
    os.environ["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    os.environ["GIT_CONFIG_NOSYSTEM"] = "1"


def pytest_unconfigure(config):
    shutil.rmtree(_GIT_HOME, ignore_errors=True)
