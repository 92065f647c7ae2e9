"""The synthetic fork's workspace fixture, shared by the fork's test modules."""

from test_fork import workspace  # noqa: F401
