"""Errors that stop a run before heavy work, each with a one-line message."""


class NeardupError(Exception):
    """Base class: the CLI prints these as one line and exits with status 2."""


class InputError(NeardupError):
    """The input is unreadable or does not have the promised shape."""


class BackendError(NeardupError):
    """An optional backend (GraphFrames) was chosen but is not usable here."""


class ConvergenceError(NeardupError):
    """An iterative stage did not converge within its configured limit."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message; for Py4J errors, the JVM's own."""
    java = getattr(exc, "java_exception", None)
    lines = (str(java.toString()) if java is not None else str(exc)).strip().splitlines()
    return (lines[0] if lines else exc.__class__.__name__)[:limit]
