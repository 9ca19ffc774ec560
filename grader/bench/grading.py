"""`grader bench grading`: grade copies of the reference and say what a grade costs.

Submissions per hour per GPU and the grader's overhead per submission; with `--save-test-seconds`, the
seconds each test took, which the split into parts packs by (grader.grade.parts).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

import click

from grader.grade import parts, runner, submission
from grader.grade.settings import REPO_ROOT
from grader.report.class_files import RESULT_FILE
from grader.report.time_summary import time_text


def bench_grader(copies: int = 4, jobs: int | None = None, gpus: str | None = None, suite: str = "all",
                 no_perf: bool = False, per_gpu: int | None = None, out: str | None = None,
                 split: bool | None = None, save_test_seconds: bool = False) -> int:
    """Grade `copies` copies of the reference solutions; print submissions per hour per GPU and the
    overhead. Compare `--per-gpu 1` with `--per-gpu 4` (or one GPU with two) for the gain.
    `out` keeps the graded folder (result.json of every copy) instead of deleting it.
    `save_test_seconds`: write how long each test function took (grader.grade.parts splits by it)."""
    work = Path(tempfile.mkdtemp(prefix="grader-bench-"))
    try:
        for index in range(copies):
            folder = work / "submissions" / f"reference{index:02d}"
            folder.mkdir(parents=True)
            for module in submission.MODULES:
                source = REPO_ROOT / "solutions" / f"{module}.py"
                if source.exists():
                    shutil.copy(source, folder / source.name)
        graded = Path(out) if out else work / "out"
        start = time.perf_counter()
        runner.grade_all(work / "submissions", out=graded, jobs=jobs, gpus=gpus, suite=suite, no_perf=no_perf,
                  quiet=True, per_gpu=per_gpu, force=True, split=split)
        elapsed = time.perf_counter() - start
        results = [json.loads(p.read_text()) for p in sorted(graded.glob(f"*/{RESULT_FILE}"))]
        results = [r for r in results if str(r.get("id", "")).startswith("reference")]
        gpu_count = len({r.get("gpu") for r in results if r.get("gpu") is not None})
        click.echo(bench_summary(results, elapsed, gpu_count))
        if save_test_seconds and results and all(r["status"] == "graded" for r in results):
            written = parts.save_test_seconds(results)
            click.echo(f"wrote the seconds of {len(written)} tests ({parts.graded_on(results[0])}) to "
                       f"{parts.TEST_SECONDS_FILE}")
        return 0 if results and all(r["status"] == "graded" for r in results) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


SUMMED_APART = ("tests_s", "child_s", "total_s")   # the summary's own lines; the rest: time_text


def bench_summary(results: list[dict], elapsed: float, gpus: int = 0) -> str:
    count = len(results)
    per_minute = 60.0 * count / elapsed if elapsed > 0 else 0.0
    per_hour_per_gpu = 60.0 * per_minute / gpus if gpus else None
    tests, child, total = ([_figures(r).get(name, 0.0) for r in results] for name in SUMMED_APART)
    split = max((len(r.get("parts") or ()) for r in results), default=0)
    # split, the tests' seconds add up over parts that ran at once: no overhead can be read off them
    overhead = (f"overhead beyond test time: not measured, the tests ran in {split} parts at once "
                "(--whole-suite measures it)" if split else
                f"overhead beyond test time: {mean(total) - mean(tests):.2f} s "
                f"(grader side {mean(total) - mean(child):.2f} s; pytest start-up, imports and worker "
                f"{mean(child) - mean(tests):.2f} s)")
    return (f"graded {count} copies of the reference in {elapsed:.1f} s: {per_minute:.2f} submissions/minute\n"
            f"per submission: {mean(total):.2f} s in all, {mean(child):.2f} s in the checking run "
            f"({'from its first part to its last' if split else 'one'}), {mean(tests):.2f} s inside tests\n"
            f"{overhead}\n"
            + f"statuses: {', '.join(sorted({str(r.get('status')) for r in results}))}"
            + (f"\nthroughput: {per_hour_per_gpu:.1f} submissions per hour per GPU ({gpus} GPU(s), "
               f"{_per_gpu_of(results)} at once on each)" if per_hour_per_gpu is not None else "")
            + (f"\n{time_text(results)}" if time_text(results) else ""))


def _figures(result: dict) -> dict[str, float]:
    """A result's timing figures as {name: number}, those of a nested group named group.figure."""
    return _numbers(result.get("timing"))


def _numbers(group, prefix: str = "") -> dict[str, float]:
    figures = {}
    for name, value in (group.items() if isinstance(group, dict) else ()):
        if isinstance(value, dict):
            figures.update(_numbers(value, f"{prefix}{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            figures[f"{prefix}{name}"] = float(value)
    return figures


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def _per_gpu_of(results: list[dict]) -> str:
    values = sorted({str(r.get("per_gpu")) for r in results if r.get("per_gpu") is not None})
    return "/".join(values) or "?"
