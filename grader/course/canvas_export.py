"""`grader export canvas`: the class's final totals as a CSV that Canvas's gradebook imports.

Columns: Student, ID, SIS User ID, SIS Login ID, Section, and one assignment column, then a "Points
Possible" row as Canvas's own export has. Canvas matches a row to a student by ID, else SIS User ID,
else SIS Login ID (so a Gradescope roster's SID goes in SIS User ID); an assignment column named
"A2 (12345)", with the Canvas assignment id, updates that assignment, any other name creates one.
The score is the final total: after the course file's late penalty (OUT/course.toml). Every roster
student gets a row; a student with no submission, or whose grade is a harness error, gets an empty
cell (Canvas leaves it alone) and is listed; ids no roster student has are listed, never dropped.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from grader.course import late
from grader.course.course_file import installed_course
from grader.course.roster import match, read_roster
from grader.report.atomic import write_atomic
from grader.report.plain_text import csv_row

COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
HARNESS_ERROR = "harness_error"


@dataclass
class Export:
    path: Path
    scored: int = 0
    listed: list[str] = field(default_factory=list)      # what the TA must look at, one line each

    def summary(self) -> str:
        lines = [f"wrote {self.path}: {self.scored} students with a score"]
        if self.listed:
            lines.append(f"{len(self.listed)} to look at:")
            lines += [f"  {line}" for line in self.listed]
        return "\n".join(lines)


def export_canvas(reports: Path, out: Path, roster_path: Path, assignment: str | None = None) -> Export:
    from grader.report.class_files import load_results

    results = {r["id"]: r for r in load_results(Path(reports))}
    course = installed_course(Path(reports))
    roster = read_roster(roster_path)
    found = match(roster, results)
    column = assignment or (course.assignment if course else "Assignment")
    possible = max((r["score"]["possible"] for r in results.values() if r.get("status") != HARNESS_ERROR), default=0)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(csv_row(COLUMNS + [column]))
    writer.writerow(csv_row(["Points Possible", "", "", "", ""] + [_number(possible)]))
    export = Export(Path(out))
    owner = {id(student): student_id for student_id, student in found.by_id.items()}
    for student in roster.students:
        student_id = owner.get(id(student))
        score = ""
        if student_id is None:
            export.listed.append(f"no submission: {student.name} ({_keys(student)})")
        elif results[student_id].get("status") == HARNESS_ERROR:
            export.listed.append(f"no grade (harness error; regrade it): {student_id} = {student.name}")
        else:
            assessed = late.assess(course, results[student_id])
            score = _number(assessed.final)
            export.scored += 1
        sis_user = student.sis_user_id or student.sid
        # roster names and ids may be what students typed into the LMS: never a spreadsheet formula
        writer.writerow(csv_row([student.name, student.canvas_id, sis_user, student.sis_login_id, student.section,
                                 score]))
    export.listed += [f"submission {student_id} matches no student of the {roster.kind}"
                      for student_id in found.unknown]
    export.listed += [f"submission {student_id} matches several students: {', '.join(s.name for s in many)}"
                      for student_id, many in found.ambiguous.items()]
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(Path(out), text.getvalue())
    return export


def _keys(student) -> str:
    return ", ".join(k for k in (student.canvas_id, student.sis_user_id, student.email, student.sid) if k) or "no id"


def _number(value: float) -> str:
    return f"{round(value, 4):g}"
