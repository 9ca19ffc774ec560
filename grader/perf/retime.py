"""A graded perf test whose reading loses points, or asks for a retry, is timed once more in a fresh worker.

Some noise lasts as long as the worker: Triton's autotuner, timing its configs while neighbours compile,
may pick a slow config, and the worker keeps that pick for every round of the check. Its rounds then
agree, and no retry flag fires (H200, four references sharing the GPU: bf16 matmul 4096^3 read 0.27,
0.71, 0.89 and 1.01 of cuBLAS across the copies, while 8192^3 read 1.02-1.11 in all four). So, in
grading (the isolated worker, on a GPU), a perf test that passed with a ratio below its check's top
ladder step (`grader.points.Ladder.credit` under 1, as scoring counts it), or whose record says
`retry`, runs once more in a fresh worker from the same inputs (`retime`), and the reading with the
higher ratio is its record. Noise only ever slows a reading, and each reading is bounded by its own wall window
(grader.perf.wall_window), so the better of two gives a forged timer nothing that bound does not.

A retime that fails (an exception, a wrong output, a dead worker) leaves the first reading standing:
the first reading passed, and a retime can never turn a pass into a failure. Its worker is replaced, so
nothing it left there is charged to a later test (grader.memory_safety). Before the first reading's
worker is replaced, it is probed for memory damage as the next test would have probed it: a kernel
that corrupted memory is charged, retime or not. At most one retime per test.

The kept record says `retimed`: why, which reading was kept, and the other reading's ratio, retry flag
and measurements (`other_measured`, its `gpu_alone_s` included), or the retime's error. Its cost is one
more hold of the GPU alone per test that lost points; the GPU lock's totals count both holds.
"""

from __future__ import annotations

RETIMED = "retimed"          # the key of the perf record that says it was timed twice
ERROR_CHARS = 500            # of a failed retime's error, kept for staff


def reason_to_retime(check, perf) -> str | None:
    """Why the perf record `perf` of a passed test of `check` is timed again, or None: it is flagged
    retry, or its ratio earns less than the check's full points."""
    if not isinstance(perf, dict) or check is None or check.ladder is None or RETIMED in perf:
        return None
    if perf.get("retry"):
        reasons = (perf.get("measured") or {}).get("retry_reasons") or []
        return "flagged retry" + (f": {'; '.join(map(str, reasons))}" if reasons else "")
    ratio = perf.get("ratio")
    if _is_ratio(ratio) and check.ladder.credit(ratio) < 1.0:
        return f"ratio {ratio:.4g} is below the top step ({check.ladder.excellent:g})"
    return None


def retime(item, impl, check, reset_inputs, charge_damage) -> None:
    """Time `item` (a perf test that just passed in `impl`'s worker) once more in a fresh worker if its
    record calls for it (`reason_to_retime`), and leave the better reading as its one perf record.

    `reset_inputs()` puts the test's inputs back as they were; `charge_damage(lost)` charges a memory
    fault the probe of the first reading's worker found (grader.memory_safety) to this test (raises)."""
    from grader import memory_safety

    readings = _take_readings(item)
    first = readings[-1] if readings else None     # the record pytest would report: the last
    why = reason_to_retime(check, first)
    if why is None:
        item.user_properties.extend(("perf", reading) for reading in readings)
        return
    fault = memory_safety.probe(impl, collect=False)
    if fault is not None:
        item.user_properties.extend(("perf", reading) for reading in readings)
        charge_damage(fault)
        return
    impl.fresh_worker()
    reset_inputs()
    try:
        item.runtest()
    except (Exception, _outcome_exception()) as error:
        if _is_exit(error):
            raise
        _take_readings(item)
        impl.fresh_worker()        # what the failed retime left in its worker is no later test's
        kept = {**first, RETIMED: {"why": why, "kept": "first",
                                   "error": f"{type(error).__name__}: {error}"[:ERROR_CHARS]}}
    else:
        again = _take_readings(item)
        kept = kept_reading(first, again[-1] if again else None, why)
    item.user_properties.append(("perf", kept))


def kept_reading(first: dict, second: dict | None, why: str) -> dict:
    """The reading with the higher ratio (on a tie, the one not flagged retry; then the first), saying
    it was retimed and holding the other reading's ratio, flag and measurements."""
    if not isinstance(second, dict) or not _is_ratio(second.get("ratio")):
        return {**first, RETIMED: {"why": why, "kept": "first", "error": "the retime recorded no reading"}}
    better = (second["ratio"], not second.get("retry")) > (first["ratio"], not first.get("retry"))
    kept, other = (second, first) if better else (first, second)
    return {**kept, RETIMED: {"why": why, "kept": "second" if better else "first", "other_ratio": other["ratio"],
                              "other_retry": bool(other.get("retry")),
                              "other_measured": other.get("measured") or {}}}


def retime_alone_s(perf) -> float | None:
    """Seconds the retime itself held the GPU alone (the second reading's `gpu_alone_s`), None when the
    record was not retimed or the GPU was not shared."""
    retimed = perf.get(RETIMED) if isinstance(perf, dict) else None
    if not isinstance(retimed, dict):
        return None
    second = perf.get("measured") if retimed.get("kept") == "second" else retimed.get("other_measured")
    seconds = (second or {}).get("gpu_alone_s") if isinstance(second, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else None


def _take_readings(item) -> list[dict]:
    """The perf records the test handed to record_perf, taken out of its properties."""
    readings = [value for key, value in item.user_properties if key == "perf"]
    item.user_properties[:] = [(key, value) for key, value in item.user_properties if key != "perf"]
    return readings


def _is_ratio(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _outcome_exception():
    """pytest.fail and pytest.skip raise a BaseException: a retime's failure like any other."""
    from _pytest.outcomes import OutcomeException

    return OutcomeException


def _is_exit(error) -> bool:
    import pytest

    return isinstance(error, pytest.exit.Exception)
