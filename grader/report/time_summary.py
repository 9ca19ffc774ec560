"""Where a batch's grading time went, summed over its results' `timing` (grader.report.model.time_breakdown).

The class page and `grader bench grading` print the same rows, so a TA and staff read one account.
"""

from __future__ import annotations

from dataclasses import dataclass

# (field of result.json's timing, what it is), in the order they print
FIELDS = (
    ("total_s", "wall time per submission, staging and reports included"),
    ("child_s", "its checking run(s), from the first part's start to the last part's end"),
    ("correctness_s", "correctness tests (summed over parts, which run at once)"),
    ("perf_s", "perf checks, their waits and compiles included"),
    ("perf_alone_s", "perf checks holding the GPU alone (every other submission on it waits)"),
    ("retime_alone_s", "of which: perf tests timed again in a fresh worker after losing points"),
    ("compile_s", "Triton compiles, during which the GPU went to the others"),
    ("lock_wait_s", "waits for the GPU while others held it alone"),
    ("seat_wait_s", "waits for a seat on the GPU before a part could start"),
)


@dataclass(frozen=True)
class TimeRow:
    field: str
    meaning: str
    mean_s: float
    total_s: float
    submissions: int             # how many results carry this field


def time_rows(results: list[dict]) -> list[TimeRow]:
    """One row per timing field any result has: its mean per submission and its sum over the batch."""
    rows = []
    for name, meaning in FIELDS:
        values = [float(r["timing"][name]) for r in results
                  if isinstance(r.get("timing"), dict) and isinstance(r["timing"].get(name), (int, float))]
        if values:
            rows.append(TimeRow(name, meaning, round(sum(values) / len(values), 1), round(sum(values), 1),
                                len(values)))
    return rows


def compiles_per_submission(results: list[dict]) -> float | None:
    return _mean_count(results, "compiles")


def retimes_per_submission(results: list[dict]) -> float | None:
    """Perf tests timed twice (grader.perf.retime) per submission; None when none was."""
    return _mean_count(results, "retimes", missing=0) or None


def _mean_count(results: list[dict], name: str, missing: int | None = None) -> float | None:
    """The mean of the count `name` in the results' timing (`missing` where a result lacks it), or None."""
    counts = [r["timing"].get(name, missing) for r in results if isinstance(r.get("timing"), dict)]
    counts = [count for count in counts if isinstance(count, int)]
    return round(sum(counts) / len(counts), 1) if counts else None


def time_text(results: list[dict]) -> str:
    """The rows as plain text, for the terminal."""
    lines = [f"  {row.field:<14} {row.mean_s:>8.1f} s mean  {row.total_s:>9.1f} s in all  {row.meaning}"
             for row in time_rows(results)]
    compiles = compiles_per_submission(results)
    if compiles is not None:
        lines.append(f"  {'compiles':<14} {compiles:>8.1f} per submission")
    retimes = retimes_per_submission(results)
    if retimes is not None:
        lines.append(f"  {'retimes':<14} {retimes:>8.1f} per submission (perf tests timed again in a fresh worker)")
    return "where the time went:\n" + "\n".join(lines) if lines else ""
