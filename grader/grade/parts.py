"""One submission's suite split into parts, each part its own checking run on the submission's GPU.

Most of a GPU grade is Triton compiling the student's kernels on one CPU core while the GPU waits (the
reference alone on the H200: 186 of its 269 s). Run as separate checking runs side by side, the parts
compile in parallel on as many cores, while the GPU lock still gives every perf check the GPU to
itself, against the other parts too. Each part's results stream is merged back into one
(grader.results.merge_reads) before scoring.

The unit of a split is one test function with all its parametrizations (it keeps its compiled kernels
and its fixtures), unless the function alone is longer than a part's share of the suite: then each of
its cases is a unit (FlashAttention's backward on ragged shapes, 30 cases, took 119 of the reference's
265 s alone, and as one unit its part was every shared batch's last). Units are packed longest first
into the part that has the least so far (or one already checking the same problem, where it fits), by
the seconds the reference's tests took on the grading GPU while a class's worth of them shared it
(`test_seconds.json`, written by `grader bench grading --save-test-seconds` or from graded folders by
the staff script `scripts/measure/save_test_seconds.py`; this module owns that file). Seconds alone
mislead: a test that calls into the worker often waits at every call while a neighbour times alone,
so on the H200 the part of matmul's and accounting's tests took 71 s alone and 257-286 s shared, its
neighbours 95 s alone and 141-213 s shared; packed by the shared seconds, the same tests came to
166-234 s a part. The split is therefore the
same for every submission of a grader version, and the number of parts follows from the suite: as
many as it takes for no part to be longer than its longest unit, at most MAX_PARTS and at most a core
each (parts_per_submission). Split by problem instead, four references at once on the H200 all waited
for their FlashAttention part (387 s, against 216 s for matmul's and at most 116 s for the others').
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.grade.checking_run import Outcome
from grader.report.model import CRASHED, GRADED, HARNESS_ERROR, TIMEOUT, result_tests
from grader.results import merge_reads, stream_text

TEST_SECONDS_FILE = Path(__file__).resolve().parent / "test_seconds.json"
# Six parts, on an H100 at two per GPU, graded 43.3-49.3 an hour against four's 40.6-44.4, inside the
# batches' spread, with 38-67% more lock waits, 9-10% more compiles and 67 GiB of GPU memory at most;
# a matmul compiling per shape ran past its part's budget (docs/history/grading-h100.md).
MAX_PARTS = 4                  # checking runs per submission: each holds a checker, a worker, two CUDA contexts
# Cores left over by the split: a timing core (grader.perf.cores) and one for the checkers. A Triton
# kernel's launch is CPU work, so a perf check timed while every core compiled measured the CPU, not
# the kernel (H200, 16 cores: four references in 3 parts each peaked at 93% busy, every ratio within
# the spread alone; in 4 parts, 100%, and one reference's bf16 4096^3 matmul ran 0.29 ms against 0.21
# ms in its first round while cuBLAS kept 0.19; five in 4 parts lost 0.35 points that way).
SPARE_CORES = 2
# A part may run this much past the longest part there must be, to keep a problem's tests together: a
# problem checked in two parts compiles its kernels in both (the reference split into four parts
# without it, every problem in two or three: 409 s inside tests, against 261 s whole).
KIN_SLACK = 0.1
MIN_PART_SECONDS = 5.0         # a part starts a checker and a worker, with their imports and CUDA contexts
UNKNOWN_SECONDS = 1.0          # a test function the file does not know (a new test)
SAFE_CASE = re.compile(r"[^\s:\[\]]+\]")   # a case id pytest takes back as written: "fewer_keys-full-fp32]"
# How a part's ending weighs in the whole run's status: the worst part decides.
SEVERITY = {GRADED: 0, CRASHED: 1, TIMEOUT: 2, HARNESS_ERROR: 3}


@dataclass(frozen=True)
class Part:
    label: str                  # for logs, reasons and its scratch folder: "2-matmul+softmax"
    selection: tuple[str, ...]  # pytest arguments: test functions, "tests_hidden/test_x.py::test_f"
    seconds: float = field(default=0.0, compare=False)   # what the reference's tests of it took (the file)


def parts_per_submission(at_once: int, cores: int | None = None) -> int:
    """How many parts each of `at_once` submissions graded side by side may be split into: one core
    each for its compiles, SPARE_CORES left over, between 1 (not split) and MAX_PARTS."""
    cores = usable_cores() if cores is None else cores
    return max(1, min(MAX_PARTS, (cores - SPARE_CORES) // max(1, at_once)))


def usable_cores() -> int:
    """The cores this process may run on (a Slurm task's allocation, not the whole node's)."""
    return len(os.sched_getaffinity(0))


def unit_of(nodeid: str) -> str:
    """The test function a test belongs to: its nodeid without the parametrization."""
    return nodeid.split("[", 1)[0]


def plan(collected_tests, problem_of_check: dict[str, str], seconds: dict[str, float] | None = None,
         max_parts: int = MAX_PARTS) -> list[Part]:
    """The parts for a suite whose collected tests are `collected_tests` ([(nodeid, check)]): [] when
    there is nothing worth splitting, or nothing to split it by (no test of it was measured)."""
    seconds = load_test_seconds() if seconds is None else seconds
    cases: dict[str, list[str]] = {}              # test function -> its collected nodeids, in order
    problem_of: dict[str, str] = {}
    for nodeid, check in collected_tests or ():
        cases.setdefault(unit_of(nodeid), []).append(nodeid)
        problem_of[nodeid] = problem_of_check.get(check, "other")
    if not any(unit in seconds or any(n in seconds for n in nodeids) for unit, nodeids in cases.items()):
        return []
    took = {nodeid: _seconds_of(nodeid, cases[unit], seconds) for unit in cases for nodeid in cases[unit]}
    function_seconds = {unit: sum(took[n] for n in nodeids) for unit, nodeids in cases.items()}
    splittable = {unit: _splittable(nodeids) for unit, nodeids in cases.items()}
    # the shortest a part can be: no shorter than a function that cannot be split, or than one case
    floor = max(max(took[n] for n in nodeids) if splittable[unit] else function_seconds[unit]
                for unit, nodeids in cases.items())
    total = sum(function_seconds.values())
    count = min(max_parts, math.ceil(total / floor - 1e-9), int(total // MIN_PART_SECONDS))
    if count < 2:
        return []
    # A function that would be longer than its share of a part is split into its cases; the others
    # stay whole (they keep their compiled kernels and fixtures).
    share = total / count
    units: dict[str, tuple[str, ...]] = {}        # unit (a function, or one case of it) -> its nodeids
    for unit, nodeids in cases.items():
        if function_seconds[unit] > share and splittable[unit]:
            units.update({nodeid: (nodeid,) for nodeid in nodeids})
        else:
            units[unit] = tuple(nodeids)
    length = {unit: sum(took[n] for n in nodeids) for unit, nodeids in units.items()}
    problems = {unit: list(dict.fromkeys(problem_of[n] for n in nodeids)) for unit, nodeids in units.items()}
    # Longest first into the emptiest part; but into a part already checking the same problem when it
    # fits under the longest part there must be anyway (give or take KIN_SLACK): its kernels then
    # compile once, not twice.
    target = max(share, max(length.values())) * (1 + KIN_SLACK)
    bins: list[list[str]] = [[] for _ in range(count)]
    loads = [0.0] * count
    checking: list[set[str]] = [set() for _ in range(count)]   # the problems each part checks so far
    for unit in sorted(units, key=lambda u: -length[u]):       # stable: ties keep collection order
        kin = [i for i in range(count) if loads[i] + length[unit] <= target and checking[i] & set(problems[unit])]
        chosen = min(kin or range(count), key=lambda i: loads[i])
        bins[chosen].append(unit)
        loads[chosen] += length[unit]
        checking[chosen] |= set(problems[unit])
    order = {unit: index for index, unit in enumerate(units)}
    parts = []
    for members, load in zip(bins, loads):
        if not members:
            continue
        members.sort(key=order.__getitem__)                      # collection order inside a part
        names = list(dict.fromkeys(p for unit in members for p in problems[unit]))
        parts.append(Part(f"{len(parts) + 1}-{'+'.join(names)}", _whole_functions(members, cases), round(load, 2)))
    return parts if len(parts) > 1 else []


def _seconds_of(nodeid: str, siblings: list[str], seconds: dict[str, float]) -> float:
    """A test's measured seconds; else its function's, spread over its cases; else UNKNOWN_SECONDS."""
    if nodeid in seconds:
        return seconds[nodeid]
    unit = unit_of(nodeid)
    if unit in seconds:
        return seconds[unit] / len(siblings)
    return UNKNOWN_SECONDS


def _whole_functions(members: list[str], cases: dict[str, list[str]]) -> tuple[str, ...]:
    """A part's selection, with a split function whose cases all landed in it named whole again."""
    selection, present = [], set(members)
    for unit in members:
        function = unit_of(unit)
        if unit == function or not set(cases[function]) <= present:
            selection.append(unit)
        elif function not in selection:
            selection.append(function)
    return tuple(selection)


