"""`course.toml`: the course's rules for one assignment, and the one reader of that file.

    [assignment]
    name = "A2 GPU systems"          # the assignment's column in the Canvas export
    due = "2026-03-06 23:59"         # local time in `timezone`, or an ISO time with its offset
    timezone = "America/New_York"    # IANA name; how times are shown

    [late]
    per = "day"                      # or "hour": every started day (hour) after the due date counts
    penalty = 10                     # percent off per started day (hour)
    cap = 50                         # at most this percent in all
    grace_minutes = 15               # this close after the due date is on time (optional)
    of = "earned"                    # the percent is of the points earned, or "possible"

    [extensions]                     # submission id = a new due date, or extra time ("2d", "36h")
    alice = "2026-03-09 23:59"
    bob = "48h"

    [gradescope]
    visible_after_due = ["matmul.shapes.variants"]   # hidden checks the autograder runs at submission
    timeout_s = 1200                                 # the autograder's budget per submission

    [leaderboard]
    salt = "any text"                # hashes ids into pseudonyms (default: a random salt kept in OUT)

`grader grade --course course.toml` checks the file and keeps a copy in the output folder
(`OUT/course.toml`), which every later `grader report OUT` applies: the penalty is worked out when the
reports are written, never stored in a grade, so granting an extension needs no regrade.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from grader.errors import GraderError

COURSE_FILE = "course.toml"          # its name in the output folder
SECTIONS = ("assignment", "late", "extensions", "gradescope", "leaderboard")
UNITS = {"day": 86400.0, "hour": 3600.0}
BASES = ("earned", "possible")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dh])\s*$")


@dataclass(frozen=True)
class LatePolicy:
    per: str                  # "day" or "hour"
    percent: float            # off per started unit
    cap: float                # percent at most
    grace_minutes: float = 0.0
    of: str = "earned"        # what the percent is of

    @property
    def unit_s(self) -> float:
        return UNITS[self.per]

    def words(self) -> str:
        grace = f"; {self.grace_minutes:g} minutes' grace" if self.grace_minutes else ""
        return (f"{self.percent:g}% of the points {self.of} off per started {self.per} late, "
                f"at most {self.cap:g}%{grace}")


@dataclass(frozen=True)
class Course:
    assignment: str = "Assignment"
    due: datetime | None = None                   # aware
    zone: object = timezone.utc                   # a tzinfo: how times are shown and read
    late: LatePolicy | None = None
    extensions: dict[str, datetime] = field(default_factory=dict)   # id -> its own due date
    visible_after_due: tuple[str, ...] = ()
    gradescope_timeout_s: float | None = None
    leaderboard_salt: str = ""
    source: str = ""                              # the file it was read from

    def due_for(self, student: str) -> datetime | None:
        return self.extensions.get(student, self.due)


def load_course(path: Path) -> Course:
    """Read and check a course file; GraderError naming the file and the key for anything wrong."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as error:
        raise GraderError(f"{path}: cannot read the course file ({error.strerror or error})") from None
    except tomllib.TOMLDecodeError as error:
        raise GraderError(f"{path}: not valid TOML: {error}") from None
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise GraderError(f"{path}: unknown section [{unknown[0]}]; the sections are {', '.join(SECTIONS)}")
    where = _Where(path)
    assignment = where.table(data, "assignment")
    zone = _zone(where, assignment.get("timezone"))
    due = _time(where, "assignment.due", assignment["due"], zone) if "due" in assignment else None
    late = _late(where, where.table(data, "late")) if "late" in data else None
    if late is not None and due is None:
        raise GraderError(f"{path}: [late] needs assignment.due, the due date the penalty counts from")
    extensions = {}
    for student, value in where.table(data, "extensions").items():
        extensions[str(student)] = _extension(where, f"extensions.{student}", value, due, zone)
    gradescope = where.table(data, "gradescope")
    visible = gradescope.get("visible_after_due", [])
    if not (isinstance(visible, list) and all(isinstance(v, str) for v in visible)):
        raise GraderError(f"{path}: gradescope.visible_after_due must be a list of check ids")
    timeout = gradescope.get("timeout_s")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise GraderError(f"{path}: gradescope.timeout_s must be a positive number of seconds")
    salt = where.table(data, "leaderboard").get("salt", "")
    return Course(str(assignment.get("name", "Assignment")), due, zone, late, extensions, tuple(visible),
                  float(timeout) if timeout is not None else None, str(salt), str(path))


