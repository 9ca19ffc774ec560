"""One submission's suite split into parts, each part its own checking run on the submission's GPU.

Most of a GPU grade is Triton compiling the student's kernels on one CPU core while the GPU waits (the
reference alone on the H200: 186 of its 269 s). Run as separate checking runs side by side, the parts
compile in parallel on as many cores, while the GPU lock still gives every perf check the GPU to
itself, against the other parts too. Each part's results stream is merged back into one
(grader.results.merge_streams) before scoring.

The unit of a split is one test function with all its parametrizations (it keeps its compiled kernels
and its fixtures). Units are packed longest first into the part that has the least so far (or one
already checking the same problem, where it fits), by the seconds the reference's tests took on the
grading GPU (`test_seconds.json`, written by `grader bench grading --save-test-seconds`; this module
owns that file). The split is therefore the same for every submission of a grader version, and the
number of parts follows from the suite: as many as it takes for no part to be longer than the longest
unit, at most MAX_PARTS. Split by problem instead, four references at once on the H200 all waited
for their FlashAttention part (387 s, against 216 s for matmul's and at most 116 s for the others').
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from grader.grade.checking_run import Outcome
from grader.report.model import CRASHED, GRADED, HARNESS_ERROR, TIMEOUT, result_tests
from grader.results import merge_streams

TEST_SECONDS_FILE = Path(__file__).resolve().parent / "test_seconds.json"
MAX_PARTS = 4                  # checking runs per submission: each holds a checker, a worker, two CUDA contexts
UNKNOWN_SECONDS = 1.0          # a test function the file does not know (a new test)
# How a part's ending weighs in the whole run's status: the worst part decides.
SEVERITY = {GRADED: 0, CRASHED: 1, TIMEOUT: 2, HARNESS_ERROR: 3}


@dataclass(frozen=True)
class Part:
    label: str                  # for logs, reasons and its scratch folder: "2-matmul+softmax"
    selection: tuple[str, ...]  # pytest arguments: test functions, "tests_hidden/test_x.py::test_f"


def unit_of(nodeid: str) -> str:
    """The test function a test belongs to: its nodeid without the parametrization."""
    return nodeid.split("[", 1)[0]


def plan(collected_tests, problem_of_check: dict[str, str], seconds: dict[str, float] | None = None,
         max_parts: int = MAX_PARTS) -> list[Part]:
    """The parts for a suite whose collected tests are `collected_tests` ([(nodeid, check)]): [] when
    there is nothing worth splitting, or nothing to split it by (no test function of it was measured)."""
    seconds = load_test_seconds() if seconds is None else seconds
    units: dict[str, float] = {}
    problems: dict[str, list[str]] = {}
    for nodeid, check in collected_tests or ():
        unit = unit_of(nodeid)
        units.setdefault(unit, seconds.get(unit, UNKNOWN_SECONDS))
        problems.setdefault(unit, [])
        problem = problem_of_check.get(check, "other")
        if problem not in problems[unit]:
            problems[unit].append(problem)
    if not any(unit in seconds for unit in units):
        return []
    # never more parts than units: the total is at most their count times the longest
    count = min(max_parts, math.ceil(sum(units.values()) / max(units.values()) - 1e-9))
    if count < 2:
        return []
    # Longest first into the emptiest part; but into a part already checking the same problem when it
    # fits under the longest part there must be anyway: its kernels then compile once, not twice.
    target = max(sum(units.values()) / count, max(units.values()))
    bins: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    checking: list[set[str]] = [set() for _ in range(count)]   # the problems each part checks so far
    for unit in sorted(units, key=lambda u: -units[u]):        # stable: ties keep collection order
        kin = [i for i in range(count) if loads[i] + units[unit] <= target and checking[i] & set(problems[unit])]
        chosen = min(kin or range(count), key=lambda i: loads[i])
        bins[chosen].append(unit)
        loads[chosen] += units[unit]
        checking[chosen] |= set(problems[unit])
    order = list(units)
    parts = []
    for index, members in enumerate(bins, 1):
        members.sort(key=order.index)                            # collection order inside a part
        names = list(dict.fromkeys(p for unit in members for p in problems[unit]))
        parts.append(Part(f"{index}-{'+'.join(names)}", tuple(members)))
    return parts


def load_test_seconds(path: Path | None = None) -> dict[str, float]:
    """{test function: seconds the reference took}, or {} when the file is missing or unreadable."""
    path = TEST_SECONDS_FILE if path is None else path
    try:
        data = json.loads(Path(path).read_text())
        return {str(unit): float(value) for unit, value in data["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def save_test_seconds(results: list[dict], gpu: str, path: Path | None = None) -> dict[str, float]:
    """Write the mean seconds per test function over `results` (result.json dicts of graded references),
    keeping what the file knew of functions these results did not run; returns what was written."""
    path = TEST_SECONDS_FILE if path is None else path
    totals: dict[str, list[float]] = {}
    for result in results:
        per_unit: dict[str, float] = {}
        for test in result_tests(result):
            unit = unit_of(str(test.get("nodeid", "")))
            per_unit[unit] = per_unit.get(unit, 0.0) + float(test.get("duration") or 0.0)
        for unit, value in per_unit.items():
            totals.setdefault(unit, []).append(value)
    seconds = load_test_seconds(path) | {unit: round(sum(v) / len(v), 2) for unit, v in totals.items()}
    body = {"about": "seconds each test function of the reference took, graded alone on the GPU below; "
                     "grader.grade.parts splits submissions by it", "gpu": gpu,
            "seconds": dict(sorted(seconds.items()))}
    Path(path).write_text(json.dumps(body, indent=1) + "\n")
    return seconds


def combine(labelled: list[tuple[str, Outcome]]) -> Outcome:
    """The parts' outcomes as one checking run's: the worst part's status and exit code, every
    unfinished part's reason, the parts' results merged, their logs one after another, and the wall
    time of the slowest (they ran at once)."""
    worst_label, worst = max(labelled, key=lambda pair: SEVERITY.get(pair[1].status, 1))
    log = "\n".join(f"===== part {label} ({outcome.status}, {outcome.duration:.1f} s) =====\n{outcome.log}"
                    for label, outcome in labelled)
    if worst.status == GRADED:
        reason = ""
    elif worst.status == HARNESS_ERROR:      # the stream is not scored: the harness's reason alone
        reason = f"part {worst_label}: {worst.reason}"
    else:
        reason = "; ".join(f"part {label}: {outcome.reason}" for label, outcome in labelled
                           if outcome.status != GRADED and outcome.reason)
    return Outcome(worst.status, reason, worst.exit_code, max(o.duration for _, o in labelled),
                   merge_streams([outcome.stream for _, outcome in labelled]), log)
