"""HTML pages: one report per student, one class overview. Self-contained files (inline CSS, inline
SVG charts), no JavaScript, no network. Jinja2 with autoescape and StrictUndefined: everything that
came from a submission (messages, file names, logs) is escaped, and a renamed field fails loudly.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import jinja2

from grader.report import model
from grader.report.atomic import write_atomic
from grader.report.time_summary import compiles_per_submission, time_rows

TEMPLATES = Path(__file__).parent / "templates"
HISTOGRAM_BINS = 10


def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _css() -> str:
    return (TEMPLATES / "style.css").read_text()


def render_page(template_name: str, **values) -> str:
    """Any page of templates/ with the shared stylesheet (the leaderboard's, the similarity report's)."""
    return environment().get_template(template_name).render(css=_css(), **values)


def render_student(result: dict, lateness=None, leaderboard_name: str = "") -> str:
    """One student's report; `lateness` (grader.course.late.Lateness) shows the late rule applied."""
    template = environment().get_template("student.html.j2")
    return template.render(css=_css(), r=result, late=_late_view(lateness), leaderboard_name=leaderboard_name,
                           status=model.STATUS_LABELS.get(result["status"], result["status"]),
                           earned=model.points_text(result["score"]["earned"]),
                           possible=model.points_text(result["score"]["possible"]),
                           percent=model.percent_text(result["score"]["earned"], result["score"]["possible"]),
                           css_class=model.score_class(result["score"]["earned"], result["score"]["possible"]),
                           problems=model.problem_views(result), not_run=_not_run_checks(result),
                           provisional=model.provisional_note(result),
                           environment=model.environment_rows(result),
                           fix_first=model.fix_first(result))


def _late_view(lateness) -> dict:
    """What the reports say of lateness: a badge, the rule and what it meant, the final total."""
    if lateness is None:
        return {"badge": False, "rule": "", "outcome": "", "final": "", "penalty": ""}
    return {"badge": bool(lateness.late), "rule": lateness.rule, "outcome": lateness.outcome,
            "final": model.points_text(lateness.final) if lateness.final is not None else "",
            "penalty": model.points_text(lateness.penalty) if lateness.penalty else ""}


def _not_run_checks(result: dict) -> list[str]:
    return [c["id"] for p in result.get("problems", []) for c in p["checks"] if c["not_run_here"]]


# --- the class page ----------------------------------------------------------------------------------


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str
    count: int


@dataclass
class ProblemSpread:
    title: str
    total: str
    mean: str
    stdev: str
    low: str
    high: str
    mean_x: float
    low_x: float
    high_x: float


@dataclass
class PerfSpread:
    check: str
    count: int
    low: str
    median: str
    high: str
    dots: list          # x positions (0..200) of each ratio on a 0..max scale
    ladder_x: list      # x positions of the ladder's pass/good/excellent marks


def write_index(path: Path, results: list[dict], points, lateness: dict | None = None,
                late_rule: str = "", links: list[tuple[str, str]] = ()) -> None:
    write_atomic(Path(path), render_index(results, points, lateness, late_rule, links))


def render_index(results: list[dict], points, lateness: dict | None = None, late_rule: str = "",
                 links: list[tuple[str, str]] = ()) -> str:
    """The class page. `lateness`: id -> grader.course.late.Lateness; `late_rule`: the course's rule in
    words; `links`: (href, text) of the other class pages present (leaderboard, similarity report)."""
    graded = [r for r in results if r["status"] not in (model.NOT_GRADABLE, model.HARNESS_ERROR)]
    lateness = lateness or {}
    template = environment().get_template("index.html.j2")
    return template.render(late_rule=late_rule, links=list(links),
        css=_css(), count=len(results), statuses=Counter(r["status"] for r in results).most_common(),
        histogram=histogram([r for r in results if r["status"] != model.HARNESS_ERROR]),
        problems=problem_spreads(graded, points),
        most_failed=most_failed(graded), perf=perf_spreads(graded, points),
        environment=model.environment_rows(graded[0]) if graded else [],
        times=time_rows(graded), compiles=compiles_per_submission(graded),
        rows=[_index_row(r, lateness.get(r["id"])) for r in results])


