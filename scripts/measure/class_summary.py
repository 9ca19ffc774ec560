"""What a graded class folder says, for scripts/measure/class_proof.sh: one line per submission (status,
marks, wall time, perf points lost, the perf ratios' range), the batch's rate per GPU and where the
time went.

Usage: python scripts/measure/class_summary.py OUT [LOG]   (LOG: the grade's output with `time`'s lines)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from grader.report.class_files import load_results
from grader.report.time_summary import time_text


def perf_line(result: dict) -> str:
    lost, ratios = [], {}
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            if check["perf"] and check["earned"] < check["possible"]:
                lost.append(f"{check['id']} -{check['possible'] - check['earned']:.2f}")
            for test in check["tests"]:
                ratio = (test.get("perf") or {}).get("ratio")
                if ratio is not None:
                    ratios.setdefault(check["id"], []).append(ratio)
    spread = ", ".join(f"{name.replace('.perf.', ' ')} {min(v):.3f}-{max(v):.3f}" for name, v in sorted(ratios.items()))
    return f"lost: {'; '.join(lost) or 'none'} | ratios: {spread or '-'}"


def main(out: str, log: str | None = None) -> int:
    results = load_results(Path(out))
    for result in sorted(results, key=lambda r: r["id"]):
        score, timing = result["score"], result.get("timing", {})
        print(f"{result['id']:<28} {result['status']:<13} {score['earned']:7.2f}/{score['possible']:<4g} "
              f"{timing.get('total_s', 0):6.0f} s  {perf_line(result)}")
    wall = None
    if log and Path(log).is_file():
        found = re.search(r"real\s+(\d+)m([\d.]+)s", Path(log).read_text())
        wall = 60 * int(found.group(1)) + float(found.group(2)) if found else None
    graded = [r for r in results if r["status"] == "graded"]
    if wall:
        print(f"graded {len(graded)} of {len(results)} in {wall:.0f} s: {3600 * len(graded) / wall:.1f} per hour "
              "on one GPU (the batch's wall time, its start-up and the last submission's tail included)")
    print(time_text(graded))
    print(json.dumps({"graded": len(graded), "wall_s": wall}))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
