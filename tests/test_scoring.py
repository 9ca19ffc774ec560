"""Scoring: points split over a check's tests, perf ladders, and GPU-only checks kept out of reach."""

from __future__ import annotations

import pytest

from grader import results
from grader.points import LEVEL_CREDIT, SLOW_CREDIT, Check, Ladder, PointsTable, Problem
from grader.results import FAILED, HARNESS_ERROR, NOT_IMPLEMENTED, NOT_RUN_HERE, PASSED
from grader.scoring import score_checks

LADDER = Ladder(0.5, 0.7, 0.9)
TABLE = PointsTable((
    Problem("softmax", "Softmax", 1, (
        Check("softmax.rows", "softmax", 3.0, "public", ""),
        Check("softmax.masking", "softmax", 2.0, "public", ""),
        Check("softmax.gpu", "softmax", 4.0, "public", ""),
        Check("softmax.secret", "softmax", 1.0, "hidden", ""),
        Check("softmax.perf.rows", "softmax", 10.0, "hidden", "", perf=True, ladder=LADDER),
    )),
    Problem("matmul", "Matmul", 2, (Check("matmul.tiles", "matmul", 5.0, "public", ""),)),
))


def record(check, outcome, n=0, ratio=None):
    return results.TestRecord(f"tests_x/test_{check}.py::t[{n}]", check, outcome,
                      perf=None if ratio is None else {"ratio": ratio})


def scores_by_check(records, suites=("public", "hidden")):
    problems = score_checks(TABLE, records, suites)
    return {c.check.id: c for p in problems for c in p.checks}, {p.problem_id: p for p in problems}


def test_points_split_evenly_over_a_checks_tests():
    checks, _ = scores_by_check([record("softmax.rows", PASSED, 0), record("softmax.rows", FAILED, 1),
                                 record("softmax.rows", PASSED, 2)])
    assert checks["softmax.rows"].earned == pytest.approx(2.0)


@pytest.mark.parametrize("outcome", [FAILED, NOT_IMPLEMENTED, HARNESS_ERROR])
def test_only_passed_tests_earn(outcome):
    checks, _ = scores_by_check([record("softmax.masking", outcome)])
    assert checks["softmax.masking"].earned == 0.0
    assert checks["softmax.masking"].possible == 2.0


def test_a_check_without_records_scores_zero_but_stays_possible():
    checks, problems = scores_by_check([record("softmax.rows", PASSED)])
    assert (checks["matmul.tiles"].earned, checks["matmul.tiles"].possible) == (0.0, 5.0)
    assert problems["matmul"].possible == 5.0


def test_not_run_here_is_neither_earned_nor_possible():
    checks, problems = scores_by_check([record("softmax.rows", PASSED), record("softmax.gpu", NOT_RUN_HERE, 0),
                                        record("softmax.gpu", NOT_RUN_HERE, 1)], suites=("public",))
    assert checks["softmax.gpu"].not_run_here
    assert (checks["softmax.gpu"].earned, checks["softmax.gpu"].possible) == (0.0, 0.0)
    assert problems["softmax"].possible == 3.0 + 2.0
    assert problems["softmax"].total == 9.0
    assert [c.check.id for c in problems["softmax"].not_run_here] == ["softmax.gpu"]


def test_not_implemented_tests_are_counted():
    checks, _ = scores_by_check([record("softmax.rows", NOT_IMPLEMENTED, 0),
                                 record("softmax.rows", NOT_IMPLEMENTED, 1), record("softmax.rows", PASSED, 2)])
    assert checks["softmax.rows"].not_implemented == 2


def test_suites_select_which_checks_count():
    checks, problems = scores_by_check([], suites=("public",))
    assert "softmax.secret" not in checks and "softmax.perf.rows" not in checks
    assert problems["softmax"].total == 9.0


@pytest.mark.parametrize("ratio, level, earned", [(0.01, "below", 1.0), (0.3, "below", 3.0), (0.5, "pass", 5.0),
                                                  (0.6, "pass", 6.5), (0.7, "good", 8.0), (0.8, "good", 9.0),
                                                  (0.95, "excellent", 10.0)])
def test_perf_check_earns_the_ladders_linear_credit(ratio, level, earned):
    checks, _ = scores_by_check([record("softmax.perf.rows", PASSED, ratio=ratio)])
    assert checks["softmax.perf.rows"].level == level
    assert checks["softmax.perf.rows"].earned == pytest.approx(earned)


def test_perf_credit_needs_a_passed_test_and_a_ratio():
    checks, _ = scores_by_check([record("softmax.perf.rows", FAILED, 0, ratio=5.0),
                                 record("softmax.perf.rows", PASSED, 1)])
    assert checks["softmax.perf.rows"].earned == 0.0


def test_perf_check_averages_its_tests_and_reports_the_lowest_level():
    checks, _ = scores_by_check([record("softmax.perf.rows", PASSED, 0, ratio=0.95),
                                 record("softmax.perf.rows", PASSED, 1, ratio=0.5)])
    assert checks["softmax.perf.rows"].earned == pytest.approx(10.0 * (1.0 + 0.5) / 2)
    assert checks["softmax.perf.rows"].level == "pass"


def test_problem_earned_sums_its_checks():
    _, problems = scores_by_check([record("softmax.rows", PASSED), record("softmax.masking", PASSED),
                                   record("matmul.tiles", FAILED)])
    assert (problems["softmax"].earned, problems["matmul"].earned) == (5.0, 0.0)


def shipped_ladders():
    """Every ladder a grade can use: the points files' defaults and each calibrated GPU's."""
    from grader.points import POINTS_DIR, load_calibration, load_points

    ladders = {f"{check.id} (default)": check.ladder for check in load_points(POINTS_DIR).checks.values()
               if check.perf}
    for gpu in load_calibration():
        for check in load_points(POINTS_DIR, gpu_name=gpu).checks.values():
            if check.perf:
                ladders[f"{check.id} ({check.ladder.source})"] = check.ladder
    return ladders


def test_ten_percent_faster_moves_a_perf_grade_at_most_one_level_gap():
    # a step ladder would turn a 10% speed difference into 0.5 -> 0.8 -> 1.0 jumps (or 0 -> 0.5)
    one_step = min(b - a for a, b in zip(sorted(LEVEL_CREDIT.values()), sorted(LEVEL_CREDIT.values())[1:]))
    for name, ladder in shipped_ladders().items():
        ratios = [ladder.excellent * 1.3 * i / 400 for i in range(1, 401)]
        worst = max(ladder.credit(r * 1.1) - ladder.credit(r) for r in ratios)
        assert worst <= one_step + 1e-9, f"{name}: 10% faster gains {worst:.3f} of the points (> {one_step})"


def test_correct_but_slow_kernel_earns_something_and_credit_never_falls_as_speed_rises():
    for name, ladder in shipped_ladders().items():
        credits = [ladder.credit(ladder.excellent * 2 * i / 200) for i in range(0, 201)]
        assert credits[0] >= SLOW_CREDIT > 0, name
        assert all(a <= b for a, b in zip(credits, credits[1:])), name


def test_the_reference_earns_every_perf_point_on_its_calibrated_gpu():
    from grader.points import POINTS_DIR, load_calibration, load_points

    for gpu, entries in load_calibration().items():
        checks = load_points(POINTS_DIR, gpu_name=gpu).checks
        for check_id, entry in entries.items():
            if check_id in checks:
                assert checks[check_id].ladder.credit(entry["reference_ratio"]) == 1.0, (gpu, check_id)
