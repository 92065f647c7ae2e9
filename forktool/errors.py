"""The exceptions the CLI turns into a clear message and an exit status."""


class ForkToolError(Exception):
    """Something the user can act on: exit status 1."""

    status = 1


class ConflictError(ForkToolError):
    """A patch that does not apply, or one changed on both sides: something to
    resolve by hand. Exit status 3, as StGit's, so scripts tell it apart."""

    status = 3
