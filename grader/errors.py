"""Errors the harness raises on purpose, with messages meant for the person who ran the command."""


class GraderError(Exception):
    """A problem the user can fix (bad input, bad configuration); the CLI prints it without a traceback."""


class PointsFileError(GraderError):
    """A points file is malformed; the message names the file and the key."""


class HandoutError(GraderError):
    """The solutions' markers are malformed; the message names the file and line."""


class BadSubmission(GraderError):
    """A submission cannot be graded (no module files, unreadable archive)."""