def histogram(results: list[dict], bins: int = HISTOGRAM_BINS) -> list[Bar]:
    """Share of possible points per student, in `bins` bars; heights scaled to a 100-px chart."""
    counts = [0] * bins
    for result in results:
        possible = result["score"]["possible"]
        share = result["score"]["earned"] / possible if possible > 0 else 0.0
        counts[min(int(share * bins), bins - 1)] += 1
    tallest = max(counts) or 1
    width = 300 / bins
    return [Bar(i * width, 100 - 100 * n / tallest, width - 2, 100 * n / tallest,
                f"{100 * i // bins}-{100 * (i + 1) // bins}%", n) for i, n in enumerate(counts)]


def problem_spreads(results: list[dict], points) -> list[ProblemSpread]:
    spreads = []
    for problem in points.problems:
        earned = [p["earned"] for r in results for p in r["problems"] if p["id"] == problem.id]
        total = max([p["total"] for r in results for p in r["problems"] if p["id"] == problem.id]
                    or [problem.total]) or 1.0
        if not earned:
            continue
        mean, low, high = statistics.fmean(earned), min(earned), max(earned)
        stdev = statistics.pstdev(earned) if len(earned) > 1 else 0.0
        scale = 200 / total
        spreads.append(ProblemSpread(problem.title, model.points_text(total), model.points_text(mean),
                                     model.points_text(stdev), model.points_text(low), model.points_text(high),
                                     mean * scale, low * scale, high * scale))
    return spreads


def most_failed(results: list[dict], limit: int = 15) -> list[tuple[str, str, int]]:
    """(test, check, number of submissions where it did not pass), most failed first."""
    counts: Counter = Counter()
    checks = {}
    for result in results:
        for problem in result["problems"]:
            for check in problem["checks"]:
                for test in check["tests"]:
                    if test["outcome"] not in ("passed", "not_run_here"):
                        counts[test["nodeid"]] += 1
                        checks[test["nodeid"]] = check["id"]
    return [(nodeid, checks[nodeid], n) for nodeid, n in counts.most_common(limit)]


def perf_spreads(results: list[dict], points) -> list[PerfSpread]:
    ratios: dict[str, list[float]] = {}
    for result in results:
        for check, values in model.perf_ratios(result).items():
            ratios.setdefault(check, []).extend(values)
    spreads = []
    for check_id, values in sorted(ratios.items()):
        ladder = getattr(points.checks.get(check_id), "ladder", None)
        marks = [ladder.passing, ladder.good, ladder.excellent] if ladder else []
        top = max(values + marks + [1.0]) * 1.1
        spreads.append(PerfSpread(check_id, len(values), f"{min(values):.2f}x",
                                  f"{statistics.median(values):.2f}x", f"{max(values):.2f}x",
                                  [200 * v / top for v in values], [200 * m / top for m in marks]))
    return spreads


def _index_row(result: dict, lateness=None) -> dict:
    score = result["score"]
    late = _late_view(lateness)
    unscored = result["status"] == model.HARNESS_ERROR
    return {"id": result["id"], "status": model.STATUS_LABELS.get(result["status"], result["status"]),
            "status_key": result["status"], "earned": "-" if unscored else model.points_text(score["earned"]),
            "possible": model.points_text(score["possible"]),
            "percent": model.percent_text(score["earned"], score["possible"]),
            "css": model.score_class(score["earned"], score["possible"]),
            "late": "late" if (late["badge"] if lateness is not None else result.get("late")) else "",
            "late_outcome": late["outcome"], "final": late["final"] if late["penalty"] else "",
            "reason": result.get("reason", ""),
            "provisional": model.provisional_note(result)}
