"""`grader grade --slurm`: the class graded as one Slurm array job, then a report job.

The submitting side only: work out which submissions need grading (missing or changed, as a local
run would), write a plan into OUT/.slurm/, submit one array job (one task per chunk of students: one,
or --per-gpu N of them graded at once, each task with one GPU when the cluster has GPUs) and a job
that writes the class files once the array has ended (`--dependency=afterany`), then watch the
results land on disk with the local run's progress line. What each task runs is
grader/grade/slurm_task.py. Slurm does the scheduling; this module only calls `sbatch`, `squeue` and
`scontrol` (never `sacct`: without slurmdbd it is disabled).

The checkout, the Python environment and OUT must be on a filesystem every node shares.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import click

from grader.errors import BadSubmission, GraderError
from grader.grade import submission
from grader.grade.checker_tree import build_checker_tree, grade_key
from grader.grade.progress import clock_text, eta_from_rate
from grader.grade.settings import DEFAULT_TIMEOUT, REPO_ROOT, Settings
from grader.points import POINTS_DIR, load_points
from grader.report.atomic import write_atomic
from grader.report.class_files import RESULT_FILE, write_class_files
from grader.report.model import HARNESS_ERROR, points_text

PLAN_DIR = ".slurm"                 # under OUT: plans, task scripts and Slurm's logs
MAX_ARRAY_TASKS = 1000              # Slurm's default MaxArraySize is 1001 (indices 0-1000)
ARRAY_JOB_NAME = "grader-grade"
REPORT_JOB_NAME = "grader-report"
GPU_REQUEST = "--gres=gpu:1"
SETUP_MINUTES = 10                  # a task's time limit beyond its budgets: start-up, checker tree
# A user argument that already says what GPUs a task gets: then we add no request of our own.
GPU_OPTIONS = ("--gres", "--gpus", "--gpus-per-task", "--gpus-per-node", "-G")
CPU_OPTIONS = ("--cpus-per-task", "-c", "--cpus-per-gpu")
WAITING_STATES = ("PENDING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED")


@dataclass
class Submitted:
    array_job: str
    report_job: str
    chunks: list[list[str]]


# --- entry point -----------------------------------------------------------------------------------


def grade_on_slurm(submissions, out="reports", suite="all", timeout=None, only=(), force=False,
                   no_sandbox=False, no_perf=False, worker_memory=None, sbatch_args=(), array_parallelism=None,
                   no_wait=False, tests_root=None, points_dir=None, quiet=False, poll_s=2.0,
                   **local_options) -> int:
    """The `grader grade --slurm` command; returns the exit status. Options of a local run that say
    how to share this machine (--gpus, --jobs, ...) are refused when given: Slurm places the tasks.
    --split / --whole-suite (`split`) goes to every task: it says how a task uses its own GPU; so does
    --per-gpu N (`per_gpu`): each task then grades N students at once on its GPU (default 1)."""
    split_by_problem = local_options.pop("split", None)
    per_gpu = local_options.pop("per_gpu", None)
    per_gpu = 1 if per_gpu is None else per_gpu
    refuse_bad_options(local_options, per_gpu, array_parallelism, timeout, worker_memory)
    say = (lambda line: None) if quiet else (lambda line: click.echo(line, err=True))
    out = Path(out).resolve()
    options = {"submissions": str(Path(submissions).resolve()), "out": str(out), "suite": suite,
               "timeout": timeout, "force": force, "no_sandbox": no_sandbox, "no_perf": no_perf,
               "worker_memory": worker_memory, "split": split_by_problem, "per_gpu": per_gpu,
               "tests_root": str(Path(tests_root or REPO_ROOT).resolve()),
               "points_dir": str(Path(points_dir or POINTS_DIR).resolve())}
    points = load_points(Path(options["points_dir"]))
    earlier = earlier_jobs(out / PLAN_DIR)
    if earlier:
        raise GraderError(f"jobs {', '.join(earlier)} of an earlier --slurm run into {out} are still queued or "
                          "running: wait for them (squeue) or cancel them (scancel), then run this again")
    out.mkdir(parents=True, exist_ok=True)
    students = students_to_grade(options, tuple(only), say)
    if not students:
        say("nothing to grade: every result on disk matches its submission")
        say(write_class_files(out, points))
        return 0
    gpu = wants_gpu(sbatch_args)
    chunks = split(students, MAX_ARRAY_TASKS, at_least=per_gpu)
    if per_gpu > 1 and not any(arg.split("=", 1)[0] in CPU_OPTIONS for arg in sbatch_args):
        say(f"note: each task grades {per_gpu} submissions at once with the cores Slurm gives it by default "
            "(often one): --sbatch-arg=--cpus-per-task=C gives it C, which their compiles need")
    before = {student: _stamp(out / student) for student in students}
    class_files_before = _stamp(out, "grades.csv")
    sbatch_args = list(sbatch_args) + time_limit(sbatch_args, timeout or DEFAULT_TIMEOUT,
                                                 max(map(len, chunks)))
    submitted = submit(out, options | {"gpus": None if gpu else ""}, chunks, sbatch_args, array_parallelism, gpu)
    say(f"submitted array job {submitted.array_job} ({len(chunks)} tasks, {len(students)} submissions"
        f"{', one GPU each' if gpu else ''}) and report job {submitted.report_job}")
    if no_wait:
        say(f"not waiting: watch with `squeue -j {submitted.array_job},{submitted.report_job}`; "
            f"results land in {out}; run the same command again to grade what is still missing")
        return 0
    return wait_and_report(submitted, out, before, class_files_before, say, poll_s)


def refuse_bad_options(local_options: dict, per_gpu: int, array_parallelism, timeout, worker_memory) -> None:
    """GraderError for an option that makes no sense with --slurm, or a missing Slurm client command."""
    for name, value in local_options.items():
        if value not in (None, False, ()):
            raise GraderError(f"--{name.replace('_', '-')} does not apply with --slurm: Slurm gives each "
                              "task its GPU (pass --sbatch-arg for other resources)")
    if per_gpu < 1:
        raise GraderError(f"--per-gpu must be at least 1, got {per_gpu}")
    if array_parallelism is not None and array_parallelism < 1:
        raise GraderError(f"--array-parallelism must be at least 1, got {array_parallelism}")
    if timeout is not None and timeout <= 0:
        raise GraderError(f"--timeout must be a positive number of seconds, got {timeout:g}")
    if worker_memory is not None and worker_memory < 0:
        raise GraderError(f"--worker-memory must be a number of megabytes (0: no cap), got {worker_memory}")
    for command in ("sbatch", "squeue", "scontrol"):
        if shutil.which(command) is None:
            raise GraderError(f"{command} not found: --slurm needs Slurm's client commands on this machine")


def wait_and_report(submitted, out: Path, before: dict, class_files_before, say, poll_s: float) -> int:
    """Follow the jobs to their end; the exit status: 0 when every submission has a new result and the
    class files were written, 130 on Ctrl-C (the jobs go on), else 1 with what is missing."""
    try:
        missing = wait(submitted, out, before, say, poll_s)
    except KeyboardInterrupt:
        say(f"stopped waiting; the jobs go on (scancel {submitted.array_job} {submitted.report_job} stops them)")
        return 130
    if _stamp(out, "grades.csv") == class_files_before:
        say(f"the report job wrote no class files (its log is in {out / PLAN_DIR / 'logs'}); "
            f"`grader report {out}` writes them")
        return 1
    if missing:
        say(f"{len(missing)} submission(s) got no result (task cancelled, killed or failed; its log is in "
            f"{out / PLAN_DIR / 'logs'}): {', '.join(missing)}. Run the same command again to grade them.")
        return 1
    return 0


# --- what to grade ---------------------------------------------------------------------------------


def students_to_grade(options: dict, only: tuple[str, ...], say) -> list[str]:
    """Students whose result is missing or stale, by the resume key a local run uses."""
    sources, skipped = submission.find_submissions(Path(options["submissions"]))
    for line in skipped:
        say(f"skipped {line}")
    if only:
        for student in sorted(set(only) - {s.id for s in sources}):
            say(f"--only {student}: no such submission")
        sources = [s for s in sources if s.id in only]
    if options["force"]:
        return [s.id for s in sources]
    settings = Settings(submissions=Path(options["submissions"]), out=Path(options["out"]), suite=options["suite"],
                        tests_root=Path(options["tests_root"]), points_dir=Path(options["points_dir"]),
                        perf=not options["no_perf"], worker_memory_option=options["worker_memory"])
    stale = []
    with tempfile.TemporaryDirectory(prefix="grader-slurm-") as scratch:
        fingerprint = build_checker_tree(settings, Path(scratch) / "checker")
        for source in sources:
            previous = _previous(Path(options["out"]) / source.id)
            try:
                staged = submission.stage(source, Path(scratch) / "runs" / source.id)
            except BadSubmission:
                if not previous or previous.get("status") != "not_gradable":
                    stale.append(source.id)
                continue
            if not previous or previous.get("status") == HARNESS_ERROR \
                    or previous.get("grade_key") != grade_key(staged.content_hash, settings, fingerprint):
                stale.append(source.id)
    return stale


def split(students: list[str], most: int, at_least: int = 1) -> list[list[str]]:
    """Chunks of `at_least` students (the last may be smaller), or as many more per chunk as keep the
    array within `most` tasks."""
    size = max(at_least, -(-len(students) // most))
    return [students[start:start + size] for start in range(0, len(students), size)]


def wants_gpu(sbatch_args, run=subprocess.run) -> bool:
    """Ask for one GPU per task when any node has GPUs (`scontrol show nodes` lists gres/gpu),
    unless the TA's own sbatch arguments already say what GPUs a task gets."""
    if any(arg.split("=", 1)[0] in GPU_OPTIONS for arg in sbatch_args):
        return False
    nodes = _query(["scontrol", "show", "nodes", "--oneliner"], "scontrol show nodes", run)
    return any(field.startswith("Gres=") and "gpu" in field for field in nodes.split())


