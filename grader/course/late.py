"""The late penalty: one submission's result and the course file in, the penalty and the rule out.

A submission's time comes from intake (`submitted_at` in metadata.csv, see grader/grade/submission.py);
its due date is the course's, or its own extension. Lateness counts from the due date once past the
grace minutes; every started day (or hour) costs the policy's percent, at most its cap, of the points
earned (or possible), never below zero. A submission marked late without a time is said so, and no
penalty is guessed. Nothing here changes result.json: the reports apply it when they are written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from grader.course.course_file import Course, parse_time, shown_time

HARNESS_ERROR = "harness_error"      # no grade, so no penalty (grader/report/model.py owns the statuses)


@dataclass(frozen=True)
class Lateness:
    raw: float                 # the total before the penalty
    final: float | None        # after it; None when there is no grade (harness error)
    late: bool | None          # None: unknown
    late_s: float | None = None
    percent: float = 0.0
    penalty: float = 0.0       # points off
    rule: str = ""             # the policy in words ("" without a course file)
    outcome: str = ""          # what it meant for this submission, in words ("" when nothing to say)

    @property
    def late_hours(self) -> float | None:
        return None if self.late_s is None else max(0.0, self.late_s) / 3600.0


def assess(course: Course | None, result: dict) -> Lateness:
    raw = float(result.get("score", {}).get("earned", 0.0))
    possible = float(result.get("score", {}).get("possible", 0.0))
    flagged = result.get("late")
    if result.get("status") == HARNESS_ERROR:
        return Lateness(raw, None, flagged)
    submitted = str(result.get("submitted_at") or "").strip()
    due = course.due_for(str(result.get("id", ""))) if course else None
    rule = rule_text(course, str(result.get("id", "")))
    if due is None or not submitted:
        outcome = ""
        if flagged and course and course.late:
            outcome = ("marked late, but its submission time is unknown: no penalty applied (give "
                       "submitted_at in metadata.csv)")
        elif flagged:
            outcome = "marked late"
        return Lateness(raw, raw, flagged, rule=rule, outcome=outcome)
    try:
        moment = parse_time(submitted, course.zone)
    except ValueError:
        return Lateness(raw, raw, flagged, rule=rule,
                        outcome=f"submission time {submitted!r} is not an ISO time: no penalty applied")
    late_s = (moment - due).total_seconds()
    when = f"submitted {shown_time(moment, course.zone)}"
    policy = course.late
    grace_s = 60.0 * policy.grace_minutes if policy else 0.0
    if late_s <= grace_s:
        within = " (within the grace minutes)" if late_s > 0 else ""
        return Lateness(raw, raw, False, late_s, rule=rule, outcome=f"{when}: on time{within}")
    if policy is None:
        return Lateness(raw, raw, True, late_s, rule=rule, outcome=f"{when}: {duration_text(late_s)} late")
    units = math.ceil(late_s / policy.unit_s)
    percent = min(policy.cap, units * policy.percent)
    basis = raw if policy.of == "earned" else possible
    penalty = round(min(raw, basis * percent / 100.0), 4)
    final = round(raw - penalty, 4)
    plural = "s" if units != 1 else ""
    outcome = (f"{when}: {duration_text(late_s)} late, {units} {policy.per}{plural}: -{percent:g}% "
               f"(-{penalty:g} points): {final:g} of {raw:g}")
    return Lateness(raw, final, True, late_s, percent, penalty, rule, outcome)


def rule_text(course: Course | None, student: str) -> str:
    if course is None or course.due is None:
        return ""
    due = course.due_for(student)
    text = f"due {shown_time(due, course.zone)}"
    if student in course.extensions:
        text += f" (extended from {shown_time(course.due, course.zone)})"
    return text + (f"; {course.late.words()}" if course.late else "; no late penalty")


def duration_text(seconds: float) -> str:
    """3720 -> '1 h 2 min'; 88260 -> '1 d 31 min'."""
    minutes = max(0, int(math.ceil(seconds / 60.0)))
    days, minutes = divmod(minutes, 1440)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{days} d" if days else "", f"{hours} h" if hours else "",
             f"{minutes} min" if minutes else ""]
    return " ".join(p for p in parts if p) or "0 min"
