"""A tiny fake assignment for tests that grade whole batches cheaply: two problems, five checks
(one hidden, one perf) through the real plugin, and helpers that write it and make submissions."""

import textwrap
from pathlib import Path

POINTS = {
    "softmax": """
        [problem]
        id = "softmax"
        title = "Fake softmax"
        order = 1
        [checks."softmax.double"]
        points = 2
        description = "double(x) is 2x"
        [checks."softmax.triple"]
        points = 1
        description = "triple(x) is 3x"
        [checks."softmax.hidden_double"]
        points = 2
        suite = "hidden"
        description = "double(10) is 20"
    """,
    "matmul": """
        [problem]
        id = "matmul"
        title = "Fake matmul"
        order = 2
        [checks."matmul.answer"]
        points = 3
        description = "answer() is 42"
        [perf."matmul.perf.speed"]
        points = 4
        description = "fast"
        baseline = "nothing"
        ladder = { pass = 0.5, good = 0.7, excellent = 0.9 }
    """,
}

# Each problem's tests, public and hidden; a suite file holds both problems' unless split by problem.
TESTS = {
    ("tests_public", "softmax"): '''
@pytest.mark.check("softmax.double")
@pytest.mark.parametrize("x", [1, 2])
def test_double_doubles(impl, x):
    assert impl.softmax.double(x) == 2 * x

@pytest.mark.check("softmax.triple")
def test_triple_triples(impl):
    assert impl.softmax.triple(3) == 9, "triple(3) should be 9"
''',
    ("tests_public", "matmul"): '''
@pytest.mark.check("matmul.answer")
def test_zz_matmul_answer_is_42(impl):
    assert impl.matmul.answer() == 42
''',
    ("tests_hidden", "softmax"): '''
@pytest.mark.check("softmax.hidden_double")
def test_hidden_double_of_ten(impl):
    assert impl.softmax.double(10) == 20
''',
    ("tests_hidden", "matmul"): '''
@pytest.mark.perf("matmul.perf.speed")
def test_matmul_speed(impl, record_perf):
    record_perf(ratio=1.0)
''',
}
PUBLIC = "\nimport pytest\n" + TESTS["tests_public", "softmax"] + TESTS["tests_public", "matmul"]
HIDDEN = "\nimport pytest\n" + TESTS["tests_hidden", "softmax"] + TESTS["tests_hidden", "matmul"]

GOOD_SOFTMAX = "def double(x):\n    return 2 * x\n\ndef triple(x):\n    return 3 * x\n"
GOOD_MATMUL = "def answer():\n    return 42\n"


def write_suite(root: Path, by_problem: bool = False):
    """points/, tests_public/ and tests_hidden/ of the fake assignment under `root`; `by_problem`: one
    test file per problem in each suite (test_softmax.py, ...), as the real suites are laid out."""
    (root / "points").mkdir(parents=True)
    for name, text in POINTS.items():
        (root / "points" / f"{name}.toml").write_text(textwrap.dedent(text))
    for folder, name, text in (("tests_public", "test_fake.py", PUBLIC),
                               ("tests_hidden", "test_fake_hidden.py", HIDDEN)):
        (root / folder).mkdir()
        if not by_problem:
            (root / folder / name).write_text(text)
    if by_problem:
        for (folder, problem), text in TESTS.items():
            suffix = "_hidden" if folder == "tests_hidden" else ""
            (root / folder / f"test_{problem}{suffix}.py").write_text("\nimport pytest\n" + text)


def make_submission(root: Path, name: str, files: dict):
    """A submission folder `root/name` holding `files` (relative path -> text)."""
    folder = root / name
    folder.mkdir(parents=True)
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    return folder


def grade_batch(suite_root: Path, submissions: Path, out: Path, **options) -> int:
    """`grader grade` of `submissions` against the fake suite at `suite_root`, on the CPU, quietly, with a
    budget of 300 s per submission that one which returns never reaches."""
    from grader.grade.runner import grade_all

    options = {"jobs": 2, "timeout": 300.0, "tests_root": suite_root, "points_dir": suite_root / "points",
               "gpus": "", "quiet": True, **options}
    return grade_all(submissions, out=out, **options)
