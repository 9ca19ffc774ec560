"""Print what scripts/measure/gpu_proofs.sh measured: per graded folder, each submission's score and perf ratios,
and per perf test the spread over the copies (alone vs shared, or one submission graded N times).

Usage: python scripts/measure/gpu_proofs_summary.py LABEL=FOLDER [LABEL=FOLDER ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(folder: Path) -> list[dict]:
    results = []
    for path in sorted(folder.glob("*/result.json")):
        try:
            results.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return results


def perf_records(result: dict):
    """(check, test, its perf record or {}) for every test of a perf check in `result`."""
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            if check.get("perf"):
                for test in check["tests"]:
                    yield check, test, test.get("perf") or {}


def perf_tests(result: dict) -> dict[str, tuple[float, bool, str, float | None, bool]]:
    """nodeid -> (ratio, retry, level of its check, seconds it held the GPU alone, whether it was timed
    twice) for every perf test that reported a ratio. A test timed twice (grader.perf.retime) held the
    GPU alone for both readings, and its ratio is the better one's."""
    found = {}
    for check, test, perf in perf_records(result):
        if "ratio" in perf:
            name = test["nodeid"].split("::", 1)[-1]
            found[name] = (float(perf["ratio"]), bool(perf.get("retry")), check.get("level") or "-",
                           alone_s(perf), "retimed" in perf)
    return found


def readings(perf: dict) -> list[dict]:
    """The `measured` of each reading a perf record holds: its own, and a retime's other reading's."""
    other = (perf.get("retimed") or {}).get("other_measured")
    return [perf.get("measured") or {}] + ([other] if isinstance(other, dict) else [])


def alone_s(perf: dict) -> float | None:
    seconds = [m["gpu_alone_s"] for m in readings(perf) if isinstance(m.get("gpu_alone_s"), (int, float))]
    return sum(seconds) if seconds else None


def round_split(rounds: list[dict]) -> dict[str, float]:
    """Seconds of a perf record's rounds (`measured.rounds`) spent timing the submission, the baselines,
    pausing the worker, and on the rest (fresh inputs and their transport)."""
    split = {"submission": 0.0, "baselines": 0.0, "pause": 0.0, "other": 0.0}
    for entry in rounds:
        if "round_ms" in entry:
            split["submission"] += entry["wall_ms"] / 1e3
            split["baselines"] += (entry["baselines_wall_ms"] - entry["pause_ms"]) / 1e3
            split["pause"] += entry["pause_ms"] / 1e3
            split["other"] += (entry["round_ms"] - entry["wall_ms"] - entry["baselines_wall_ms"]) / 1e3
    return split


def alone_by_phase(result: dict) -> str:
    """Where the perf checks' time alone on the GPU went, summed over the checks, and how many rounds."""
    totals, rounds, split = {}, 0, dict.fromkeys(("submission", "baselines", "pause", "other"), 0.0)
    short_of_memory = 0
    for _, _, perf in perf_records(result):
        for measured in readings(perf):
            rounds += len(measured.get("rounds") or [])
            short_of_memory += bool(measured.get("alloc_retries"))
            for phase, seconds in (measured.get("gpu_alone_phases_s") or {}).items():
                totals[phase] = totals.get(phase, 0.0) + seconds
            for part, seconds in round_split(measured.get("rounds") or []).items():
                split[part] += seconds
    parts = ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in totals.items())
    inside = ", ".join(f"{part} {seconds:.1f}" for part, seconds in split.items())
    return (f"alone by phase (s): {parts or '-'}; {rounds} rounds ({inside}); "
            f"{short_of_memory} checks short of GPU memory while timing")


def perf_score(result: dict) -> tuple[float, float]:
    earned = possible = 0.0
    for problem in result.get("problems", []):
        for check in problem["checks"]:
            if check.get("perf"):
                earned += check["earned"]
                possible += check["possible"]
    return earned, possible


def main(arguments: list[str]) -> int:
    groups = {}
    for argument in arguments:
        label, _, folder = argument.partition("=")
        groups[label] = load(Path(folder)) if folder else []
    for label, results in groups.items():
        print(f"== {label}: {len(results)} graded")
        for result in results:
            score = result.get("score", {})
            earned, possible = perf_score(result)
            timing = result.get("timing", {})
            print(f"  {result.get('id')}: {result.get('status')} {score.get('earned')}/{score.get('possible')}"
                  f"  perf {earned:g}/{possible:g}  gpu {result.get('gpu')} per_gpu {result.get('per_gpu')}"
                  f"  child {timing.get('child_s')} s  perf checks alone on the GPU "
                  f"{sum(v[3] or 0.0 for v in perf_tests(result).values()):.1f} s")
            print(f"    {alone_by_phase(result)}")
    print("== perf ratios per test: min / max over the copies of each group (retries marked *, retimes +)")
    names = sorted({name for results in groups.values() for r in results for name in perf_tests(r)})
    for name in names:
        cells = []
        for label, results in groups.items():
            values = [perf_tests(r).get(name) for r in results]
            values = [v for v in values if v is not None]
            if not values:
                cells.append(f"{label} -")
                continue
            ratios = [v[0] for v in values]
            star = ("*" if any(v[1] for v in values) else "") + ("+" if any(v[4] for v in values) else "")
            spread = max(ratios) / min(ratios) - 1 if min(ratios) > 0 else 0.0
            alone = [v[3] for v in values if v[3] is not None]
            held = f" alone {min(alone):.1f}-{max(alone):.1f} s" if alone else ""
            cells.append(f"{label} {min(ratios):.3f}/{max(ratios):.3f} ({spread:.1%}){star}{held}")
        print(f"  {name[:70]:<70} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
