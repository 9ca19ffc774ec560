"""The LMS side: rosters from Canvas and Gradescope, the Canvas import file, and Canvas bulk
downloads grouped per student at intake."""

import csv
import zipfile

import pytest
from click.testing import CliRunner
from course_fakes import graded, write_points, write_results

from grader import cli
from grader.course.canvas_export import export_canvas
from grader.course.course_file import install_course
from grader.course.roster import CANVAS, GRADESCOPE, match, read_roster
from grader.errors import GraderError
from grader.grade.submission import find_submissions, read_metadata, stage

CANVAS_ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,A2 (991)
    Points Possible,,,,,100
"Smith, John",123,S001,jsmith,Lab 1,
"Doe, Jane",124,S002,jdoe,Lab 2,
"Roe, Rick",125,S003,rroe,Lab 1,
"Student, Test",999,,,Lab 1,
"""
GRADESCOPE_ROSTER = """First Name,Last Name,SID,Email,Role,Sections
John,Smith,S001,jsmith@uni.edu,Student,Lab 1
Tina,Ta,T9,ta@uni.edu,TA,
Jane,Doe,S002,jdoe@uni.edu,Student,Lab 2
"""


@pytest.fixture
def points(tmp_path):
    return write_points(tmp_path / "points")


def _roster(tmp_path, text, name="roster.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_roster_format_is_told_by_its_header(tmp_path):
    canvas = read_roster(_roster(tmp_path, CANVAS_ROSTER))
    assert canvas.kind == CANVAS and [s.name for s in canvas.students] == ["Smith, John", "Doe, Jane", "Roe, Rick"]
    gradescope = read_roster(_roster(tmp_path, GRADESCOPE_ROSTER, "gs.csv"))
    assert gradescope.kind == GRADESCOPE and [s.name for s in gradescope.students] == ["John Smith", "Jane Doe"]
    with pytest.raises(GraderError, match="not a roster this reads: .*Student, ID, SIS User ID.*it has: name, mark"):
        read_roster(_roster(tmp_path, "name,mark\nx,1\n", "bad.csv"))


def test_ids_match_by_any_key_and_canvas_download_ids_by_user_id(tmp_path):
    canvas = read_roster(_roster(tmp_path, CANVAS_ROSTER))
    found = match(canvas, ["jsmith", "doejane_124", "S003", "ghost"])
    assert {k: v.name for k, v in found.by_id.items()} == {"jsmith": "Smith, John", "doejane_124": "Doe, Jane",
                                                            "S003": "Roe, Rick"}
    assert found.unknown == ["ghost"] and found.without_submission == []
    gradescope = read_roster(_roster(tmp_path, GRADESCOPE_ROSTER, "gs.csv"))
    found = match(gradescope, ["jdoe@uni.edu", "S001", "ta"])
    assert set(found.by_id) == {"jdoe@uni.edu", "S001"} and found.unknown == ["ta"]


def test_canvas_export_has_canvas_columns_final_scores_and_lists_every_mismatch(tmp_path, points):
    out = tmp_path / "reports"
    course = tmp_path / "course.toml"
    course.write_text('[assignment]\nname = "A2 (991)"\ndue = "2026-03-06 23:59"\n'
                      '[late]\nper = "day"\npenalty = 50\n')
    install_course(course, out)
    results = [graded(points, "jsmith", submitted_at="2026-03-07 10:00"),
               graded(points, "S002"), graded(points, "ghost")]
    write_results(out, results)
    export = export_canvas(out, tmp_path / "canvas.csv", _roster(tmp_path, CANVAS_ROSTER))
    rows = list(csv.reader((tmp_path / "canvas.csv").open()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "A2 (991)"]
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == results[0]["score"]["possible"]
    by_name = {row[0]: row for row in rows[2:]}
    raw = results[0]["score"]["earned"]
    assert by_name["Smith, John"][:5] == ["Smith, John", "123", "S001", "jsmith", "Lab 1"]
    assert float(by_name["Smith, John"][5]) == pytest.approx(raw / 2)        # one day late at 50%
    assert float(by_name["Doe, Jane"][5]) == pytest.approx(raw)
    assert by_name["Roe, Rick"][5] == "" and "Student, Test" not in by_name
    assert export.scored == 2
    assert any("no submission: Roe, Rick" in line for line in export.listed)
    assert any("submission ghost matches no student" in line for line in export.listed)


def test_canvas_export_writes_formula_like_names_as_text(tmp_path, points):
    """A display name a student typed into Canvas must not run in the TA's spreadsheet."""
    out = tmp_path / "reports"
    write_results(out, [graded(points, "evil")])
    roster = _roster(tmp_path, 'Student,ID,SIS User ID,SIS Login ID,Section\n'
                               '"=HYPERLINK(""http://x.example"",""A"")",126,S9,evil,@Lab\n')
    export_canvas(out, tmp_path / "canvas.csv", roster)
    row = list(csv.reader((tmp_path / "canvas.csv").open()))[2]
    assert row[0] == "'=HYPERLINK(\"http://x.example\",\"A\")" and row[4] == "'@Lab"
    assert float(row[5]) >= 0                      # the score is still a number


