"""The synthetic fork's workspace fixture, shared by the fork's test modules,
and a git config of the tests' own."""

import pytest
from fork_fixture import workspace  # noqa: F401


@pytest.fixture(autouse=True)
def isolated_git_config(monkeypatch, tmp_path_factory):
    """No global or system git config (signing, hooks, templates, the default
    branch) reaches the git commands the tests run themselves."""
    home = tmp_path_factory.mktemp("git-home")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Tool Tests\n\temail = tool-tests@noreply.invalid\n"
    )
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
