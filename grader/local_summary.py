"""The points summary at the end of a local run: per problem, over the checks this run selected.

A run of part of the suite (`-k`, one file) is totalled over the checks it ran, never over a whole
problem whose other checks it did not select, and says how many it selected. With `-v` or `--checks`
each problem's checks follow, with the same data and wording as the TA's report (grader.scoring's
`problem_data` and `check_state`). Files in the student's code folder that are not graded are listed,
with the reason intake gives them (grader.submission_files).
"""

from __future__ import annotations

from pathlib import Path

from grader import results, submission_files
from grader.scoring import ProblemScore, check_state, points_text, problem_data, score_checks

TITLE_WIDTH = 48


def write_summary(terminalreporter, points, records, impl_name: str, *, breakdown: bool = False,
                  code_folder: Path | None = None) -> None:
    """Points per problem for the checks this run touched, then what did not run and why."""
    suites = tuple(sorted({_suite(r.nodeid) for r in records} - {None})) or ("public", "hidden")
    ran = {r.check for r in records}
    write = terminalreporter.write_line
    terminalreporter.section(f"points (impl: {impl_name})")
    selected, partial = [], False
    for problem in score_checks(points, records, suites):
        chosen = ProblemScore(problem.problem_id, problem.title, [c for c in problem.checks if c.check.id in ran])
        if not chosen.checks:
            continue
        selected.append(chosen)
        partial |= len(chosen.checks) < len(problem.checks)
        write(_problem_line(chosen, len(problem.checks)))
        if breakdown:
            for check in problem_data(chosen)["checks"]:
                write(f"    {check['id']:<{TITLE_WIDTH - 4}} {points_text(check['earned']):>6} / "
                      f"{points_text(check['points']):<6} {check_state(check)}")
    earned = sum(p.earned for p in selected)
    possible = sum(p.possible for p in selected)
    scope = "  (over the checks this run selected; run the whole suite for every check)" if partial else ""
    write(f"{'TOTAL':<{TITLE_WIDTH}} {earned:6.2f} / {possible:<6g}{scope}")
    if not breakdown:
        write("Each check's points: add -v or --checks (make test TEST_FLAGS=--checks).")
    not_run = [c for p in selected for c in p.not_run_here]
    if not_run:
        write("GPU-only checks not run here: " + ", ".join(c.check.id for c in not_run))
    harness = [r for r in records if r.outcome == results.HARNESS_ERROR]
    if harness:
        write(f"HARNESS ERRORS in {len(harness)} tests (not your fault; tell staff): "
              + ", ".join(r.nodeid for r in harness[:5]), red=True)
    if code_folder is not None:
        for line in files_lines(code_folder):
            write(line)


def _problem_line(problem: ProblemScore, of_checks: int) -> str:
    extra = []
    not_implemented = sum(c.not_implemented for c in problem.checks)
    if len(problem.checks) < of_checks:
        extra.append(f"{len(problem.checks)} of its {of_checks} checks selected")
    if not_implemented:
        extra.append(f"{not_implemented} tests not implemented")
    if problem.not_run_here:
        extra.append(f"{sum(c.check.points for c in problem.not_run_here):g} pts of GPU-only checks not run here")
    return (f"{problem.title:<{TITLE_WIDTH}} {problem.earned:6.2f} / {problem.possible:<6g}"
            + (f"  ({'; '.join(extra)})" if extra else ""))


def files_lines(folder: Path) -> list[str]:
    """The helper modules graded with the code in `folder`, and the Python files there that are not."""
    counted = submission_files.count_folder(folder)
    lines = []
    if counted.helpers:
        lines.append("Helper modules graded with your code: " + ", ".join(f"{name}.py" for name in counted.helpers))
    skipped = [(path, reason) for path, reason in counted.left_out
               if path.endswith(".py") and path != "__init__.py"]
    if skipped:
        lines.append("NOT GRADED (left out of `make submission`; importing them fails here as when graded):")
        lines += [f"  {folder.name}/{path}: {reason}" for path, reason in skipped]
    return lines


def _suite(nodeid: str) -> str | None:
    return {"tests_public": "public", "tests_hidden": "hidden"}.get(nodeid.split("/")[0])
