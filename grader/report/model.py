"""One submission's result as plain data (the `result.json` every report is rendered from), and the
view models the HTML templates print: every label, rounding and colour is decided here, not in a
template.

`build_result` turns the checking run's results stream into scores. The stream is read defensively:
a truncated last line ends it, a record for an unknown check or a repeated test is dropped and noted,
and every check without a record scores zero with the run's reason (fail closed).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from grader import results as results_format
from grader.perf.retime import RETIMED, retime_alone_s
from grader.points import LEVEL_CREDIT, PointsTable, Problem
from grader.report.plain_text import printable
from grader.results import DID_NOT_REPORT, NOT_RUN_HERE, TestRecord
from grader.scoring import check_state, points_text, problem_data, score_checks

RESULT_FORMAT = 1
# How a submission's run ended. harness_error: the run could not start or the grader/suites failed
# before any student code ran (no results header, pytest internal/usage error, a collection error):
# never a grade, never resumed, and `grader grade` exits non-zero while any is left.
STATUSES = GRADED, TIMEOUT, CRASHED, NOT_GRADABLE, HARNESS_ERROR = (
    "graded", "timeout", "crashed", "not_gradable", "harness_error")
LOG_TAIL_CHARS = 4000


# --- building result.json ------------------------------------------------------------------------


def maximum(points: PointsTable, suites: tuple[str, ...], perf: bool) -> float:
    return sum(c.points for c in selected_points(points, perf).checks.values() if c.suite in suites)


PROVISIONAL_NOTE = ("provisional: graded without a GPU. {points:g} points of GPU-only checks were not run, and the "
                    "Triton kernels ran in Triton's CPU interpreter, which ignores tl.dot's input_precision (TF32 "
                    "shows only on a GPU); the grade on the grading GPU can differ")


def provisional_note(result: dict) -> str:
    """Why a grade is not final (GPU-only checks not run on this machine), or "" when it is final."""
    not_run = sum(c["points"] for p in result.get("problems", []) for c in p["checks"] if c["not_run_here"])
    return PROVISIONAL_NOTE.format(points=not_run) if not_run else ""


def selected_points(points: PointsTable, perf: bool) -> PointsTable:
    """The table without perf checks when they were switched off (--no-perf): not in the maximum."""
    if perf:
        return points
    return PointsTable(tuple(Problem(p.id, p.title, p.order, tuple(c for c in p.checks if not c.perf))
                             for p in points.problems))


def build_result(student: str, points: PointsTable, read: results_format.StreamRead, status: str, reason: str,
                 log: str, context: dict, *, suites: tuple[str, ...], perf: bool = True,
                 not_run_here: frozenset[str] = frozenset()) -> dict:
    """Score one run whose results stream was read as `read` (grader.results). `status` is how the run
    ended (graded, timeout, crashed), or harness_error for a grade withheld: what was scored is kept for
    whoever looks into it. Tests in `not_run_here` (the batch's, from its preflight) or in the header's
    list that never reported cannot run on this machine: they stay out of the max, so a run cut short
    has the batch's max. `context["timing"]`, when given, joins the tests' own seconds."""
    table = selected_points(points, perf)
    read = results_format.known_only(read, table.checks)
    header, records, notes = read.results, list(read.results.tests if read.results else ()), read.notes
    if status == GRADED and header is None:
        status, reason = CRASHED, "the checking run wrote no results"
    not_here = set(not_run_here) | set(header.not_run_here if header else ())
    records += missing_records(table, suites, header, records, status, reason, not_here)
    scores = score_checks(table, records, suites)
    result = {
        "format": RESULT_FORMAT, "id": student, "status": status, "reason": reason,
        "graded_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "score": {"earned": round(sum(p.earned for p in scores), 4),
                  "possible": sum(p.possible for p in scores), "total": sum(p.total for p in scores)},
        "problems": [problem_data(p) for p in scores if p.checks],
        "device": header.device if header else "", "environment": header.environment if header else {},
        "notes": notes, "log_tail": printable(log)[-LOG_TAIL_CHARS:],
        "missing_exact": header is not None and header.collected_tests is not None,
        **context,
        "timing": time_breakdown(records, table, header) | context.get("timing", {}),
    }
    if header is not None and header.gpu_lock is not None:
        result["gpu_lock"] = header.gpu_lock         # a shared GPU's waits and timeline, for staff
    result["provisional"] = provisional_note(result)
    return result


def time_breakdown(records, table: PointsTable, header) -> dict:
    """Where the run's test time went: correctness and perf checks, and on a GPU shared through its lock
    (grader.perf.gpu_lock) the Triton compiles it lent the GPU for, its waits for the lock and its perf
    checks' time with the GPU alone; the perf tests timed twice (grader.perf.retime) and, of that time
    alone, their retimes'. Seconds summed over the run's parts, which run at once."""
    perf_checks = {check.id for check in table.checks.values() if check.perf}
    perf_s = sum(r.duration for r in records if r.check in perf_checks)
    breakdown = {"tests_s": round(sum(r.duration for r in records), 3),
                 "correctness_s": round(sum(r.duration for r in records if r.check not in perf_checks), 3),
                 "perf_s": round(perf_s, 3)}
    retimed = [r.perf for r in records if r.check in perf_checks and isinstance(r.perf, dict) and RETIMED in r.perf]
    if retimed:
        breakdown["retimes"] = len(retimed)
    totals = (header.gpu_lock or {}).get("totals", {}) if header is not None else {}
    if totals:
        # the lock's own total: every hold alone, a retime's second reading's included
        breakdown |= {"compile_s": totals.get("lent_s", 0.0), "compiles": int(totals.get("compiles", 0)),
                      "lock_wait_s": totals.get("waited_s", 0.0), "perf_alone_s": totals.get("alone_s", 0.0)}
        if retimed:
            breakdown["retime_alone_s"] = round(sum(retime_alone_s(perf) or 0.0 for perf in retimed), 3)
    return breakdown


def missing_records(table: PointsTable, suites, header, records, status, reason,
                    not_here=frozenset()) -> list[TestRecord]:
    """Zero-scoring records for what never reported. With the header's list of collected tests this
    is exact, test by test (a test in `not_here` is recorded as not run here). Without it: one per
    check that has no record at all, plus, when the run ended early, one for the check of the last
    report (the test cut off may have been one of its)."""
    why = reason or "no test of this check reported a result"
    wanted = {c.id for c in table.checks.values() if c.suite in suites}
    reported = {r.nodeid for r in records}
    collected = header.collected_tests if header else None
    if collected is not None:
        return [TestRecord(nodeid, check, NOT_RUN_HERE, "not run on this machine") if nodeid in not_here
                else TestRecord(nodeid, check, DID_NOT_REPORT, why)
                for nodeid, check in collected if check in wanted and nodeid not in reported]
    checks_reported = {r.check for r in records}
    missing = [TestRecord(f"{check} (did not report)", check, DID_NOT_REPORT, why)
               for check in sorted(wanted - checks_reported, key=list(table.checks).index)]
    if status in ("timeout", "crashed") and records:
        last = records[-1].check
        missing.append(TestRecord(f"{last} (test cut off when the run stopped)", last, DID_NOT_REPORT, why))
    return missing


def not_gradable_result(student: str, reason: str, context: dict, maximum: float = 0.0) -> dict:
    """Nothing ran: zero out of `maximum` (the batch's max), with the reason."""
    return unscored_result(student, NOT_GRADABLE, reason, context, maximum)


def unscored_result(student: str, status: str, reason: str, context: dict, maximum: float = 0.0,
                    log: str = "") -> dict:
    """No check was scored (not_gradable, harness_error): zero out of `maximum`, with the reason."""
    return {"format": RESULT_FORMAT, "id": student, "status": status, "reason": reason,
            "graded_at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "score": {"earned": 0.0, "possible": maximum, "total": maximum}, "problems": [], "device": "",
            "environment": {}, "notes": [], "log_tail": printable(log)[-LOG_TAIL_CHARS:], **context,
            "timing": {"tests_s": 0.0, **context.get("timing", {})}}



def result_tests(result: dict):
    """Every test record of a result, problem by problem, check by check."""
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            yield from check["tests"]




# --- view models for the templates -------------------------------------------------------------------


STATUS_LABELS = {"graded": "graded", "timeout": "timed out", "crashed": "crashed",
                 "not_gradable": "not gradable", "harness_error": "harness error (not graded; regraded next run)"}
OUTCOME_LABELS = {"passed": "passed", "failed": "failed", "not_implemented": "not implemented",
                  "not_run_here": "not run here", "harness_error": "harness error (not your fault)",
                  "did_not_report": "did not report"}


def percent_text(earned: float, possible: float) -> str:
    """Never shows 100% unless the score is full, nor 0% unless it is zero (coverage.py's rule)."""
    if possible <= 0:
        return "n/a"
    share = 100.0 * earned / possible
    if 99 < share < 100:
        return "99%"
    if 0 < share < 1:
        return "1%"
    return f"{share:.0f}%"


def score_class(earned: float, possible: float) -> str:
    if possible <= 0:
        return "none"
    share = earned / possible
    return "full" if share >= 0.999 else "high" if share >= 0.7 else "mid" if share >= 0.4 else "low"


@dataclass
class PerfRow:
    check: str
    description: str
    ratio: str
    level: str
    ladder: str
    baseline: str
    earned: str


@dataclass
class FoldedFailure:
    """Tests of one check that failed with one message, shown once."""

    names: list
    outcome: str
    message: str
    hidden: bool = False    # hidden tests are counted, never named

    @property
    def label(self) -> str:
        if self.hidden:
            return f"{len(self.names)} hidden test{'s' if len(self.names) != 1 else ''}"
        shown = ", ".join(self.names[:FOLDED_NAMES])
        more = len(self.names) - FOLDED_NAMES
        return shown + (f" and {more} more" if more > 0 else "")


@dataclass
class CheckRow:
    id: str
    description: str
    earned: str
    points: str
    css: str
    state: str
    failing: list           # FoldedFailure, one per distinct message


@dataclass
class ProblemView:
    id: str
    title: str
    earned: str
    possible: str
    percent: str
    css: str
    checks: list
    perf_rows: list
    missing: str = ""        # why the problem's module was not graded ("" when it was)


FOLDED_NAMES = 4             # test names shown for a folded message before "and N more"


def problem_views(result: dict) -> list[ProblemView]:
    views = []
    missing = {module: _missing_text(result, module) for module in result.get("missing", [])}
    for problem in result.get("problems", []):
        rows, perf_rows = [], []
        for check in problem["checks"]:
            failed = [t for t in check["tests"] if t["outcome"] != "passed"]
            state = check_state(check)
            rows.append(CheckRow(check["id"], check["description"], points_text(check["earned"]),
                                 points_text(check["points"]),
                                 "none" if check["not_run_here"] else score_class(check["earned"], check["points"]),
                                 state, [] if problem["id"] in missing else fold_failures(failed, check["suite"])))
            if check["perf"]:
                perf_rows.append(_perf_row(check))
        views.append(ProblemView(problem["id"], problem["title"], points_text(problem["earned"]),
                                 points_text(problem["possible"]),
                                 percent_text(problem["earned"], problem["possible"]),
                                 score_class(problem["earned"], problem["possible"]), rows, perf_rows,
                                 missing.get(problem["id"], "")))
    return views


def fold_failures(tests: list[dict], suite: str) -> list[FoldedFailure]:
    """One entry per distinct (outcome, message) of these tests, in the order they first appear."""
    folded: dict[tuple[str, str], FoldedFailure] = {}
    for test in tests:
        outcome = OUTCOME_LABELS.get(test["outcome"], test["outcome"])
        message = student_message(test["message"], suite)
        entry = folded.setdefault((outcome, message), FoldedFailure([], outcome, message, suite == "hidden"))
        entry.names.append(test_name(test["nodeid"]))
    return list(folded.values())


# --- what to fix first -------------------------------------------------------------------------------


# What the checker says when the process running the student's code died or hung (grader.impl).
CRASH_MARKERS = ("the process running your code died", "your code did not return within",
                 "hung earlier in this run", "the worker did not start")


@dataclass
class FixItem:
    kind: str           # "missing", "crash" or "checks"
    text: str
    tests: int = 0      # how many tests it accounts for (0: not counted)


def fix_first(result: dict) -> list[FixItem]:
    """What the student should fix, in order: files that were not graded, runs and tests that crashed
    or hung (each distinct message once, with its count), then how many checks are left."""
    items = []
    tests_of = {p["id"]: [t for c in p["checks"] for t in c["tests"]] for p in result.get("problems", [])}
    for module in result.get("missing", []):
        items.append(FixItem("missing", _missing_text(result, module), len(tests_of.get(module, []))))
    if result.get("status") in (TIMEOUT, CRASHED) and result.get("reason"):
        items.append(FixItem("crash", f"the run {STATUS_LABELS[result['status']]}: {result['reason']}"))
    crashes: dict[str, int] = {}
    for problem in result.get("problems", []):
        if problem["id"] in result.get("missing", []):
            continue
        for check in problem["checks"]:
            for test in check["tests"]:
                line = _crash_line(student_message(test["message"], check["suite"]))
                if line:
                    crashes[line] = crashes.get(line, 0) + 1
    items += [FixItem("crash", line, count) for line, count in crashes.items()]
    open_checks = [c for p in result.get("problems", []) if p["id"] not in result.get("missing", [])
                   for c in p["checks"] if not c["not_run_here"] and c["earned"] < c["points"] - 1e-9]
    if open_checks:
        items.append(FixItem("checks", f"{len(open_checks)} check{'s' if len(open_checks) != 1 else ''} of the "
                             "submitted modules not passed yet: each is listed below with its failures"))
    return items


def _missing_text(result: dict, module: str) -> str:
    why = (result.get("missing_reasons") or {}).get(module)
    return f"{module}.py is missing from the submission" + (f" ({why})" if why else "")


def _crash_line(message: str) -> str:
    for line in message.splitlines():
        if any(marker in line for marker in CRASH_MARKERS):
            return line.strip()
    return ""


# --- the environment a grade was measured in -------------------------------------------------------------


ENVIRONMENT_LABELS = {   # result.json's environment keys, in the order shown; the rest follow by name
    "gpu_name": "GPU", "gpu_count": "GPUs visible", "driver": "NVIDIA driver", "cuda": "CUDA", "cudnn": "cuDNN",
    "python": "Python", "torch": "PyTorch", "triton": "Triton", "clocks_before": "clocks before the checks",
    "clocks_after": "clocks after the checks", "copy_gbs": "copy bandwidth", "matmul_tflops": "bf16 matmul",
    "other_gpu_processes": "other processes on the GPU", "calibration": "perf ladders",
    "fingerprint_error": "environment not measured",
}
HIDDEN_ENVIRONMENT = {"device", "gpu_uuid"}   # the device is its own row; a GPU's UUID helps nobody reading


def environment_rows(result: dict) -> list[tuple[str, str]]:
    """(label, value) rows for the report's Environment table: labelled, formatted, empty ones left out."""
    sandbox = result.get("sandbox", "")
    if sandbox == "none":   # said plainly: this grade's student code could reach what the grader could
        sandbox = "NONE: graded unsandboxed (student code could read and write what the grading user can)"
    rows = [("device", result.get("device") or (result.get("environment") or {}).get("device", "")),
            ("sandbox", sandbox), ("suite", result.get("suite", "")), ("grader", result.get("grader_version", "")),
            ("graded at", result.get("graded_at", ""))]
    environment = {k: v for k, v in (result.get("environment") or {}).items() if k not in HIDDEN_ENVIRONMENT}
    order = [*[k for k in ENVIRONMENT_LABELS if k in environment], *sorted(set(environment) - set(ENVIRONMENT_LABELS))]
    rows += [(ENVIRONMENT_LABELS.get(key, key.replace("_", " ")), _environment_value(key, environment[key]))
             for key in order]
    return [(label, value) for label, value in rows if value not in ("", None)]


def _environment_value(key: str, value) -> str:
    if value is None or value == [] or value == {}:
        return ""
    if key == "gpu_count":
        return "" if value in (0, 1) else str(value)
    if key.startswith("clocks") and isinstance(value, dict):
        parts = [f"{name} {value[field]} MHz" for field, name in (("sm_mhz", "SM"), ("mem_mhz", "memory"))
                 if value.get(field) is not None]
        return ", ".join(parts)
    if key == "copy_gbs":
        return f"{value:g} GB/s"
    if key == "matmul_tflops":
        return f"{value:g} TFLOP/s"
    if key == "other_gpu_processes":
        return "pids " + ", ".join(str(pid) for pid in value)
    if key == "calibration" and isinstance(value, dict):
        return value.get("warning") or (f"calibrated on {value['model']}" if value.get("model") else "")
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items() if v not in (None, ""))
    if isinstance(value, (list, tuple)):
        return ", ".join(str(item) for item in value)
    return str(value)


def _perf_row(check: dict) -> PerfRow:
    ratios = [t["perf"]["ratio"] for t in check["tests"] if t.get("perf") and "ratio" in t["perf"]]
    ladder = check.get("ladder") or {}
    ladder_text = (f"pass {ladder['pass']:g}x, good {ladder['good']:g}x, excellent {ladder['excellent']:g}x "
                   f"({ladder.get('source', 'default')})") if ladder else ""
    ratio = ", ".join(f"{r:.2f}x" for r in ratios) if ratios else "not measured"
    level = "not run here" if check["not_run_here"] else (check.get("level") or "below")
    perfs = [t["perf"] for t in check["tests"] if isinstance(t.get("perf"), dict)]
    notes = []
    retimed = sum(RETIMED in perf for perf in perfs)
    if retimed:   # timed again in a fresh worker, the better reading kept (grader.perf.retime)
        notes.append(f"retimed {retimed} of {len(perfs)}" if len(perfs) > 1 else "retimed")
    if any(perf.get("retry") for perf in perfs):   # the kept reading is still flagged
        notes.append("environment off: regrade with --only")   # scored as measured, never inflated
    if notes:
        level += f" ({'; '.join(notes)})"
    return PerfRow(check["id"], check["description"], ratio, level, ladder_text, check.get("baseline", ""),
                   f"{points_text(check['earned'])} / {points_text(check['points'])}")


# What a student sees of a failing hidden test: a fixed verdict of its kind, never the test's name, its
# values or text the student's code chose. A message quotes what the code returned (a string, a shape,
# a number), and code that learnt a hidden test's name would spell it there.
HIDDEN_VERDICTS = {
    "crash": "a hidden test stopped: the process running your code died or your code did not return",
    "raised": "a hidden test failed: your code raised an exception",
    "not_implemented": "a hidden test failed: not implemented",
    "failed": "a hidden test failed: wrong result or a broken rule",
}


def student_message(message: str, suite: str) -> str:
    """What a student may see of a failure: a hidden test's message is one fixed verdict of its kind."""
    if suite != "hidden":
        return message
    if any(marker in message for marker in CRASH_MARKERS):
        return HIDDEN_VERDICTS["crash"]
    if message.startswith("your code raised") or "StudentCodeError" in message:
        return HIDDEN_VERDICTS["raised"]
    if "NotImplementedError" in message or message.startswith("not implemented"):
        return HIDDEN_VERDICTS["not_implemented"]
    return HIDDEN_VERDICTS["failed"] if message else ""


def test_name(nodeid: str) -> str:
    return nodeid.split("::", 1)[-1]


def perf_ratios(result: dict) -> dict[str, list[float]]:
    """check id -> measured ratios, for the class's perf distribution."""
    ratios: dict[str, list[float]] = {}
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            if check["perf"]:
                for test in check["tests"]:
                    if test.get("perf") and isinstance(test["perf"].get("ratio"), (int, float)):
                        ratios.setdefault(check["id"], []).append(float(test["perf"]["ratio"]))
    return ratios


def credit_of(level: str | None) -> float:
    return LEVEL_CREDIT.get(level or "below", 0.0)
