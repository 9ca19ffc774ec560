"""The single source of points: `grader/points/<problem>.toml`, plus measured ladders.

Read by the pytest plugin (every graded test must name a known check), by scoring, by the reports and
by the handout write-up, so the four can never disagree. Calibrated perf ladders, written by
`grader calibrate`, live apart in `grader/calibration.json` and override the defaults per GPU model.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from grader.errors import PointsFileError

# GRADER_POINTS_DIR points the plugin at another table (the harness's own tests use small fake ones).
POINTS_DIR = Path(os.environ.get("GRADER_POINTS_DIR", Path(__file__).parent / "points"))
CALIBRATION_FILE = Path(__file__).parent / "calibration.json"
SUITES = ("public", "hidden")
LADDER_LEVELS = ("pass", "good", "excellent")
# Fraction of a perf check's points earned at each ladder level; between levels the credit moves in a
# straight line (Ladder.credit), so a 10% faster kernel gains at most one level's gap.
LEVEL_CREDIT = {"below": 0.0, "pass": 0.5, "good": 0.8, "excellent": 1.0}
# A correct kernel slower than the pass ratio still earns this much: slow but right is not zero.
SLOW_CREDIT = 0.1
# What a correctness check grades: core shapes and dtypes, robustness beyond them, or a rule
# of the code; "" for problems that do not split. A kernel exact on core earns half its points or more.
TIERS = ("", "core", "robustness", "rules")


@dataclass(frozen=True)
class Ladder:
    """Ratios to the baseline at which a kernel reaches each level."""

    passing: float
    good: float
    excellent: float
    source: str = "default"          # "default", or the GPU model it was calibrated on

    def credit(self, ratio: float) -> float:
        """Fraction of the points for a correct kernel at `ratio`: the levels' credits joined by straight
        lines from (0, 0) through pass, good and excellent, 1.0 beyond, never below SLOW_CREDIT."""
        marks = [(0.0, 0.0), (self.passing, LEVEL_CREDIT["pass"]), (self.good, LEVEL_CREDIT["good"]),
                 (self.excellent, LEVEL_CREDIT["excellent"])]
        credit = 1.0
        for (low, low_credit), (high, high_credit) in zip(marks, marks[1:]):
            if ratio < high:
                credit = low_credit + (high_credit - low_credit) * (ratio - low) / (high - low)
                break
        return max(SLOW_CREDIT, min(1.0, credit))

    def level(self, ratio: float) -> str:
        if ratio >= self.excellent:
            return "excellent"
        if ratio >= self.good:
            return "good"
        if ratio >= self.passing:
            return "pass"
        return "below"


@dataclass(frozen=True)
class Check:
    id: str
    problem: str
    points: float
    suite: str
    description: str
    perf: bool = False
    baseline: str = ""
    ladder: Ladder | None = None
    tier: str = ""                   # one of TIERS
    kernel: str = ""                 # which kernel of the problem the check grades ("" if none)


@dataclass(frozen=True)
class Problem:
    id: str
    title: str
    order: int
    checks: tuple[Check, ...] = field(default=())

    @property
    def total(self) -> float:
        return sum(check.points for check in self.checks)


@dataclass(frozen=True)
class PointsTable:
    problems: tuple[Problem, ...]

    @property
    def checks(self) -> dict[str, Check]:
        return {check.id: check for problem in self.problems for check in problem.checks}

    def problem(self, problem_id: str) -> Problem:
        for problem in self.problems:
            if problem.id == problem_id:
                return problem
        raise KeyError(problem_id)

    @property
    def total(self) -> float:
        return sum(problem.total for problem in self.problems)


def load_points(points_dir: Path = POINTS_DIR, calibration_file: Path = CALIBRATION_FILE,
                gpu_name: str | None = None) -> PointsTable:
    """Load every problem's points file; perf ladders come from calibration for `gpu_name` if present."""
    calibration = load_calibration(calibration_file)
    problems = [_load_problem(path, calibration, gpu_name) for path in sorted(points_dir.glob("*.toml"))]
    return PointsTable(tuple(sorted(problems, key=lambda p: (p.order, p.id))))