def _query(argv: list[str], what: str, run) -> str:
    """The output of a Slurm query that grading cannot go on without; GraderError naming it otherwise."""
    try:
        done = run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GraderError(f"{what} failed: {error}") from None
    if done.returncode != 0:
        raise GraderError(f"{what} failed: {done.stderr.strip()[-300:]}")
    return done.stdout


def time_limit(sbatch_args, budget_s: float, per_task: int) -> list[str]:
    """`--time` for the tasks, from the per-submission budget, unless the TA gave one: a limit close
    to the real need lets Slurm backfill, and partitions' defaults may be shorter than grading."""
    if any(arg.split("=", 1)[0] in ("--time", "-t") for arg in sbatch_args):
        return []
    return [f"--time={int(-(-budget_s * per_task // 60)) + SETUP_MINUTES}"]


# --- submitting ------------------------------------------------------------------------------------


def submit(out: Path, options: dict, chunks: list[list[str]], sbatch_args: list[str],
           parallelism: int | None, gpu: bool, run=subprocess.run) -> Submitted:
    folder = out / PLAN_DIR
    (folder / "logs").mkdir(parents=True, exist_ok=True)
    name = f"plan-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    plan = folder / f"{name}.json"
    write_atomic(plan, json.dumps({"options": options, "chunks": chunks}, indent=1))
    task_script = _write_script(folder / f"{name}-task.sh", ["task", str(plan)])
    report_script = _write_script(folder / f"{name}-report.sh", ["report", str(plan)])
    array_job = sbatch(array_argv(task_script, folder, len(chunks), sbatch_args, parallelism, gpu), run)
    report_job = sbatch(report_argv(report_script, folder, array_job, sbatch_args), run)
    return Submitted(array_job, report_job, chunks)


