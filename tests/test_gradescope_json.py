"""Gradescope's results format: the final upload from a GPU grade, the CPU preview, and the schema
check every document must pass (Gradescope's documented results.json)."""

import json

import pytest
from course_fakes import graded, write_points

from grader.course import gradescope_json
from grader.report import model


@pytest.fixture
def points(tmp_path):
    return write_points(tmp_path / "points")


def test_the_final_upload_has_a_markdown_test_per_check_and_validates(points):
    data = gradescope_json.final(graded(points, "alice"))
    assert gradescope_json.problems(data) == []
    by_number = {t["number"]: t for t in data["tests"]}
    assert set(by_number) == {"matmul.correct", "matmul.hidden_shapes", "matmul.perf.throughput"}
    assert {t["output_format"] for t in data["tests"]} == {"md"} and data["output_format"] == "md"
    assert by_number["matmul.hidden_shapes"]["visibility"] == "after_published"
    assert by_number["matmul.correct"]["visibility"] == "visible"
    hidden_output = by_number["matmul.hidden_shapes"]["output"]   # a fixed verdict: no names, no values
    assert model.HIDDEN_VERDICTS["failed"] in hidden_output and "M=257 N=33 bf16" not in hidden_output
    assert data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]))
    assert data["execution_time"] == 12


def test_the_final_upload_carries_the_timed_cases_as_gradescopes_leaderboard(points):
    data = gradescope_json.final(graded(points, "alice", ratios=(0.91, None)))
    assert data["leaderboard"] == [{"name": "matmul.perf.throughput: bf16_4096x4096x4096", "value": 0.91,
                                    "order": "desc"}]
    assert "leaderboard" not in gradescope_json.final(graded(points, "bob", device="cpu"))


def test_the_preview_scores_what_ran_on_the_cpu_and_says_the_gpu_part_comes_later(points):
    result = graded(points, "alice", device="cpu")
    data = gradescope_json.preview(result, 42.4, ("matmul.hidden_shapes",))
    assert gradescope_json.problems(data) == []
    assert [t["number"] for t in data["tests"]] == ["matmul.correct", "matmul.hidden_shapes"]
    assert data["tests"][1]["visibility"] == "after_due_date"
    assert data["score"] == 6 and data["execution_time"] == 42
    assert "The GPU part comes later" in data["output"]
    assert "bf16 against cuBLAS (4 points)" in data["output"]


def test_a_failure_message_with_backticks_cannot_break_out_of_its_code_block(points):
    result = graded(points, "alice", correct=0)
    test = next(t for c in result["problems"][0]["checks"] for t in c["tests"] if t["outcome"] == "failed")
    test["message"] = "expected ```\n# Full marks\n``` got nothing"
    output = gradescope_json.final(result)["tests"][0]["output"]
    assert "````\nexpected ```\n# Full marks\n``` got nothing\n````" in output


def test_status_and_reason_lead_the_message_of_an_ungraded_submission():
    data = gradescope_json.final(model.not_gradable_result("bob", "archive refused", {}, 14.0))
    assert gradescope_json.problems(data) == []
    assert data["score"] == 0 and data["tests"] == [] and "Not gradable: archive refused" in data["output"]


@pytest.mark.parametrize("change, words", [
    (lambda d: d.update(score=float("nan")), "not strict JSON"),
    (lambda d: d.update(visibility="students"), "visibility 'students'"),
    (lambda d: d.update(output_format="markdown"), "output_format 'markdown'"),
    (lambda d: d.update(grade=3), "unknown top-level key 'grade'"),
    (lambda d: d["tests"][0].update(status="partial"), "tests[0]: status 'partial'"),
    (lambda d: d["tests"][0].update(tags="perf"), "tests[0]: tags is not a list"),
    (lambda d: d["tests"][0].update(max_score="4"), "tests[0]: max_score is not a finite number"),
    (lambda d: d.update(leaderboard=[{"name": "x", "value": 1}, {"name": "x", "value": 2}]), "repeated"),
    (lambda d: d.update(leaderboard=[{"name": "x", "value": 1, "order": "up"}]), "order 'up'"),
    (lambda d: (d.pop("score"), d["tests"][0].pop("score")), "no top-level score"),
])
def test_the_schema_check_names_each_way_to_break_gradescopes_format(points, change, words):
    data = json.loads(json.dumps(gradescope_json.final(graded(points, "alice"))))
    change(data)
    assert any(words in problem for problem in gradescope_json.problems(data)), gradescope_json.problems(data)
