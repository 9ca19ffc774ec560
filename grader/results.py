"""What one pytest run reports about one implementation: the records the grader scores.

The checking pytest process writes a line stream (`--results-json`): a header naming every collected test,
one line per test, on a GPU shared with other submissions one line of what its lock cost (`gpu_lock`), an
end line. `read_stream` is its only reader, defensive because a killed or hostile
run may have written part of it; `merge_streams` joins the streams of one submission's parts (its suite
split over several checking runs) into one. Nothing here imports torch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from grader.perf.gpu_lock import INTERVAL_KINDS, MAX_INTERVALS

FORMAT_VERSION = 1
MESSAGE_LIMIT = 4000        # characters of a test's message kept when read back

# Outcomes of one test, as the plugin classifies them.
PASSED = "passed"
FAILED = "failed"                  # wrong answer, or the student's code raised
NOT_IMPLEMENTED = "not_implemented"  # the stub's NotImplementedError
NOT_RUN_HERE = "not_run_here"      # GPU-only (or Triton-only) check on a machine without one
HARNESS_ERROR = "harness_error"    # a bug in the tests or harness, never the student's fault
DID_NOT_REPORT = "did_not_report"  # filled in by the grader for checks a killed run never reached
OUTCOMES = (PASSED, FAILED, NOT_IMPLEMENTED, NOT_RUN_HERE, HARNESS_ERROR, DID_NOT_REPORT)


@dataclass
class TestRecord:
    nodeid: str
    check: str                 # check id from grader/points/<problem>.toml
    outcome: str
    message: str = ""          # for the student: what failed, which shape, how far off
    duration: float = 0.0
    perf: dict | None = None   # perf checks: {"ratio":, "baseline":, "measured":, "retry": bool, ...}

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r} for {self.nodeid}")


@dataclass
class RunResults:
    impl: str
    device: str                               # "cuda" or "cpu"
    tests: list[TestRecord] = field(default_factory=list)
    environment: dict = field(default_factory=dict)
    collected_checks: list[str] = field(default_factory=list)
    collected_tests: list[tuple[str, str]] | None = None   # (nodeid, check id) of every test; None: unknown
    not_run_here: list[str] = field(default_factory=list)  # nodeids that cannot run on this machine
    gpu_lock: dict | None = None      # on a shared GPU: {"totals": {...}, "intervals": ["kind start end"]}


def header_line(impl: str, device: str, environment: dict, collected_checks: list[str],
                collected_tests: list[tuple[str, str]] = (), not_run_here: list[str] = ()) -> str:
    """First line of a results stream: who was tested where, every test that should report, and
    those of them that cannot run on this machine (GPU-only on a CPU): they never count in the max,
    even when the run stops before reaching them."""
    header = {"type": "header", "version": FORMAT_VERSION, "impl": impl, "device": device,
              "environment": environment, "collected_checks": collected_checks}
    if collected_tests:  # absent, not empty, when unknown: readers then fall back to per-check zeros
        header["collected_tests"] = [list(pair) for pair in collected_tests]
        header["not_run_here"] = list(not_run_here)
    return json.dumps(header)


def record_line(record: TestRecord) -> str:
    return json.dumps({"type": "test", **asdict(record)})


def gpu_lock_line(summary: dict) -> str:
    """What the GPU's lock cost the run, and its timeline (grader.perf.gpu_lock.GpuLock.summary)."""
    return json.dumps({"type": "gpu_lock", **summary})


def amend_line(nodeid: str, message: str) -> str:
    """A test reported earlier turned out to have failed: a later event (its call corrupted the worker's
    memory, which killed a later test's call: grader.memory_safety) is charged to it. An amendment can only
    fail a test, so a forged one could never raise a score."""
    return json.dumps({"type": "amend", "nodeid": nodeid, "outcome": FAILED, "message": message})


END_LINE = json.dumps({"type": "end"})


@dataclass
class StreamRead:
    """What a results stream holds, as far as it can be trusted."""

    results: RunResults | None        # None when no valid header was written
    finished: bool                    # the run wrote its end line
    notes: list[str] = field(default_factory=list)   # what was ignored, and why