def array_argv(script: Path, folder: Path, tasks: int, sbatch_args: list[str], parallelism: int | None,
               gpu: bool) -> list[str]:
    array = f"0-{tasks - 1}" + (f"%{parallelism}" if parallelism else "")
    return ["sbatch", "--parsable", f"--job-name={ARRAY_JOB_NAME}", f"--array={array}",
            f"--output={folder / 'logs' / '%A_%a.log'}", f"--chdir={folder}",
            *([GPU_REQUEST] if gpu else []), *sbatch_args, str(script)]


def report_argv(script: Path, folder: Path, array_job: str, sbatch_args: list[str]) -> list[str]:
    """The class files job: runs once every task has ended, however it ended; asks for no GPU."""
    own = [arg for arg in sbatch_args if arg.split("=", 1)[0] not in GPU_OPTIONS]
    return ["sbatch", "--parsable", f"--job-name={REPORT_JOB_NAME}", f"--dependency=afterany:{array_job}",
            f"--output={folder / 'logs' / '%j-report.log'}", f"--chdir={folder}", *own, str(script)]


def sbatch(argv: list[str], run=subprocess.run) -> str:
    """Submit; return the job id (`--parsable` prints "id" or "id;cluster")."""
    try:
        done = run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise GraderError(f"sbatch failed: {error}") from None
    if done.returncode != 0 or not done.stdout.strip():
        raise GraderError(f"sbatch refused the job: {(done.stderr or done.stdout).strip()[-500:]}")
    return done.stdout.strip().split(";")[0]