def test_export_canvas_command_with_a_gradescope_roster(tmp_path, points):
    out = write_results(tmp_path / "reports", [graded(points, "jsmith@uni.edu")])
    done = CliRunner().invoke(cli.main, ["export", "canvas", str(tmp_path / "canvas.csv"), "--reports", str(out),
                                         "--roster", str(_roster(tmp_path, GRADESCOPE_ROSTER)),
                                         "--assignment", "A2"])
    assert done.exit_code == 0, done.output
    rows = list(csv.DictReader((tmp_path / "canvas.csv").open()))
    smith = next(r for r in rows if r["Student"] == "John Smith")
    assert smith["SIS User ID"] == "S001" and smith["A2"] != ""
    assert "no submission: Jane Doe" in done.output


def _canvas_download(folder):
    folder.mkdir()
    (folder / "smithjohn_123_456_matmul.py").write_text("def matmul(a, b):\n    return 'first'\n")
    (folder / "smithjohn_123_789_matmul-1.py").write_text("def matmul(a, b):\n    return 'second'\n")
    (folder / "smithjohn_123_457_softmax.py").write_text("def softmax(x):\n    return x\n")
    with zipfile.ZipFile(folder / "doejane_LATE_124_460_work.zip", "w") as archive:
        archive.writestr("work/assignment/matmul.py", "def matmul(a, b):\n    return 'jane'\n")
    (folder / "roe").mkdir()
    (folder / "roe" / "matmul.py").write_text("def matmul(a, b):\n    return 'roe'\n")
    return folder


def test_a_canvas_bulk_download_is_grouped_per_student_latest_upload_first(tmp_path):
    sources, skipped = find_submissions(_canvas_download(tmp_path / "download"))
    assert [s.id for s in sources] == ["doejane_124", "roe", "smithjohn_123"]
    smith = stage(sources[2], tmp_path / "smith")
    assert sorted(smith.files) == ["matmul", "softmax"]
    assert "'second'" in (tmp_path / "smith" / "assignment" / "matmul.py").read_text()
    assert any("smithjohn_123_456_matmul.py (Canvas: superseded by a later upload" in line for line in skipped)
    assert stage(sources[0], tmp_path / "jane").files.keys() == {"matmul"}
    assert "'jane'" in (tmp_path / "jane" / "assignment" / "matmul.py").read_text()


def test_canvas_late_marks_reach_the_metadata_and_metadata_csv_overrides(tmp_path):
    folder = _canvas_download(tmp_path / "download")
    assert read_metadata(folder) == {"doejane_124": {"late": True, "submitted_at": ""}}
    (folder / "metadata.csv").write_text("id,submitted_at,late\ndoejane_124,2026-03-07 01:00,yes\n")
    assert read_metadata(folder)["doejane_124"] == {"late": True, "submitted_at": "2026-03-07 01:00"}