def read_stream(text: str, known_checks=None) -> StreamRead:
    """The one reader of a results stream; nothing malformed is ever scored.

    Tolerates a truncated last line (the writer was killed mid-line). Ignores records before the header,
    malformed ones, ones with a check outside `known_checks` (when given), and reads nothing after the end
    line. A test reported twice was written by someone other than the checker: it counts as failed.
    """
    results, finished, notes, seen, doubled = None, False, [], set(), set()
    header_seen = False
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            notes.append(f"results line {number} is incomplete (the run stopped while writing it)")
            break
        kind = entry.get("type") if isinstance(entry, dict) else None
        if kind == "header" and not header_seen:     # only the first header counts, valid or not
            header_seen, results = True, _header(entry)
            if results is None:
                notes.append(f"results header is malformed or has unknown version {entry.get('version')!r}")
        elif kind == "test" and results is not None:
            record = _record(entry)
            if record is None:
                notes.append(f"results line {number} is malformed; ignored")
            elif known_checks is not None and record.check not in known_checks:
                notes.append(f"{record.nodeid}: unknown check {record.check!r}; ignored")
            elif record.nodeid in seen:
                doubled.add(record.nodeid)
            else:
                seen.add(record.nodeid)
                results.tests.append(record)
        elif kind == "amend" and results is not None:
            notes += _amend(results.tests, entry)
        elif kind == "gpu_lock" and results is not None:
            results.gpu_lock = _gpu_lock(entry)
            if results.gpu_lock is None:
                notes.append(f"results line {number}: the GPU lock's summary is malformed; ignored")
        elif kind == "end":
            finished = True
            break
    for record in results.tests if results else ():   # the checker reports a test once
        if record.nodeid in doubled:
            record.outcome, record.message = FAILED, "reported twice: results not trusted"
            notes.append(f"{record.nodeid}: reported twice; scored as failed")
    return StreamRead(results, finished, notes)