def load_calibration(path: Path = CALIBRATION_FILE) -> dict:
    """{gpu model: {check id: {"pass":, "good":, "excellent":, "reference_ratio":}}}; {} if absent."""
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise PointsFileError(f"{path}: not valid JSON: {error}") from None


def calibrated_gpu(calibration: dict, gpu_name: str | None) -> str | None:
    """The calibrated model to use for `gpu_name`: itself, else the nearest by name, else any."""
    if not calibration:
        return None
    if gpu_name in calibration:
        return gpu_name
    words = set((gpu_name or "").lower().split())
    return max(sorted(calibration), key=lambda model: len(words & set(model.lower().split())))


def _load_problem(path: Path, calibration: dict, gpu_name: str | None) -> Problem:
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise PointsFileError(f"{path}: {error}") from None
    meta = _require(data, "problem", dict, path)
    problem_id = _require(meta, "id", str, path, "problem.id")
    if problem_id != path.stem:
        raise PointsFileError(f"{path}: problem.id is {problem_id!r} but the file is named {path.stem!r}")
    both = set(data.get("checks", {})) & set(data.get("perf", {}))
    if both:
        raise PointsFileError(f"{path}: {sorted(both)[0]!r} is both a check and a perf check; ids must be unique")
    model = calibrated_gpu(calibration, gpu_name)
    checks = [_load_check(path, problem_id, cid, spec, perf=False, calibration=None)
              for cid, spec in data.get("checks", {}).items()]
    checks += [_load_check(path, problem_id, cid, spec, perf=True,
                           calibration=(model, calibration.get(model, {}).get(cid)) if model else None)
               for cid, spec in data.get("perf", {}).items()]
    return Problem(problem_id, _require(meta, "title", str, path, "problem.title"),
                   int(meta.get("order", 99)), tuple(checks))


def _load_check(path, problem_id, check_id, spec, *, perf, calibration) -> Check:
    where = f"{'perf' if perf else 'checks'}.{check_id!r}"
    if not check_id.startswith(problem_id + "."):
        raise PointsFileError(f"{path}: {where}: check ids must start with '{problem_id}.'")
    points = _require(spec, "points", (int, float), path, f"{where}.points")
    if points < 0:
        raise PointsFileError(f"{path}: {where}.points must be >= 0, got {points}")
    suite = spec.get("suite", "hidden" if perf else "public")
    if suite not in SUITES:
        raise PointsFileError(f"{path}: {where}.suite must be one of {SUITES}, got {suite!r}")
    ladder = _ladder(path, where, spec, calibration) if perf else None
    tier = spec.get("tier", "")
    if tier not in TIERS:
        raise PointsFileError(f"{path}: {where}.tier must be one of {TIERS[1:]}, got {tier!r}")
    return Check(check_id, problem_id, float(points), suite, spec.get("description", ""),
                 perf=perf, baseline=spec.get("baseline", ""), ladder=ladder, tier=tier,
                 kernel=str(spec.get("kernel", "")))


def _ladder(path, where, spec, calibration) -> Ladder:
    model, measured = calibration or (None, None)
    values = measured or _require(spec, "ladder", dict, path, f"{where}.ladder")
    try:
        ratios = [float(values[level]) for level in LADDER_LEVELS]
    except KeyError as missing:
        raise PointsFileError(f"{path}: {where}.ladder needs {LADDER_LEVELS}, missing {missing}") from None
    if not ratios[0] <= ratios[1] <= ratios[2]:
        raise PointsFileError(f"{path}: {where}.ladder must rise pass <= good <= excellent, got {ratios}")
    return Ladder(*ratios, source=model if measured else "default")


def _require(table, key, kind, path, where=None):
    if key not in table:
        raise PointsFileError(f"{path}: missing key {where or key!r}")
    value = table[key]
    if not isinstance(value, kind):
        raise PointsFileError(f"{path}: {where or key} has the wrong type ({type(value).__name__})")
    return value
