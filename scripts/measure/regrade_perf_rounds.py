"""Re-grade the perf rounds a batch recorded under the grader's current rule, offline.

Every perf record keeps its rounds: the worker's claim, the baselines, and the worker's account of the
claim (events, span to a device sync). This reads each `result.json` under the folders given and prints
every perf test whose recorded ratio differs from the ratio the current rule
(`grader.perf.in_worker.claimed_ms`, `grader.perf.record.graded_claims`,
`grader.perf.measure.quickest_ratio`) gives the same rounds. No GPU needed:
it is how a change to the rule is measured on what an H200 batch really recorded.

Usage: PYTHONPATH=. python scripts/measure/regrade_perf_rounds.py RESULTS_DIR [RESULTS_DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from grader.perf import in_worker, measure, record

MOVED = 0.005


def perf_tests(result: dict):
    for problem in result.get("problems", []):
        for check in problem.get("checks", []):
            for test in check.get("tests", []):
                perf = test.get("perf") or {}
                if (perf.get("measured") or {}).get("rounds") and "ratio" in perf:
                    yield test.get("name") or test.get("nodeid", "?"), perf


def rounds_of(measured: dict) -> list[record.Round]:
    """The recorded rounds, each claim made again from the worker's account by the current claim rule
    (`in_worker.claimed_ms`) where the round kept one, as an honest worker would claim it today."""
    rounds = []
    for r in measured["rounds"]:
        account = measure._worker_account({"events_ms": r.get("worker_events_ms"),
                                           "synced_ms": r.get("worker_synced_ms")})
        claim = r["claimed_ms"]
        if "events_ms" in account:
            claim = in_worker.claimed_ms(account["events_ms"], account.get("synced_ms"))
        rounds.append(record.Round(claim, r["baseline_ms"], wall_ms=0.0, account=account))
    return rounds


def regraded_ratio(measured: dict) -> float:
    """The graded baseline's ratio under the current rule, from the recorded rounds and window."""
    name = next(iter(measured["baseline_ms"]))
    floor = (measured.get("wall_window") or {}).get("bound_ms") or 0.0
    rounds = rounds_of(measured)
    return measure.quickest_ratio(rounds, record.graded_claims(rounds), name, floor)


def main(folders: list[str]) -> int:
    if not folders:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    for folder in folders:
        files = sorted(Path(folder).glob("*/result.json"))
        if not files:
            print(f"{folder}: no */result.json here", file=sys.stderr)
            return 2
        tests = moved = 0
        for path in files:
            for name, perf in perf_tests(json.loads(path.read_text())):
                tests += 1
                recorded, now = perf["ratio"], regraded_ratio(perf["measured"])
                if abs(now - recorded) > MOVED:
                    moved += 1
                    print(f"  {path.parent.name} {name}: {recorded:.4f} -> {now:.4f}")
        print(f"{folder}: {moved} of {tests} perf tests moved by more than {MOVED}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
