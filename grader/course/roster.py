"""The class roster: who each submission belongs to, from Canvas's gradebook export or Gradescope's
roster (told apart by their header row). The one reader of both formats.

- Canvas (Grades > Export): `Student, ID, SIS User ID, SIS Login ID, Section, ...`; its "Points
  Possible" row and Canvas's "Student, Test" are not students.
- Gradescope (Roster > Download, or a grade export): `Name` (or `First Name`, `Last Name`), `Email`,
  `SID`, optionally `Role` (only students are kept) and `Sections`.

A submission id matches a student when it equals one of the student's keys (Canvas: ID, SIS User ID,
SIS Login ID; Gradescope: email, the part of it before the @, SID), ignoring case, or when it is a
Canvas bulk download's `<name>_<user id>` whose user id is the student's Canvas ID. A key two students
share matches neither: the submission is listed as ambiguous, never given to one of them.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import GraderError

CANVAS, GRADESCOPE = "Canvas gradebook export", "Gradescope roster"
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_TEST_STUDENT = "Student, Test"
_CANVAS_GROUPED = re.compile(r"^.+_(\d+)$")


@dataclass(frozen=True)
class Student:
    name: str
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""
    email: str = ""
    sid: str = ""

    @property
    def keys(self) -> set[str]:
        local = self.email.split("@", 1)[0] if "@" in self.email else ""
        return {k.strip().lower() for k in (self.canvas_id, self.sis_user_id, self.sis_login_id, self.email,
                                            local, self.sid) if k.strip()}


@dataclass
class Roster:
    kind: str
    students: list[Student]


@dataclass
class Matched:
    by_id: dict[str, Student] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)          # ids no student has
    ambiguous: dict[str, list[Student]] = field(default_factory=dict)
    without_submission: list[Student] = field(default_factory=list)


def read_roster(path: Path) -> Roster:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise GraderError(f"{path}: cannot read the roster ({error})") from None
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    rows = [{k: (v or "").strip() for k, v in row.items() if k is not None} for row in reader]
    if {"Student", "ID"} <= set(header) or "SIS User ID" in header:
        return Roster(CANVAS, [s for s in map(_canvas_student, rows) if s is not None])
    if "Email" in header or "email" in header:
        return Roster(GRADESCOPE, [s for s in map(_gradescope_student, rows) if s is not None])
    raise GraderError(f"{path}: not a roster this reads: the header has none of Canvas's columns "
                      f"({', '.join(CANVAS_COLUMNS)}) nor Gradescope's (Name or First Name and Last Name, "
                      f"Email, SID); it has: {', '.join(header) or 'nothing'}")


def match(roster: Roster, submission_ids) -> Matched:
    owners: dict[str, list[Student]] = {}
    for student in roster.students:
        for key in student.keys:
            owners.setdefault(key, []).append(student)
    canvas_ids = {s.canvas_id: s for s in roster.students if s.canvas_id}
    found = Matched()
    for student_id in sorted(submission_ids):
        candidates = owners.get(student_id.lower(), [])
        grouped = _CANVAS_GROUPED.match(student_id)
        if not candidates and grouped and grouped.group(1) in canvas_ids:
            candidates = [canvas_ids[grouped.group(1)]]
        unique = list(dict.fromkeys(candidates))
        if len(unique) == 1:
            found.by_id[student_id] = unique[0]
        elif unique:
            found.ambiguous[student_id] = unique
        else:
            found.unknown.append(student_id)
    taken = {id(s) for s in found.by_id.values()}
    found.without_submission = [s for s in roster.students if id(s) not in taken]
    return found


def _canvas_student(row: dict) -> Student | None:
    name = row.get("Student", "")
    if name == "Points Possible" or name == CANVAS_TEST_STUDENT:
        return None
    student = Student(name, row.get("ID", ""), row.get("SIS User ID", ""), row.get("SIS Login ID", ""),
                      row.get("Section", ""))
    return student if student.keys else None


def _gradescope_student(row: dict) -> Student | None:
    role = row.get("Role", "")
    if role and role.lower() != "student":
        return None
    name = row.get("Name") or row.get("Full Name") or " ".join(
        part for part in (row.get("First Name", ""), row.get("Last Name", "")) if part)
    email = row.get("Email") or row.get("email", "")
    student = Student(name, section=row.get("Sections") or row.get("Section", ""), email=email, sid=row.get("SID", ""))
    return student if student.keys else None