def installed_course(out: Path) -> Course | None:
    """The course file kept in an output folder, or None when there is none."""
    path = Path(out) / COURSE_FILE
    return load_course(path) if path.is_file() else None


def install_course(path: Path, out: Path) -> Course:
    """Check `path` and keep a copy of it as OUT/course.toml, which the reports of OUT then apply."""
    from grader.report.atomic import write_atomic

    course = load_course(path)
    Path(out).mkdir(parents=True, exist_ok=True)
    write_atomic(Path(out) / COURSE_FILE, Path(path).read_text())
    return course


def parse_time(text: str, zone) -> datetime:
    """An ISO 8601 time ("2026-03-06 23:59", "2026-03-07T04:59:00Z", "...-05:00"); one without an
    offset is local time in `zone`. ValueError for anything else."""
    text = str(text).strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment


def shown_time(moment: datetime, zone) -> str:
    local = moment.astimezone(zone)
    return f"{local:%Y-%m-%d %H:%M} {local.tzname() or ''}".strip()


class _Where:
    def __init__(self, path: Path):
        self.path = path

    def table(self, data: dict, name: str) -> dict:
        value = data.get(name, {})
        if not isinstance(value, dict):
            raise GraderError(f"{self.path}: [{name}] must be a table")
        return value


def _zone(where: _Where, name):
    if name is None:
        return timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError):
        raise GraderError(f"{where.path}: assignment.timezone {name!r} is not an IANA time zone "
                          "(e.g. America/New_York, Europe/Berlin, UTC)") from None


def _time(where: _Where, key: str, value, zone) -> datetime:
    if isinstance(value, datetime):           # a TOML date-time, written without quotes
        return value.replace(tzinfo=zone) if value.tzinfo is None else value
    try:
        return parse_time(value, zone)
    except ValueError:
        raise GraderError(f"{where.path}: {key} = {value!r} is not a time like \"2026-03-06 23:59\" "
                          "or \"2026-03-06T23:59:00-05:00\"") from None


def _late(where: _Where, table: dict) -> LatePolicy:
    per = table.get("per", "day")
    if per not in UNITS:
        raise GraderError(f"{where.path}: late.per must be \"day\" or \"hour\", got {per!r}")
    numbers = {}
    for key, default in (("penalty", None), ("cap", 100.0), ("grace_minutes", 0.0)):
        value = table.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise GraderError(f"{where.path}: late.{key} must be a number >= 0"
                              + (" (the percent off per started day or hour)" if key == "penalty" else ""))
        numbers[key] = float(value)
    if numbers["cap"] > 100:
        raise GraderError(f"{where.path}: late.cap is a percent: at most 100, got {numbers['cap']:g}")
    of = table.get("of", "earned")
    if of not in BASES:
        raise GraderError(f"{where.path}: late.of must be \"earned\" or \"possible\", got {of!r}")
    unknown = sorted(set(table) - {"per", "penalty", "cap", "grace_minutes", "of"})
    if unknown:
        raise GraderError(f"{where.path}: unknown key late.{unknown[0]}")
    return LatePolicy(per, numbers["penalty"], numbers["cap"], numbers["grace_minutes"], of)


def _extension(where: _Where, key: str, value, due, zone) -> datetime:
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match:
        if due is None:
            raise GraderError(f"{where.path}: {key} = {value!r} is extra time, but there is no assignment.due")
        amount, unit = float(match.group(1)), match.group(2)
        return due + timedelta(days=amount) if unit == "d" else due + timedelta(hours=amount)
    return _time(where, key, value, zone)
