"""Pure scoring: (points table, test records) -> points per check, per problem and in total; and the
plain data of a problem's score (`problem_data`), which result.json, the reports and the local
per-check breakdown print.

A check's points are split evenly over the tests that carry its id; a perf check earns its points
times the ladder's credit at its ratio (grader.points.Ladder.credit: linear between the levels).
Checks that did not run on this machine (GPU-only on a CPU box) are counted apart: they are neither
earned nor lost.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from grader.points import LEVEL_CREDIT, Check, PointsTable
from grader.results import NOT_IMPLEMENTED, NOT_RUN_HERE, PASSED, TestRecord


@dataclass
class CheckScore:
    check: Check
    earned: float
    tests: list[TestRecord]
    level: str | None = None          # perf checks: the ladder level reached

    @property
    def possible(self) -> float:
        return 0.0 if self.not_run_here else self.check.points

    @property
    def not_run_here(self) -> bool:
        return bool(self.tests) and all(t.outcome == NOT_RUN_HERE for t in self.tests)

    @property
    def not_implemented(self) -> int:
        return sum(t.outcome == NOT_IMPLEMENTED for t in self.tests)


@dataclass
class ProblemScore:
    problem_id: str
    title: str
    checks: list[CheckScore] = field(default_factory=list)

    @property
    def earned(self) -> float:
        return round(sum(c.earned for c in self.checks), 4)

    @property
    def possible(self) -> float:
        return sum(c.possible for c in self.checks)

    @property
    def total(self) -> float:
        return sum(c.check.points for c in self.checks)

    @property
    def not_run_here(self) -> list[CheckScore]:
        return [c for c in self.checks if c.not_run_here]


def score_checks(points: PointsTable, records: list[TestRecord],
                 suites: tuple[str, ...] = ("public", "hidden")) -> list[ProblemScore]:
    """Score every check of `suites`; a check with no test record scores zero."""
    by_check: dict[str, list[TestRecord]] = {}
    for record in records:
        by_check.setdefault(record.check, []).append(record)
    scores = []
    for problem in points.problems:
        problem_score = ProblemScore(problem.id, problem.title)
        for check in problem.checks:
            if check.suite in suites:
                problem_score.checks.append(_score_check(check, by_check.get(check.id, [])))
        scores.append(problem_score)
    return scores


def _score_check(check: Check, tests: list[TestRecord]) -> CheckScore:
    if not tests:
        return CheckScore(check, 0.0, tests)
    if check.perf:
        return _score_perf(check, tests)
    # Tests not run on this machine (GPU-only cases of a check) neither earn nor lose: the estimate is
    # over the cases that ran. On the grading GPU every case runs.
    ran = [t for t in tests if t.outcome != NOT_RUN_HERE]
    passed = sum(t.outcome == PASSED for t in ran)
    return CheckScore(check, check.points * passed / len(ran) if ran else 0.0, tests)


def _score_perf(check: Check, tests: list[TestRecord]) -> CheckScore:
    """Each passed perf test earns the ladder's credit at its ratio (linear between the levels, at least
    SLOW_CREDIT); the check earns their mean and reports the lowest level reached."""
    credits, levels = [], []
    for test in tests:
        ratio = (test.perf or {}).get("ratio")
        timed = test.outcome == PASSED and ratio is not None
        credits.append(check.ladder.credit(ratio) if timed else 0.0)
        levels.append(check.ladder.level(ratio) if timed else "below")
    lowest = min(levels, key=lambda level: LEVEL_CREDIT[level])
    return CheckScore(check, check.points * sum(credits) / len(credits), tests, level=lowest)


# --- the plain data of a score (result.json's "problems", the reports, the local breakdown) ---------------


def problem_data(score: ProblemScore) -> dict:
    checks = [check_data(c) for c in score.checks]
    return {"id": score.problem_id, "title": score.title, "earned": score.earned,
            "possible": score.possible, "total": score.total,
            "perf_earned": round(sum(c["earned"] for c in checks if c["perf"]), 4),
            "perf_possible": sum(c["possible"] for c in checks if c["perf"]), "checks": checks}


def check_data(score: CheckScore) -> dict:
    check = score.check
    ladder = None
    if check.ladder is not None:
        ladder = {"pass": check.ladder.passing, "good": check.ladder.good,
                  "excellent": check.ladder.excellent, "source": check.ladder.source}
    return {"id": check.id, "description": check.description, "suite": check.suite, "perf": check.perf,
            "points": check.points, "earned": round(score.earned, 4), "possible": score.possible,
            "level": score.level, "not_run_here": score.not_run_here, "baseline": check.baseline,
            "ladder": ladder, "tests": [asdict(t) for t in score.tests]}


def check_state(check: dict) -> str:
    """A check's result in words: "passed", "not run here", or how many of its tests did not pass."""
    if check["not_run_here"]:
        return "not run here"
    if check["earned"] >= check["points"] - 1e-9:
        return "passed"
    failed = sum(t["outcome"] != PASSED for t in check["tests"])
    return f"{failed} of {len(check['tests'])} tests not passed"


def points_text(value: float) -> str:
    """2 -> '2', 2.5 -> '2.5', 2.3333 -> '2.33'."""
    return f"{round(value, 2):g}"
