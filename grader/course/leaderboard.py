"""The speed leaderboard: per perf case, the class's kernels ranked by their ratio to the baseline.

Only graded submissions whose perf test passed (its kernel was right on the fresh inputs of every
timed round) are listed, under a pseudonym: the one the student chose (a `leaderboard_name` file in
the submission, read at intake by grader.course.pseudonyms) or their id hashed with the course's salt.
A case timed by nobody says "not measured" (a grade without a GPU never times a kernel). Written as
OUT/leaderboard.html, staff and students alike may see it; each submission's ratios also go into its
Gradescope upload as Gradescope's `leaderboard` field (grader.course.gradescope_json).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from grader.report.atomic import write_atomic

GRADED, PASSED, NOT_RUN_HERE = "graded", "passed", "not_run_here"
SALT_FILE = ".leaderboard-salt"       # in OUT, when the course file gives no [leaderboard] salt
NOT_MEASURED = "not measured"


@dataclass
class Entry:
    name: str
    ratio: float
    level: str = ""


@dataclass
class Board:
    case: str                  # the perf test's node id
    label: str                 # "matmul.perf.throughput: bf16_4096x4096x4096"
    baseline: str
    entries: list[Entry] = field(default_factory=list)
    not_measured: int = 0      # graded submissions whose grade timed no kernel here (no GPU)

    @property
    def status(self) -> str:
        return "" if self.entries else NOT_MEASURED


def case_label(check: str, nodeid: str) -> str:
    name = nodeid.split("::", 1)[-1]
    case = name[name.index("[") + 1:-1] if name.endswith("]") and "[" in name else name
    return f"{check}: {case}"


def perf_tests(result: dict):
    """(check, test) for every perf test of a result."""
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            if check.get("perf"):
                for test in check["tests"]:
                    yield check, test


def timed_ratio(result: dict, test: dict) -> float | None:
    """The ratio a leaderboard may list: a graded submission's passed perf test; else None."""
    ratio = (test.get("perf") or {}).get("ratio")
    if result.get("status") != GRADED or test.get("outcome") != PASSED:
        return None
    return float(ratio) if isinstance(ratio, (int, float)) and ratio == ratio and ratio > 0 else None


def pseudonym(result: dict, salt: str) -> str:
    chosen = result.get("leaderboard_name")
    if isinstance(chosen, str) and chosen.strip():
        return chosen.strip()
    return hashed_name(str(result.get("id", "")), salt)


def hashed_name(student: str, salt: str) -> str:
    return "anon-" + hashlib.sha256(f"{salt}\0{student}".encode()).hexdigest()[:8]


def names(results: list[dict], salt: str) -> dict[str, str]:
    """id -> the name shown; a chosen name taken by two students gets each a short hash suffix."""
    shown = {r["id"]: pseudonym(r, salt) for r in results}
    counts: dict[str, int] = {}
    for name in shown.values():
        counts[name] = counts.get(name, 0) + 1
    return {student: name if counts[name] == 1 else f"{name} #{hashed_name(student, salt)[5:9]}"
            for student, name in shown.items()}


def boards(results: list[dict], salt: str) -> list[Board]:
    shown = names(results, salt)
    found: dict[str, Board] = {}
    for result in results:
        for check, test in perf_tests(result):
            board = found.setdefault(test["nodeid"], Board(test["nodeid"], case_label(check["id"], test["nodeid"]),
                                                           check.get("baseline", "")))
            ratio = timed_ratio(result, test)
            if ratio is not None:
                level = check["ladder"] and _level(check["ladder"], ratio)
                board.entries.append(Entry(shown[result["id"]], ratio, level or ""))
            elif result.get("status") == GRADED and test.get("outcome") == NOT_RUN_HERE:
                board.not_measured += 1
    for board in found.values():
        board.entries.sort(key=lambda e: (-e.ratio, e.name))
    return sorted(found.values(), key=lambda b: b.label)


def gradescope_entries(result: dict) -> list[dict]:
    """Gradescope's `leaderboard` field for one submission: each timed case's ratio, higher first."""
    return [{"name": case_label(check["id"], test["nodeid"]), "value": round(ratio, 4), "order": "desc"}
            for check, test in perf_tests(result) if (ratio := timed_ratio(result, test)) is not None]


def salt_for(out: Path, course) -> str:
    """The course's salt, else one kept in OUT (made once, at random, so pseudonyms stay put)."""
    if course is not None and course.leaderboard_salt:
        return course.leaderboard_salt
    path = Path(out) / SALT_FILE
    if not path.is_file():
        write_atomic(path, secrets.token_hex(16))
    return path.read_text().strip()


def write_leaderboard(path: Path, results: list[dict], salt: str) -> None:
    from grader.report import html

    write_atomic(Path(path), html.render_page("leaderboard.html.j2", boards=boards(results, salt),
                                              not_measured=NOT_MEASURED))


def _level(ladder: dict, ratio: float) -> str:
    for name in ("excellent", "good", "pass"):
        if ratio >= ladder.get(name, float("inf")):
            return name
    return "below"