def _amend(tests: list[TestRecord], entry: dict) -> list[str]:
    """Fail the record an amendment names (`amend_line`); the notes of what could not be applied."""
    nodeid, message = entry.get("nodeid"), entry.get("message", "")
    record = next((test for test in reversed(tests) if test.nodeid == nodeid), None)
    if record is None or entry.get("outcome") != FAILED or not isinstance(message, str):
        return [f"an amendment of {nodeid!r} names no earlier test or is malformed; ignored"]
    record.outcome = FAILED
    record.message = amended_message(message, record.message)
    if len(record.message) > MESSAGE_LIMIT:
        record.message = record.message[: MESSAGE_LIMIT // 2] + "\n...\n" + record.message[-MESSAGE_LIMIT // 2:]
    return []


def amended_message(charge: str, earlier: str) -> str:
    """The charge first, then what the test said when it ran (kept: it may be a failure of its own)."""
    return f"{charge}\n(when it ran: {earlier})" if earlier else charge


def _header(entry: dict) -> RunResults | None:
    if entry.get("version") != FORMAT_VERSION:
        return None
    environment, checks = entry.get("environment", {}), entry.get("collected_checks", [])
    if not (isinstance(environment, dict) and isinstance(checks, list)):
        return None
    return RunResults(impl=str(entry.get("impl", "")), device=str(entry.get("device", "")),
                      environment=environment, collected_checks=[str(c) for c in checks],
                      collected_tests=_collected_tests(entry.get("collected_tests")),
                      not_run_here=_strings(entry.get("not_run_here")))


def _strings(entries) -> list[str]:
    return [entry for entry in entries if isinstance(entry, str)] if isinstance(entries, list) else []


def _collected_tests(entries) -> list[tuple[str, str]] | None:
    """[(nodeid, check)] from a header's `collected_tests` ([[nodeid, check]] or [{nodeid, check}])."""
    if not isinstance(entries, list):
        return None
    pairs = []
    for entry in entries:
        if isinstance(entry, dict):
            entry = (entry.get("nodeid"), entry.get("check"))
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and all(isinstance(x, str) for x in entry):
            pairs.append((entry[0], entry[1]))
    return pairs


def _gpu_lock(entry: dict) -> dict | None:
    """{"totals": {name: number}, "intervals": ["kind start end"]}, or None when it is not that."""
    totals, intervals = entry.get("totals"), entry.get("intervals")
    if not (isinstance(totals, dict) and isinstance(intervals, list) and len(intervals) <= MAX_INTERVALS):
        return None
    if not all(isinstance(name, str) and isinstance(value, (int, float)) for name, value in totals.items()):
        return None
    if not all(parse_interval(item) is not None for item in intervals):
        return None
    return {"totals": totals, "intervals": intervals}


def parse_interval(item) -> tuple[str, float, float] | None:
    """("shared", 11.5, 12.0) from a timeline's "shared 11.500 12.000"; None when it is not one."""
    parts = item.split() if isinstance(item, str) else []
    try:
        kind, start, end = parts[0], float(parts[1]), float(parts[2])
    except (IndexError, ValueError):
        return None
    return (kind, start, end) if len(parts) == 3 and kind in INTERVAL_KINDS and start <= end else None


def _record(entry: dict) -> TestRecord | None:
    try:
        record = TestRecord(nodeid=str(entry["nodeid"]), check=str(entry["check"]),
                            outcome=str(entry["outcome"]), message=str(entry.get("message", "")),
                            duration=float(entry.get("duration", 0.0)),
                            perf=entry.get("perf") if isinstance(entry.get("perf"), dict) else None)
    except (KeyError, TypeError, ValueError):
        return None
    if len(record.message) > MESSAGE_LIMIT:
        record.message = record.message[: MESSAGE_LIMIT // 2] + "\n...\n" + record.message[-MESSAGE_LIMIT // 2:]
    return record


def merge_reads(reads: list[StreamRead]) -> StreamRead:
    """One read from the reads of one submission's parts (disjoint tests, each its own checking run).

    The header is the first valid one's, with every part's collected checks, tests and not-run-here tests;
    the records are every part's, in order; the lock summary sums the parts' totals and joins their
    timelines. It is finished only when every part wrote its own end line: a part cut short leaves the
    whole unfinished, and what it never reported scores zero. A part without a valid header adds nothing,
    so the caller must judge each part's own status first (no header is a harness error)."""
    parts = [read.results for read in reads if read.results is not None]
    notes = [note for read in reads for note in read.notes]
    if not parts:
        return StreamRead(None, False, notes)
    first = parts[0]
    known = all(part.collected_tests is not None for part in parts)
    merged = RunResults(
        impl=first.impl, device=first.device, environment=first.environment,
        tests=[record for part in parts for record in part.tests],
        collected_checks=list(dict.fromkeys(check for part in parts for check in part.collected_checks)),
        collected_tests=[pair for part in parts for pair in part.collected_tests or ()] if known else None,
        not_run_here=[nodeid for part in parts for nodeid in part.not_run_here])
    locks = [part.gpu_lock for part in parts if part.gpu_lock is not None]
    if locks:
        totals: dict[str, float] = {}
        for lock in locks:
            for name, value in lock["totals"].items():
                totals[name] = round(totals.get(name, 0) + value, 3)
        merged.gpu_lock = {"totals": totals,
                           "intervals": [item for lock in locks for item in lock["intervals"]][:MAX_INTERVALS]}
    return StreamRead(merged, all(read.finished for read in reads), notes)


def stream_text(read: StreamRead) -> str:
    """A read written back as a results stream (what a merged read would have been, as one run)."""
    run = read.results
    if run is None:
        return ""
    lines = [header_line(run.impl, run.device, run.environment, run.collected_checks, run.collected_tests or (),
                         run.not_run_here)]
    lines += [record_line(record) for record in run.tests]
    if run.gpu_lock is not None:
        lines.append(gpu_lock_line(run.gpu_lock))
    if read.finished:
        lines.append(END_LINE)
    return "\n".join(lines) + "\n"


def merge_streams(streams: list[str]) -> str:
    """One stream from the streams of one submission's parts (`merge_reads`, written back as text)."""
    return stream_text(merge_reads([read_stream(text) for text in streams]))


def known_only(read: StreamRead, known_checks) -> StreamRead:
    """The read without records of checks outside `known_checks`, each dropped with a note."""
    if read.results is None:
        return read
    kept = [record for record in read.results.tests if record.check in known_checks]
    notes = list(read.notes) + [f"{record.nodeid}: unknown check {record.check!r}; ignored"
                                for record in read.results.tests if record.check not in known_checks]
    run = RunResults(**{**vars(read.results), "tests": kept})
    return StreamRead(run, read.finished, notes)
