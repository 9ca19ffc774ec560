"""One root cause, one charge, on this machine (a GPU where there is one): each variant of the reference
with exactly one mistake is graded by both suites of its problem (worker isolated, as when graded; perf
checks left out and not counted), next to the reference, and the table says which checks each lost.

Usage: PYTHONPATH=. python scripts/measure/one_cause.py [--out DIR] [--jobs N] [VARIANT ...]
The variants are tests/broken_variants.py's and tests/scan_variants/*.py (appended to the reference).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))

from broken_variants import VARIANTS, build_variant  # noqa: E402

from grader import results  # noqa: E402
from grader.points import load_points  # noqa: E402
from grader.scoring import score_checks  # noqa: E402

DEFAULT = ("fa_tf32_products", "matmul_tf32_products", "fa_tf32_sized", "matmul_tf32_sized", "fa_float32_output",
           "fa_pytorch_default_device", "matmul_autotune_three", "self_named_softmax", "main_block_demo")
SCAN_VARIANTS = REPO / "tests" / "scan_variants"


def build(name: str, root: Path) -> tuple[str, Path]:
    """(problem, submission folder) of a broken variant, a scan variant or `reference-<problem>`."""
    if name.startswith("reference-"):
        problem = name.removeprefix("reference-")
        folder = root / name
        folder.mkdir(parents=True)
        (folder / f"{problem}.py").write_text((REPO / "solutions" / f"{problem}.py").read_text())
        return problem, folder
    if name in VARIANTS:
        return VARIANTS[name].module, build_variant(name, root)
    text = (SCAN_VARIANTS / f"{name}.py").read_text()
    problem = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# target:"))
    folder = root / name
    folder.mkdir(parents=True)
    (folder / f"{problem}.py").write_text((REPO / "solutions" / f"{problem}.py").read_text() + "\n\n" + text)
    return problem, folder


def launch(problem: str, folder: Path, stream: Path) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("GRADER_", "PYTEST_"))}
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", f"tests_public/test_{problem}.py",
               f"tests_hidden/test_{problem}_hidden.py", "--impl", str(folder), "--isolate", "-q", "-m",
               "not perf", "-p", "no:cacheprovider", f"--results-json={stream}"]
    return subprocess.Popen(command, cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def checks_of(problem: str, stream: Path) -> dict[str, tuple[float, float, bool]]:
    read = results.read_stream(stream.read_text() if stream.exists() else "")
    if read.results is None:
        return {}
    scored = next(p for p in score_checks(load_points(), read.results.tests) if p.problem_id == problem)
    return {c.check.id: (c.earned, c.check.points, c.not_run_here) for c in scored.checks if not c.check.perf}


def grade_all(names: list[str], root: Path, jobs: int) -> dict[str, tuple[str, dict]]:
    pending = [(name, *build(name, root)) for name in names]
    running, graded = [], {}
    while pending or running:
        while pending and len(running) < jobs:
            name, problem, folder = pending.pop(0)
            stream = root / f"{name}.jsonl"
            running.append((name, problem, stream, launch(problem, folder, stream)))
        name, problem, stream, process = running.pop(0)
        output, _ = process.communicate()
        graded[name] = (problem, checks_of(problem, stream))
        if not graded[name][1]:
            print(f"{name}: no results\n{output[-3000:]}", file=sys.stderr)
        print(table(graded, [name]).splitlines()[-1], flush=True)   # a row as each finishes: a cut-off run keeps them
    return graded


def table(graded: dict[str, tuple[str, dict]], names: list[str]) -> str:
    rows = ["| variant | problem | points | reference | checks lost | not run here |", "|---|---|---|---|---|---|"]
    for name in names:
        problem, checks = graded[name]
        reference = graded.get(f"reference-{problem}", (problem, {}))[1]
        earned = sum(e for e, _, _ in checks.values())
        possible = sum(p for _, p, _ in checks.values())
        lost = [f"{c} (-{p - e:g})" for c, (e, p, here) in sorted(checks.items()) if not here and e < p]
        absent = [c for c, (_, _, here) in sorted(checks.items()) if here]
        rows.append(f"| {name} | {problem} | {earned:.2f}/{possible:g} | "
                    f"{sum(e for e, _, _ in reference.values()):.2f} | {', '.join(lost) or 'none'} | "
                    f"{', '.join(absent) or '-'} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("variants", nargs="*", default=list(DEFAULT))
    parser.add_argument("--out", default=None, help="keep the submissions and result streams here")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    args = parser.parse_args()
    root = Path(args.out or tempfile.mkdtemp(prefix="one-cause-"))
    root.mkdir(parents=True, exist_ok=True)
    problems = sorted({build(name, Path(tempfile.mkdtemp()))[0] for name in args.variants})
    names = [f"reference-{problem}" for problem in problems] + list(args.variants)
    print(table(grade_all(names, root, args.jobs), names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
