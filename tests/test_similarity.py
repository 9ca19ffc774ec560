"""`grader similarity`: near-copies rank first, the handout's stubs are never a match, grades are
untouched, and a missing copydetect says how to install it."""

import sys

import pytest
from click.testing import CliRunner
from course_fakes import graded, write_points, write_results

from grader import cli
from grader.course import similarity
from grader.errors import GraderError

pytest.importorskip("copydetect")

STUB = '''"""Row softmax, the online way."""
import torch


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, one pass with a running maximum."""
    if x.dim() != 2:
        raise ValueError(f"expected a 2-D tensor, got {x.dim()} dimensions")
    raise NotImplementedError("softmax: write the online update")
'''
BODY_SPLIT = '    raise NotImplementedError("softmax: write the online update")\n'
ORIGINAL = '''    rows, cols = x.shape
    out = torch.empty_like(x)
    for row in range(rows):
        running_max = float("-inf")
        running_sum = 0.0
        for col in range(cols):
            value = float(x[row, col])
            # rescale the sum whenever the maximum grows
            if value > running_max:
                running_sum = running_sum * math.exp(running_max - value) + 1.0
                running_max = value
            else:
                running_sum += math.exp(value - running_max)
        for col in range(cols):
            out[row, col] = math.exp(float(x[row, col]) - running_max) / running_sum
    return out
'''
RENAMED = '''    n_rows, n_cols = x.shape
    result = torch.empty_like(x)
    for r in range(n_rows):
        m = float("-inf")
        denominator = 0.0
        for c in range(n_cols):
            v = float(x[r, c])
            # keep the denominator in step with the new max
            if v > m:
                denominator = denominator * math.exp(m - v) + 1.0
                m = v
            else:
                denominator += math.exp(v - m)
        for c in range(n_cols):
            result[r, c] = math.exp(float(x[r, c]) - m) / denominator
    return result
'''
VECTORISED = '''    shifted = x - x.max(dim=-1, keepdim=True).values
    weights = shifted.exp()
    return weights / weights.sum(dim=-1, keepdim=True)
'''
TWO_PASS = '''    result = x.clone()
    for index in range(x.shape[0]):
        top = x[index].max()
        total = torch.zeros((), dtype=x.dtype)
        for item in x[index]:
            total = total + torch.exp(item - top)
        result[index] = torch.exp(x[index] - top) / total
    return result
'''


def _module(body):
    return "import math\n" + STUB.replace(BODY_SPLIT, body)


@pytest.fixture
def classroom(tmp_path):
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    (stubs / "softmax.py").write_text(STUB)
    subs = tmp_path / "submissions"
    for student, text in {"ana": _module(ORIGINAL), "ben": _module(RENAMED), "cho": _module(VECTORISED),
                          "dev": _module(TWO_PASS), "eve": STUB, "fay": STUB}.items():
        (subs / student).mkdir(parents=True)
        (subs / student / "softmax.py").write_text(text)
    return subs, stubs


def test_submissions_that_differ_in_names_and_comments_rank_first(classroom):
    subs, stubs = classroom
    pairs, notes = similarity.compare(subs, stubs)
    assert (pairs[0].a, pairs[0].b) == ("ana", "ben") and pairs[0].score > 0.8
    assert all(p.score < pairs[0].score / 2 for p in pairs[1:]), [(p.a, p.b, p.score) for p in pairs[:4]]


def test_submissions_of_the_stubs_alone_are_not_flagged(classroom, tmp_path):
    subs, stubs = classroom
    pairs, _ = similarity.compare(subs, stubs)
    assert [p.score for p in pairs if {"eve", "fay"} & {p.a, p.b}] == [0.0] * 9
    summary = similarity.write_similarity_report(subs, tmp_path / "out", stubs=stubs)
    page = (tmp_path / "out" / "index.html").read_text()
    assert "1 of 15 pairs at or above 33%" in page and "flagged at >= 33%" in summary
    first = (tmp_path / "out" / "pairs" / "0001.html").read_text()
    assert "ana &amp; ben" in first and "<mark>" in first


def test_the_report_changes_no_grade_and_is_linked_from_the_class_page(classroom, tmp_path):
    subs, stubs = classroom
    points = write_points(tmp_path / "points")
    reports = write_results(tmp_path / "reports", [graded(points, student) for student in ("ana", "ben")])
    before = {p: p.read_bytes() for p in reports.glob("*/result.json")}
    done = CliRunner().invoke(cli.main, ["similarity", str(subs), "--out", str(reports / "similarity"),
                                         "--stubs", str(stubs)])
    assert done.exit_code == 0, done.output
    assert {p: p.read_bytes() for p in reports.glob("*/result.json")} == before
    assert 'href="similarity/index.html"' in (reports / "index.html").read_text()
    assert "similarity" not in (reports / "ana" / "report.html").read_text().lower()


def test_without_copydetect_the_command_says_how_to_install_it(classroom, monkeypatch, tmp_path):
    subs, stubs = classroom
    monkeypatch.setitem(sys.modules, "copydetect", None)
    with pytest.raises(GraderError, match="pip install copydetect"):
        similarity.compare(subs, stubs)
    done = CliRunner().invoke(cli.main, ["similarity", str(subs), "--out", str(tmp_path / "out")])
    assert done.exit_code == 1 and "pip install copydetect" in done.output
