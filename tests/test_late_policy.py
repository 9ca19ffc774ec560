"""The course file and the late penalty: how lateness is counted, and where the rule applied shows
(grades.csv, the student's report, the class page, the Gradescope upload), without a regrade."""

import csv
import textwrap

import pytest
from click.testing import CliRunner
from course_fakes import graded, read_json, write_points, write_results

from grader import cli
from grader.course import late
from grader.course.course_file import install_course, load_course
from grader.errors import GraderError
from grader.report.class_files import write_class_files

COURSE = """
[assignment]
name = "A2"
due = "2026-03-06 23:59"
timezone = "America/New_York"
[late]
per = "day"
penalty = 10
cap = 25
grace_minutes = 15
[extensions]
alice = "2d"
"""


def _course(tmp_path, text=COURSE, name="course.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def points(tmp_path):
    return write_points(tmp_path / "points")


@pytest.mark.parametrize("submitted, percent", [
    ("2026-03-06 23:50", 0),                    # before the due date
    ("2026-03-07 00:10", 0),                    # 11 minutes late: within the grace minutes
    ("2026-03-07 00:30", 10),                   # 31 minutes: one started day
    ("2026-03-07T05:30:00Z", 10),               # the same moment in UTC
    ("2026-03-08 00:30", 20),                   # one day and 31 minutes: two started days
    ("2026-03-10 01:00", 25),                   # four started days, capped at 25%
])
def test_penalty_counts_started_days_after_the_grace_minutes_up_to_the_cap(tmp_path, points, submitted, percent):
    course = load_course(_course(tmp_path))
    assessed = late.assess(course, graded(points, "bob", submitted_at=submitted))
    raw = assessed.raw
    assert assessed.percent == percent
    assert assessed.penalty == pytest.approx(raw * percent / 100)
    assert assessed.final == pytest.approx(raw - assessed.penalty)
    assert assessed.late is (percent > 0)


def test_an_extension_moves_that_students_due_date_only(tmp_path, points):
    course = load_course(_course(tmp_path))
    for student, percent in (("alice", 0), ("bob", 10)):
        assessed = late.assess(course, graded(points, student, submitted_at="2026-03-07 12:00"))
        assert assessed.percent == percent, student
    assert "extended from 2026-03-06 23:59 EST" in late.assess(course, graded(points, "alice")).rule


def test_a_penalty_of_the_possible_points_never_goes_below_zero(tmp_path, points):
    course = load_course(_course(tmp_path, COURSE.replace("cap = 25", "cap = 100\nof = \"possible\"")))
    result = graded(points, "bob", correct=0, ratios=(None, None), submitted_at="2026-03-12 00:30")
    assessed = late.assess(course, result)
    assert assessed.percent == 60 and assessed.raw == 0 and assessed.final == 0 and assessed.penalty == 0


def test_marked_late_without_a_time_says_so_and_guesses_no_penalty(tmp_path, points):
    course = load_course(_course(tmp_path))
    assessed = late.assess(course, graded(points, "bob", late=True))
    assert assessed.late is True and assessed.penalty == 0 and assessed.final == assessed.raw
    assert "submission time is unknown: no penalty applied" in assessed.outcome


@pytest.mark.parametrize("text, words", [
    ("[assignment]\ndue = \"tomorrow\"\n", "assignment.due = 'tomorrow' is not a time"),
    ("[assignment]\ndue = \"2026-03-06 23:59\"\ntimezone = \"Mars/Olympus\"\n", "not an IANA time zone"),
    ("[late]\npenalty = 10\n", "[late] needs assignment.due"),
    ("[assignment]\ndue = \"2026-03-06 23:59\"\n[late]\npenalty = 10\nper = \"week\"\n", "late.per must be"),
    ("[assignment]\ndue = \"2026-03-06 23:59\"\n[late]\npenalty = 10\ncap = 150\n", "late.cap is a percent"),
    ("[assignment]\ndue = \"2026-03-06 23:59\"\n[extensions]\nbob = \"soon\"\n", "extensions.bob"),
    ("[lateness]\n", "unknown section [lateness]"),
])
def test_a_bad_course_file_is_refused_naming_the_key(tmp_path, text, words):
    with pytest.raises(GraderError, match="course.toml: .*" + words.replace("[", r"\[").replace("]", r"\]")):
        load_course(_course(tmp_path, text))


def test_grades_csv_keeps_the_raw_total_and_adds_late_time_penalty_and_final(tmp_path, points):
    out = tmp_path / "out"
    install_course(_course(tmp_path), out)
    write_results(out, [graded(points, "bob", submitted_at="2026-03-08 00:30"),
                        graded(points, "carol", submitted_at="2026-03-06 20:00")])
    write_class_files(out, points)
    rows = {row["id"]: row for row in csv.DictReader((out / "grades.csv").open())}
    bob, carol = rows["bob"], rows["carol"]
    raw = float(bob["total"])
    assert bob["late"] == "yes" and float(bob["late_hours"]) == pytest.approx(24 + 31 / 60, abs=0.01)
    assert float(bob["penalty"]) == pytest.approx(0.2 * raw) and float(bob["final"]) == pytest.approx(0.8 * raw)
    assert carol["late"] == "no" and carol["penalty"] == "0" and carol["final"] == carol["total"]


def test_the_student_report_the_class_page_and_the_upload_show_the_rule_applied(tmp_path, points):
    out = tmp_path / "out"
    install_course(_course(tmp_path), out)
    write_results(out, [graded(points, "bob", submitted_at="2026-03-08 00:30")])
    write_class_files(out, points)
    page = (out / "bob" / "report.html").read_text()
    rule = "10% of the points earned off per started day late, at most 25%; 15 minutes&#39; grace"
    assert rule in page and "Submitted 2026-03-08 00:30 EST: 1 d 31 min late, 2 days: -20%" in page
    assert "Late policy: due 2026-03-06 23:59 EST" in (out / "index.html").read_text()
    upload = read_json(out / "bob" / "gradescope.json")
    assert upload["score"] == pytest.approx(0.8 * read_json(out / "bob" / "result.json")["score"]["earned"])
    assert "2 days: -20%" in upload["output"]


def test_report_with_a_new_course_file_applies_an_extension_without_a_regrade(tmp_path, points):
    out = tmp_path / "out"
    install_course(_course(tmp_path), out)
    write_results(out, [graded(points, "bob", submitted_at="2026-03-08 00:30")])
    grade_before = (out / "bob" / "result.json").read_text()
    extended = _course(tmp_path, COURSE + 'bob = "2026-03-09 12:00"\n', name="extended.toml")
    done = CliRunner().invoke(cli.main, ["report", str(out), "--course", str(extended)])
    assert done.exit_code == 0, done.output
    row = next(csv.DictReader((out / "grades.csv").open()))
    assert row["late"] == "no" and row["penalty"] == "0" and row["final"] == row["total"]
    assert "extended from" in (out / "bob" / "report.html").read_text()
    assert (out / "bob" / "result.json").read_text() == grade_before


def test_grade_keeps_the_course_file_in_the_output_folder_and_refuses_a_bad_one_before_grading(tmp_path,
                                                                                              monkeypatch):
    from grader.grade import runner

    graded_with = []
    monkeypatch.setattr(runner, "grade_all", lambda **options: graded_with.append(options) or 0)
    (tmp_path / "subs").mkdir()
    out = tmp_path / "out"
    done = CliRunner().invoke(cli.main, ["grade", str(tmp_path / "subs"), "--out", str(out),
                                         "--course", str(_course(tmp_path))])
    assert done.exit_code == 0, done.output
    assert (out / "course.toml").read_text() == textwrap.dedent(COURSE) and "course" not in graded_with[0]
    bad = _course(tmp_path, "[late]\npenalty = 10\n", name="bad.toml")
    done = CliRunner().invoke(cli.main, ["grade", str(tmp_path / "subs"), "--out", str(out), "--course", str(bad)])
    assert done.exit_code == 1 and "[late] needs assignment.due" in done.output and len(graded_with) == 1
