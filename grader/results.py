"""What one pytest run reports about one implementation: the records the grader scores.

The checking pytest process writes a `RunResults` as JSON (`--results-json`); the grader's runner reads
it back with `RunResults.from_json`, which rejects anything malformed. Nothing here imports torch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

FORMAT_VERSION = 1

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
    collected_tests: list[list[str]] = field(default_factory=list)   # [nodeid, check id] of every test
    version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "RunResults":
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION:
            raise ValueError("results file has an unknown format version")
        tests = [TestRecord(**record) for record in data.pop("tests", [])]
        return cls(tests=tests, **data)


def header_line(impl: str, device: str, environment: dict, collected_checks: list[str],
                collected_tests: list[tuple[str, str]] = ()) -> str:
    """First line of a results stream: who was tested where, and every test that should report."""
    header = {"type": "header", "version": FORMAT_VERSION, "impl": impl, "device": device,
              "environment": environment, "collected_checks": collected_checks}
    if collected_tests:  # absent, not empty, when unknown: readers then fall back to per-check zeros
        header["collected_tests"] = [list(pair) for pair in collected_tests]
    return json.dumps(header)


def record_line(record: TestRecord) -> str:
    return json.dumps({"type": "test", **asdict(record)})


END_LINE = json.dumps({"type": "end"})


def read_stream(text: str) -> tuple[RunResults | None, bool]:
    """Parse a results stream written line by line; tolerate a truncated last line.

    Returns the results (None when no header was written) and whether the run reached its end line.
    """
    results, finished = None, False
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            break  # the writer was killed mid-line: keep what came before
        kind = entry.pop("type", None) if isinstance(entry, dict) else None
        if kind == "header" and entry.pop("version", None) == FORMAT_VERSION:
            results = RunResults(**entry)
        elif kind == "test" and results is not None:
            results.tests.append(TestRecord(**entry))
        elif kind == "end":
            finished = True
    return results, finished
