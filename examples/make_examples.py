"""Write three example submissions under examples/submissions/ for `grader grade` to chew on.

- reference/: the solutions as they are now (full marks expected);
- stubs/: what students start from, assignment/ (or the stubs made from solutions/ if assignment/ has
  not been generated yet): zero expected, every check "not implemented";
- partial/: the solutions with three realistic, deterministic bugs and one module not submitted, plus a planted
  conftest.py and a notes file that intake must ignore.

With `--slow`, a fourth, `slow/`: the solutions with matmul's autotuning left one small, unpipelined
tile, correct and several times slower on a GPU, for checking that the speed leaderboard ranks it
below the reference.

Run from anywhere: `python examples/make_examples.py [--out DIR] [--slow]`. The folders are regenerated each
time (they are build outputs, not sources), so they always match the current solutions.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from grader.grade.submission import MODULES  # noqa: E402

MISSING_IN_PARTIAL = "mixed_precision"
# (module, what the bug is, exact text in the solution, what replaces it)
BUGS = [
    ("softmax", "online update forgets to rescale acc when the running max grows",
     "new_acc = acc * rescale.unsqueeze(-1) + ", "new_acc = acc + "),
    # Wrong but in bounds: a bug that reads past the matrix scores differently run to run (whatever
    # memory lies there: NaNs, sometimes a SIGSEGV), and an example must grade the same every time.
    ("matmul", "the K loop stops before the last, partial K-slice: wrong whenever K % BLOCK_K != 0",
     "for k_start in range(0, K, BLOCK_K):", "for k_start in range(0, K - BLOCK_K + 1, BLOCK_K):"),
    ("accounting", "GiB computed as 10**9 bytes (GB/GiB mix-up)",
     '_nonnegative("n_bytes", n_bytes) / 2**30', '_nonnegative("n_bytes", n_bytes) / 10**9'),
]
# The slow example: one 32 x 32 tile per program, K in slices of 64, no pipeline; replaces the tuned list.
SLOW_CONFIGS_BEFORE = "INTERPRETER_CONFIGS = ["
SLOW_CONFIGS = ("HOPPER_CONFIGS = [_config(32, 32, 64, num_stages=1, num_warps=4)]   "
                "# slow on purpose: the leaderboard's slower kernel\n\n")
PLANTED_CONFTEST = '''"""Planted by a hostile submission: if the grader ever collected this, every test would pass."""
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    outcome.get_result().outcome = "passed"
'''


def write_examples(out: Path) -> list[str]:
    """Write the three submissions; returns warnings (bugs whose text no longer occurs)."""
    if out.exists():
        shutil.rmtree(out)
    reference, stubs, partial = out / "reference", out / "stubs", out / "partial" / "assignment"
    for folder in (reference, stubs, partial):
        folder.mkdir(parents=True)
    warnings = []
    for module in MODULES:
        solution = REPO / "solutions" / f"{module}.py"
        if not solution.exists():
            warnings.append(f"solutions/{module}.py does not exist yet; left out of every example")
            continue
        source = solution.read_text()
        (reference / solution.name).write_text(source)
        (stubs / solution.name).write_text(_stub(module, source))
        if module == MISSING_IN_PARTIAL:
            continue
        for bug_module, what, old, new in BUGS:
            if bug_module == module:
                if old not in source:
                    warnings.append(f"partial: bug '{what}' not injected: {module}.py no longer contains {old!r}")
                source = source.replace(old, new)
        (partial / solution.name).write_text(source)
    (out / "partial" / "conftest.py").write_text(PLANTED_CONFTEST)
    (out / "partial" / "NOTES.txt").write_text("I ran out of time on mixed precision.\n")
    return warnings


def write_slow(out: Path) -> list[str]:
    """slow/: the solutions, matmul autotuned over one small tile only (and a leaderboard name)."""
    slow = out / "slow"
    shutil.rmtree(slow, ignore_errors=True)
    slow.mkdir(parents=True)
    for module in MODULES:
        solution = REPO / "solutions" / f"{module}.py"
        if solution.exists():
            (slow / solution.name).write_text(solution.read_text())
    matmul = (slow / "matmul.py").read_text()
    if SLOW_CONFIGS_BEFORE not in matmul:
        return [f"slow: matmul.py no longer contains {SLOW_CONFIGS_BEFORE!r}; its tiles are the reference's"]
    (slow / "matmul.py").write_text(matmul.replace(SLOW_CONFIGS_BEFORE, SLOW_CONFIGS + SLOW_CONFIGS_BEFORE, 1))
    (slow / "leaderboard_name").write_text("small tiles\n")
    return []


def _stub(module: str, source: str) -> str:
    """assignment/<module>.py when generated, else the same stub built in memory from the solution."""
    generated = REPO / "assignment" / f"{module}.py"
    if generated.exists():
        return generated.read_text()
    from grader.handout.stubs import make_stub

    return make_stub(source, f"solutions/{module}.py")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "submissions")
    parser.add_argument("--slow", action="store_true", help="also write slow/, a correct but slow matmul")
    options = parser.parse_args(argv)
    warnings = write_examples(options.out) + (write_slow(options.out) if options.slow else [])
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"wrote reference/, stubs/, partial/{' and slow/' if options.slow else ''} under {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
