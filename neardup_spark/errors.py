"""Errors that stop a run before heavy work, each with a one-line message."""


class NeardupError(Exception):
    """Base class: the CLI prints these as one line and exits with status 2."""


class InputError(NeardupError):
    """The input is unreadable or does not have the promised shape."""


class BackendError(NeardupError):
    """An optional backend (GraphFrames) was chosen but is not usable here."""


class ConvergenceError(NeardupError):
    """An iterative stage did not converge within its configured limit."""
