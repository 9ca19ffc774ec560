"""Errors the harness raises on purpose, with messages meant for the person who ran the command."""


class GraderError(Exception):
    """A problem the user can fix (bad input, bad configuration); the CLI prints it without a traceback."""


class PointsFileError(GraderError):
    """A points file is malformed; the message names the file and the key."""


class HandoutError(GraderError):
    """The solutions' markers are malformed; the message names the file and line."""


class BadSubmission(GraderError):
    """A submission cannot be graded (no module files, unreadable archive)."""


def not_implemented_cause(error: BaseException | None) -> NotImplementedError | None:
    """The stub's NotImplementedError in `error` or its causes: Triton's interpreter re-raises one from
    a kernel as its own InterpreterError, and the worker and the checker must both see through it. The
    interpreter's own NotImplementedError (an operation it lacks) is no stub: grader.interpreter_limits."""
    from grader.interpreter_limits import interpreter_limit

    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, NotImplementedError) and interpreter_limit("NotImplementedError", str(error)) is None:
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None