def _write_script(path: Path, arguments: list[str]) -> Path:
    """The batch script: this very Python and checkout (both on the shared filesystem)."""
    quoted = " ".join(_quote(arg) for arg in arguments)
    write_atomic(path, "#!/bin/bash\n"
                       f"export PYTHONPATH={_quote(str(REPO_ROOT))}${{PYTHONPATH:+:$PYTHONPATH}}\n"
                       f"exec {_quote(sys.executable)} -m grader.grade.slurm_task {quoted}\n")
    path.chmod(0o755)
    return path


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


# --- waiting ---------------------------------------------------------------------------------------


def wait(submitted: Submitted, out: Path, before: dict, say, poll_s: float,
         run=subprocess.run) -> list[str]:
    """Print a progress line per result that lands, until both jobs have left the queue; return the
    students that got no new result."""
    owner = {index: chunk for index, chunk in enumerate(submitted.chunks)}
    total = sum(len(chunk) for chunk in submitted.chunks)
    done: set[str] = set()
    began = time.monotonic()
    while True:
        states = queue_states([submitted.array_job, submitted.report_job], run)
        now = time.monotonic()
        running = {index for (job, index), state in states.items()
                   if job == submitted.array_job and index is not None and state not in WAITING_STATES}
        for student in sorted(set(before) - done):
            if _stamp(out / student) == before[student]:
                continue
            result = _previous(out / student)
            if result is None:
                continue
            done.add(student)
            score = result["score"]
            word = f"{result['status']} {points_text(score['earned'])}/{points_text(score['possible'])}"
            names = [s for index in sorted(running) for s in owner.get(index, []) if s not in done]
            eta = eta_from_rate(len(done), now - began, total - len(done))
            say(f"[{len(done)}/{total}] {student}: {word} | running: {', '.join(names) or '-'} | "
                f"ETA {clock_text(eta) if eta is not None else '?'}")
        if not states:
            break
        time.sleep(poll_s)
    missing = sorted(set(before) - done)
    say(f"array job {submitted.array_job} and report job {submitted.report_job} have ended; "
        f"class files in {out}")
    return missing


def queue_states(jobs: list[str], run=subprocess.run) -> dict[tuple[str, int | None], str]:
    """(job id, array index or None) -> state, for what of `jobs` is still queued or running."""
    try:
        listing = run(["squeue", "--noheader", "--array", "--format=%F %K %T", f"--jobs={','.join(jobs)}"],
                      capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return {(jobs[0], None): "UNKNOWN"}          # ask again on the next round
    if listing.returncode != 0:
        if "Invalid job id" in listing.stderr:       # long finished: slurmctld has forgotten them
            return {}
        return {(jobs[0], None): "UNKNOWN"}
    return parse_queue(listing.stdout)


def earlier_jobs(folder: Path, run=subprocess.run) -> list[str]:
    """Our jobs still in the queue that write into this output folder (their working directory is its
    plan folder): submitting again now would grade their students twice."""
    listing = _query(["squeue", "--noheader", f"--name={ARRAY_JOB_NAME},{REPORT_JOB_NAME}", "--format=%A %Z"],
                     "squeue", run)
    jobs = []
    for line in listing.splitlines():
        job, _, workdir = line.partition(" ")
        if workdir.strip() and Path(workdir.strip()) == folder and job not in jobs:
            jobs.append(job)
    return jobs


def parse_queue(text: str) -> dict[tuple[str, int | None], str]:
    """Lines of `squeue --array --format='%F %K %T'` (array job id, task index or N/A, state)."""
    states = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3:
            continue
        job, index, state = parts
        states[(job, int(index) if index.isdigit() else None)] = state
    return states


def _stamp(folder: Path, name: str = RESULT_FILE):
    try:
        status = (folder / name).stat()
    except OSError:
        return None
    return status.st_mtime_ns, status.st_size, status.st_ino


def _previous(folder: Path) -> dict | None:
    try:
        return json.loads((folder / RESULT_FILE).read_text())
    except (OSError, ValueError):
        return None
