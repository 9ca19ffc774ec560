"""Before a batch grades anyone: one known-good checking run through the exact launch grading uses.

The runner starts the real checker (the same interpreter, sandbox, environment, GPU pinning and
suites) with `--collect-only` on an empty submission: it imports the grader, pytest, torch and every
staff suite, and writes its results header. If that fails, every submission would fail the same way
for reasons that are not theirs, so the batch stops here with the cause and how to fix it, and grades
nobody. The header it wrote also tells the batch which tests cannot run on this machine (GPU-only on
a CPU box): they are out of every submission's max, whatever happens to its run.
"""

from __future__ import annotations

from dataclasses import dataclass

from grader.errors import GraderError

# (text in the failed run's reason or log, what it means and how to fix it), first match wins.
DIAGNOSES = (
    ("execvp", "the interpreter is not visible inside the sandbox: the sandbox binds back what sys.path "
               "names; run `grader doctor`, and meanwhile grade with --no-sandbox"),
    ("No permissions to create new namespace", "this machine forbids user namespaces, which bubblewrap "
     "needs: `sysctl -w kernel.unprivileged_userns_clone=1` (or user.max_user_namespaces > 0), or grade "
     "with --no-sandbox"),
    ("setting up uid map", "bubblewrap cannot map the sandbox's user here (user namespaces restricted): "
     "allow them, or grade with --no-sandbox"),
    ("Operation not permitted", "bubblewrap is not allowed to build its sandbox here (a locked-down "
     "container?): allow user namespaces, or grade with --no-sandbox"),
    ("No module named", "a package grading needs is not importable by this interpreter: run `make install` "
     "with the same python"),
    ("ERROR collecting", "a staff test suite does not import: run `make test-suites` and fix the suite"),
)


@dataclass(frozen=True)
class Preflight:
    device: str                        # "cuda" or "cpu", as the checker saw it
    not_run_here: frozenset[str]       # nodeids that cannot run on this machine
    collected_tests: tuple[tuple[str, str], ...] | None = None   # (nodeid, check) of every test; None: unknown


def verdict(outcome, *, gpu_expected: bool, sandboxed: bool, interpreter: str) -> Preflight:
    """What the preflight run (a runner Outcome) found; raises GraderError with cause and fix."""
    header = outcome.read.results
    where = f"{interpreter}, {'inside bubblewrap' if sandboxed else 'without a sandbox'}"
    if outcome.status != "graded" or header is None:
        detail = outcome.reason or f"exit code {outcome.exit_code}"
        raise GraderError(f"preflight failed: the checking run cannot start here ({where}): {detail}. "
                          f"Fix: {diagnose(detail + chr(10) + outcome.log)}. Nobody was graded.")
    device = header.device
    if gpu_expected and device != "cuda":
        raise GraderError(f"preflight failed: a GPU was assigned but the checking run saw none ({where}; "
                          f"it reported {header.environment.get('device', device)!r}). Fix: check "
                          "that torch sees CUDA (`grader doctor`) and the /dev/nvidia* nodes exist, or grade on "
                          "the CPU with --gpus ''. Nobody was graded.")
    collected = tuple(header.collected_tests) if header.collected_tests is not None else None
    return Preflight(device, frozenset(header.not_run_here), collected)


def diagnose(text: str) -> str:
    for needle, advice in DIAGNOSES:
        if needle in text:
            return advice
    return "read the log lines above, run `grader doctor`, or grade with --no-sandbox to tell a sandbox " \
           "problem from an environment problem"

