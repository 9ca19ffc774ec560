"""The speed leaderboard: per perf case, graded and correct kernels only, fastest first, under the
names students chose or their ids hashed; a grade without a GPU says "not measured"."""

import zipfile
from pathlib import Path

import pytest
from course_fakes import PERF_CASES, graded, write_points, write_results

from grader.course import leaderboard, pseudonyms
from grader.report.class_files import write_class_files


@pytest.fixture
def points(tmp_path):
    return write_points(tmp_path / "points")


def test_each_case_ranks_graded_correct_kernels_fastest_first(points):
    results = [graded(points, "slow", ratios=(0.55, 0.5), leaderboard_name="tortoise"),
               graded(points, "fast", ratios=(1.02, 0.97), leaderboard_name="hare"),
               graded(points, "wrong", ratios=(None, 1.5), leaderboard_name="cheater"),
               graded(points, "cut", ratios=(2.0, 2.0), status="timeout", leaderboard_name="early"),
               graded(points, "cpu", device="cpu", leaderboard_name="laptop")]
    boards = {b.case: b for b in leaderboard.boards(results, salt="s")}
    first, second = boards[PERF_CASES[0]], boards[PERF_CASES[1]]
    assert [(e.name, e.ratio) for e in first.entries] == [("hare", 1.02), ("tortoise", 0.55)]
    assert [e.name for e in second.entries] == ["cheater", "hare", "tortoise"]   # right on this case
    assert first.not_measured == 1 and first.label == "matmul.perf.throughput: bf16_4096x4096x4096"
    assert [e.level for e in first.entries] == ["excellent", "below"]


def test_a_class_graded_without_a_gpu_says_not_measured(tmp_path, points):
    out = write_results(tmp_path / "out", [graded(points, s, device="cpu") for s in ("ana", "ben")])
    write_class_files(out, points)
    page = (out / "leaderboard.html").read_text()
    assert page.count("not measured") >= 2 and "2 submissions graded without a GPU" in page
    assert 'href="leaderboard.html"' in (out / "index.html").read_text()


def test_the_page_lists_the_class_in_order_under_pseudonyms(tmp_path, points):
    out = write_results(tmp_path / "out", [graded(points, "s1", ratios=(0.6, 0.6)),
                                            graded(points, "s2", ratios=(0.9, 0.9), leaderboard_name="hare")])
    write_class_files(out, points)
    page = (out / "leaderboard.html").read_text()
    anonymous = leaderboard.hashed_name("s1", leaderboard.salt_for(out, None))
    assert page.index("hare") < page.index(anonymous) and "s1" not in page.replace(anonymous, "")
    assert f"<code>{anonymous}</code>" in (out / "s1" / "report.html").read_text()


def test_hashed_names_are_stable_salted_and_duplicates_are_told_apart(points):
    assert leaderboard.hashed_name("alice", "a") == leaderboard.hashed_name("alice", "a")
    assert leaderboard.hashed_name("alice", "a") != leaderboard.hashed_name("alice", "b")
    shown = leaderboard.names([graded(points, "x", leaderboard_name="zoom"),
                               graded(points, "y", leaderboard_name="zoom")], "salt")
    assert shown["x"] != shown["y"] and shown["x"].startswith("zoom #")


@pytest.mark.parametrize("content, expected", [
    (b"  Speedy   Gonzales \nsecond line\n", "Speedy Gonzales"),
    (b"\n\n" + b"x" * 100, "x" * pseudonyms.MAX_CHARS),
    (b"\x00\x01\x02", None),
    (b"", None),
])
def test_a_chosen_name_is_its_first_line_cleaned_and_cut(tmp_path, content, expected):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "leaderboard_name").write_bytes(content)
    assert pseudonyms.chosen_name(tmp_path / "sub") == expected


def test_a_chosen_name_is_found_in_archives_and_wrapper_folders_but_links_are_ignored(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as archive:
        archive.writestr("mywork/assignment/leaderboard_name", "zip kernel\n")
    assert pseudonyms.chosen_name(tmp_path / "a.zip") == "zip kernel"
    (tmp_path / "b" / "wrapped").mkdir(parents=True)
    (tmp_path / "b" / "wrapped" / "leaderboard_name.txt").write_text("wrapped\n")
    assert pseudonyms.chosen_name(tmp_path / "b") == "wrapped"
    (tmp_path / "secret").write_text("do not show\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "leaderboard_name").symlink_to(tmp_path / "secret")
    assert pseudonyms.chosen_name(tmp_path / "c") is None


def test_the_leaderboard_command_prints_each_case_fastest_first(tmp_path, points):
    from click.testing import CliRunner

    from grader import cli

    out = write_results(tmp_path / "out", [graded(points, "ref", ratios=(0.95, 0.93), leaderboard_name="reference"),
                                            graded(points, "slow", ratios=(0.2, 0.18), leaderboard_name="small tiles")])
    done = CliRunner().invoke(cli.main, ["leaderboard", str(out)])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    first = lines.index("matmul.perf.throughput: bf16_4096x4096x4096")
    assert lines[first + 1].endswith("0.950x  reference") and lines[first + 2].endswith("0.200x  small tiles")


def test_the_slow_example_keeps_the_solution_but_one_small_tile(tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import make_examples

    assert make_examples.write_slow(tmp_path) == []
    source = (tmp_path / "slow" / "matmul.py").read_text()
    compile(source, "matmul.py", "exec")
    assert source.count("HOPPER_CONFIGS = [") == 2 and "_config(32, 32, 64, num_stages=1" in source
    assert (tmp_path / "slow" / "leaderboard_name").read_text() == "small tiles\n"


def test_a_submission_named_like_the_leaderboard_cannot_replace_it(tmp_path):
    from grader.grade.submission import find_submissions

    for name in ("leaderboard.html", "course.toml"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "matmul.py").write_text("x = 1\n")
    sources, _ = find_submissions(tmp_path)
    assert [s.id for s in sources] == ["_course.toml", "_leaderboard.html"]
    assert all("is the name of a class output file" in s.problem for s in sources)