def _splittable(nodeids: list[str]) -> bool:
    """Whether each of a function's cases can be selected on pytest's command line by its nodeid."""
    return len(nodeids) > 1 and all("[" in n and SAFE_CASE.fullmatch(n.split("[", 1)[1]) for n in nodeids)


def load_test_seconds(path: Path | None = None) -> dict[str, float]:
    """{test, or test function in an older file: seconds the reference took}, or {} when the file is
    missing or unreadable."""
    path = TEST_SECONDS_FILE if path is None else path
    try:
        data = json.loads(Path(path).read_text())
        return {str(unit): float(value) for unit, value in data["seconds"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def graded_on(result: dict) -> str:
    """The GPU a result.json's run had (its header's name, else its device), as the seconds file names it."""
    environment = result.get("environment") or {}
    return str(environment.get("gpu") or environment.get("device") or "cpu")


def save_test_seconds(results: list[dict], path: Path | None = None) -> dict[str, float]:
    """Write the mean seconds of each test (each case of a parametrized function) over `results`
    (result.json dicts of references graded side by side as a class is), keeping what the file knew of
    the test functions these results did not run; returns what was written. The file says how the
    references were graded: on which GPU, how many, at how many per GPU, in how many parts."""
    path = TEST_SECONDS_FILE if path is None else path
    totals: dict[str, list[float]] = {}
    for result in results:
        for test in result_tests(result):
            totals.setdefault(str(test.get("nodeid", "")), []).append(float(test.get("duration") or 0.0))
    measured = {nodeid: round(sum(v) / len(v), 2) for nodeid, v in totals.items() if nodeid}
    ran = {unit_of(nodeid) for nodeid in measured}
    kept = {key: value for key, value in load_test_seconds(path).items() if unit_of(key) not in ran}
    graded = {"references": len(results), "per_gpu": max((int(r.get("per_gpu") or 1) for r in results), default=1),
              "parts": max((len(r.get("parts") or ()) for r in results), default=0)}
    body = {"about": "seconds each test of the reference took on the GPU below, graded as `graded` says; "
                     "grader.grade.parts splits submissions by it", "gpu": graded_on(results[0]), "graded": graded,
            "seconds": dict(sorted((kept | measured).items()))}
    Path(path).write_text(json.dumps(body, indent=1) + "\n")
    return kept | measured


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
    merged = merge_reads([outcome.read for _, outcome in labelled])
    return Outcome(worst.status, reason, worst.exit_code, max(o.duration for _, o in labelled),
                   stream_text(merged), log, merged)
