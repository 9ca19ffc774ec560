"""The Gradescope autograder end to end: `grader gradescope build` writes the zip, and its
run_autograder, run in a temporary /autograder tree (GRADESCOPE_ROOT) on the three example
submissions, grades each on the CPU and writes results.json in Gradescope's format: the reference
gets every CPU point, the stubs none. Runs the public suite (and one hidden check) on the CPU."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import course_fakes
import pytest
from click.testing import CliRunner

from grader import cli
from grader.course import gradescope_json
from grader.course.autograder_build import makefile_pins

# The three runs grade the public suite on the CPU, side by side: minutes, not pytest-timeout's default.
pytestmark = pytest.mark.timeout(1800)

REPO = Path(__file__).resolve().parent.parent
MARKED = "accounting.memory.variants"          # a hidden check the course marks visible after the due date
EXAMPLES = ("reference", "partial", "stubs")


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    folder = tmp_path_factory.mktemp("examples")
    subprocess.run([sys.executable, str(REPO / "examples" / "make_examples.py"), "--out", str(folder)], check=True,
                   capture_output=True)
    return folder


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("build")
    course = folder / "course.toml"
    course.write_text(f'[gradescope]\nvisible_after_due = ["{MARKED}"]\ntimeout_s = 900\n')
    done = CliRunner().invoke(cli.main, ["gradescope", "build", "--out", str(folder / "autograder.zip"),
                                         "--course", str(course)])
    assert done.exit_code == 0, done.output
    return folder / "autograder.zip"


def _run(autograder, upload, root):
    """Gradescope's layout: the zip unpacked in source/, the upload in submission/; run_autograder."""
    with zipfile.ZipFile(autograder) as archive:
        archive.extractall(root / "source")
    shutil.copytree(upload, root / "submission")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    env = dict(os.environ, GRADESCOPE_ROOT=str(root), GRADER_PYTHON=sys.executable)
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=1200)
    results = root / "results" / "results.json"
    assert results.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(results.read_text())


@pytest.fixture(scope="module")
def graded(autograder, examples, tmp_path_factory):
    roots = {name: tmp_path_factory.mktemp(name) for name in EXAMPLES}
    with ThreadPoolExecutor(max_workers=len(EXAMPLES)) as pool:
        runs = {name: pool.submit(_run, autograder, examples / name, roots[name]) for name in EXAMPLES}
        return {name: run.result()[1] for name, run in runs.items()}


def test_the_zip_holds_gradescopes_two_scripts_pinned_as_the_makefile_and_no_solutions(autograder):
    with zipfile.ZipFile(autograder) as archive:
        names = set(archive.namelist())
        setup = archive.read("setup.sh").decode()
        modes = {info.filename: info.external_attr >> 16 for info in archive.infolist()}
    torch_pin, triton_pin = makefile_pins(REPO / "Makefile")
    assert {"setup.sh", "run_autograder", "autograder.json", "pyproject.toml"} <= names
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert f'--index-url https://download.pytorch.org/whl/cpu "{torch_pin}"' in setup and f'"{triton_pin}"' in setup
    assert subprocess.run(["bash", "-n"], input=setup, text=True).returncode == 0
    assert not any(n.startswith("solutions/") for n in names)
    assert "tests_hidden/test_accounting_hidden.py" in names and "tests_hidden/test_matmul_hidden.py" not in names


def test_every_results_json_follows_gradescopes_format(graded):
    for name, data in graded.items():
        assert gradescope_json.problems(data) == [], name
        assert "The GPU part comes later" in data["output"] and data["execution_time"] > 0


def test_the_reference_gets_every_cpu_point_and_the_stubs_none(graded):
    reference, stubs, partial = graded["reference"], graded["stubs"], graded["partial"]
    possible = sum(t["max_score"] for t in reference["tests"])
    assert possible > 0 and reference["score"] == pytest.approx(possible)
    assert all(t["status"] == "passed" for t in reference["tests"])
    assert stubs["score"] == 0 and sum(t["max_score"] for t in stubs["tests"]) == pytest.approx(possible)
    assert 0 < partial["score"] < possible


def test_only_the_marked_hidden_check_runs_and_it_shows_after_the_due_date(graded):
    hidden = [t for t in graded["reference"]["tests"] if t["visibility"] != "visible"]
    assert [t["number"] for t in hidden] == [MARKED] and hidden[0]["visibility"] == "after_due_date"
    numbers = {t["number"] for t in graded["reference"]["tests"]}
    assert "accounting.flops.variants" not in numbers and "matmul.shapes.lecture" in numbers


def _unpacked(zip_path, root):
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(root / "source")
    (root / "submission").mkdir()
    return root


def test_a_baked_final_grade_is_returned_for_its_submission_instead_of_a_new_grade(tmp_path):
    points = course_fakes.write_points(tmp_path / "points")
    reports = course_fakes.write_results(tmp_path / "reports", [course_fakes.graded(points, student)
                                                                for student in ("submission_77", "jd@uni.edu")])
    done = CliRunner().invoke(cli.main, ["gradescope", "build", "--out", str(tmp_path / "final.zip"),
                                         "--final", str(reports)])
    assert done.exit_code == 0 and "2 final grades baked in" in done.output, done.output
    for metadata, student in (({"id": 77, "users": []}, "submission_77"),
                              ({"id": 5, "users": [{"email": "jd@uni.edu", "sid": "1"}]}, "jd@uni.edu")):
        root = _unpacked(tmp_path / "final.zip", tmp_path / student)
        (root / "submission_metadata.json").write_text(json.dumps(metadata))
        ran = CliRunner().invoke(cli.main, ["gradescope", "run", "--root", str(root)])
        assert ran.exit_code == 0, ran.output
        data = json.loads((root / "results" / "results.json").read_text())
        assert data == json.loads((reports / student / "gradescope.json").read_text())
        assert gradescope_json.problems(data) == [] and "leaderboard" in data


def test_a_harness_failure_writes_no_results_json_and_exits_one(tmp_path):
    root = tmp_path / "root"
    (root / "source").mkdir(parents=True)
    ran = CliRunner().invoke(cli.main, ["gradescope", "run", "--root", str(root)])
    assert ran.exit_code == 1 and "harness error" in ran.output and "rebuild the autograder zip" in ran.output
    assert not (root / "results" / "results.json").exists()


def test_marking_a_public_or_unknown_check_is_refused_at_build_time(tmp_path):
    for check, words in (("matmul.shapes.lecture", "is a public check"), ("matmul.nope", "is not a check")):
        course = tmp_path / "course.toml"
        course.write_text(f'[gradescope]\nvisible_after_due = ["{check}"]\n')
        done = CliRunner().invoke(cli.main, ["gradescope", "build", "--out", str(tmp_path / "a.zip"),
                                             "--course", str(course)])
        assert done.exit_code == 1 and words in done.output, done.output
