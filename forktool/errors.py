"""The one exception the CLI turns into a clear message and exit status 1."""


class ForkToolError(Exception):
    pass
