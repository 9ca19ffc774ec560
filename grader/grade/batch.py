"""A batch of submissions: each checked in its own process tree, in parallel, resumably.

For each submission: stage its allow-listed files (grader.grade.submission), launch the checking pytest run
(argv from grader.grade.sandbox; on a GPU its parts, grader.grade.parts, each once it has a seat of the
GPU, grader.grade.seats) in a new session with its own scratch, read its results from a pipe only the
checker holds, kill the whole group on the wall-clock budget, score what reported (grader.scoring) and
write that student's outputs at once. The class files (grades.csv, index.html) are rebuilt from every
result.json on disk at the end, and on Ctrl-C. A submission never stops the batch: whatever goes wrong
becomes a status (graded, timeout, crashed, not_gradable) with a reason and the log's tail. Before
the batch a preflight (grader.grade.preflight) runs the same launch once: a harness that cannot work
here grades nobody. A run that fails for the harness's own reasons is a harness_error: not a grade,
regraded next time, listed at the end, and the batch exits 1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

import click

import grader
from grader import disposable
from grader.course import pseudonyms
from grader.errors import BadSubmission, GraderError
from grader.grade import cgroups, containment, gpu_sharing, parts, preflight, sandbox, seats, sizing, submission
from grader.grade.checker_tree import build_checker_tree, grade_key, remove_tree
from grader.grade.checking_run import (
    CHECKER_LAUNCHER,
    SELECTION_FLAG,
    TASKS_ENV,
    Outcome,
    gpu_name_of,
    importable,
    kill_group,
    selection_file,
    warm_checker_tree,
    watch,
)
from grader.grade.progress import clock_text, eta_from_rate
from grader.grade.settings import REPO_ROOT, SUITE_DIRS, Settings
from grader.perf import cores as timing_cores
from grader.perf import gpu_lock
from grader.points import load_points
from grader.report.class_files import RESULT_FILE, load_results, write_class_files
from grader.report.model import (
    HARNESS_ERROR,
    build_result,
    maximum,
    not_gradable_result,
    points_text,
    unscored_result,
)
from grader.report.student_files import write_submission_outputs
from grader.worker import process as worker


class Batch:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.points = load_points(settings.points_dir)
        self.scratch_root = Path(tempfile.mkdtemp(prefix="grader-"))
        self.checker_root = self.scratch_root / "checker"     # built on first use: see `fingerprint`
        self.tables = {None: self.points}
        self.metadata = submission.read_metadata(settings.submissions)
        # (student, part label or ""): the process and perf_counter() at its launch
        self.running: dict[tuple[str, str], tuple[subprocess.Popen, float]] = {}
        self.durations: list[float] = []             # wall time of each submission's run(s) that finished
        self.seat_waits: dict[str, float] = {}       # per submission: seconds its parts waited for a seat
        self.started: set[str] = set()               # submissions whose first run has been announced
        self.lock = threading.Lock()
        self.bwrap = sandbox.find_bwrap() if settings.sandbox else None
        self.python_paths = sandbox.python_paths(exclude=[settings.submissions.resolve(), settings.out.resolve()])
        self.not_run_here: frozenset[str] = frozenset()   # from the preflight: never in anyone's max
        self.batch_maximum: float | None = None
        # Without bubblewrap, pid and mount namespaces still hold each run (grader.grade.containment).
        self.unshare = None if self.bwrap else containment.find_unshare()
        if self.unshare and not containment.works(self.unshare):
            self.unshare = None
        self.cgroups = cgroups.places()          # one per checking run: its memory and process bounds
        self.stopping = threading.Event()        # set on Ctrl-C: runs killed now are not graded
        self.alone_again: list = []              # sources whose GPU memory or time ran out while shared
        self.parts: list[parts.Part] = []        # from the preflight when splitting: [] grades whole suites
        self.seats: seats.Seats | None = None    # while a split batch runs: the parts at once on each GPU
        # Every run on a GPU gets the cores left after each GPU's timing cores (grader.perf.cores).
        self.compile_cores, self.kept_cores = timing_cores.plan(list(os.sched_getaffinity(0)), list(settings.slots))
        self.runs_at_once = 1                    # checking runs at once, which share those cores' threads

    @functools.cached_property
    def fingerprint(self) -> str:
        """The checker tree's fingerprint, part of every grade key; the tree is built (and its suites
        collected once, seconds on a CPU) the first time it is asked for."""
        fingerprint = build_checker_tree(self.settings, self.checker_root)
        warm_checker_tree(self.checker_root, SUITE_DIRS[self.settings.suite])
        return fingerprint

    def run(self) -> int:
        settings = self.settings
        try:
            sources = self.intake()
        except GraderError:
            remove_tree(self.scratch_root)
            raise
        settings.out.mkdir(parents=True, exist_ok=True)
        self.announce(sources)
        if settings.sandbox and not self.bwrap:
            self.say("bubblewrap (bwrap) not found: grading WITHOUT a sandbox "
                     "(apt-get install bubblewrap, or pass --no-sandbox to silence this)")
        if self.cgroups.memory is None:
            self.say("no cgroup can be made here: each worker's memory cap counts its private memory only "
                     "(shared and memfd pages are not bounded); `grader doctor` says how to fix it")
        if not self.bwrap and not self.unshare:
            self.say("unshare cannot create pid and mount namespaces here: processes a submission leaves "
                     "behind, and its files in /tmp and /dev/shm, may outlive its grading")
        try:
            if sources:
                self.preflight()
            self.grade(sources)
        except KeyboardInterrupt:
            self.say("interrupted: stopping running submissions; finished grades are kept")
            self.kill_all()
            self.write_class_files()
            return 130
        finally:
            remove_tree(self.scratch_root)
        self.write_class_files()
        return self.report_harness_errors()

    def intake(self) -> list:
        """The submissions to grade, or GraderError naming what exists when there is nothing to grade."""
        settings = self.settings
        sources, skipped = submission.find_submissions(settings.submissions)
        for line in skipped:
            self.say(f"skipped {line}")
        if not sources:
            raise GraderError(f"no submissions in {settings.submissions}: it should hold one folder or archive "
                              "per student" + (f" (skipped: {len(skipped)} entries, listed above)" if skipped else ""))
        if settings.only:
            known = {s.id for s in sources}
            unknown = sorted(set(settings.only) - known)
            if unknown:
                shown = ", ".join(sorted(known)[:20]) + (", ..." if len(known) > 20 else "")
                raise GraderError(f"--only {', '.join(unknown)}: no such submission in {settings.submissions} "
                                  f"(there are {len(known)}: {shown})")
            sources = [s for s in sources if s.id in settings.only]
        return sources

    def announce(self, sources) -> None:
        """What will be graded, where and how, before the first (minute-long) run ends."""
        settings = self.settings
        if settings.gpu_mode:
            gpus = sorted(set(settings.slots))
            where = (f"GPU{'s' if len(gpus) > 1 else ''} {', '.join(gpus)}, {settings.per_gpu} at once on each"
                     + (f", each split into up to {settings.parts_each} parts" if settings.split else ""))
        else:
            where = f"the CPU, {len(settings.slots)} at once"
        sandboxed = "bubblewrap" if settings.sandbox and self.bwrap else "none"
        self.say(f"grading {len(sources)} submission{'s' if len(sources) != 1 else ''} from {settings.submissions} "
                 f"on {where} | suite {settings.suite}{'' if settings.perf else ', no perf checks'} | sandbox "
                 f"{sandboxed} | budget {self.budget_text()} | results in {settings.out}")

    def budget_text(self) -> str:
        if self.settings.timeout_option is not None or not self.settings.gpu_mode:
            return f"{self.settings.timeout:g} s a submission"
        return (f"{sizing.BUDGET_FACTOR:g}x the reference's time per run (at least {sizing.MIN_BUDGET_S:g} s), "
                f"else {self.settings.timeout:g} s")

    def preflight(self):
        """One collection-only run through the exact launch grading uses; raises GraderError (nobody
        graded) when it fails. Its header fixes the batch's max: what cannot run here is out of it."""
        slot = self.settings.slots[0]
        outcome = self.execute("preflight", self.scratch_root / "preflight", slot, collect_only=True)
        # A GPU slot on a machine with NVIDIA device nodes must see CUDA; without any node (a CPU box
        # that CUDA_VISIBLE_DEVICES or Slurm labels a GPU) the batch grades in CPU mode, said loudly.
        has_gpu = bool(sandbox.gpu_device_nodes())
        found = preflight.verdict(outcome, gpu_expected=slot is not None and has_gpu, sandboxed=bool(self.bwrap),
                                  interpreter=sys.executable)
        if slot is not None and found.device != "cuda":
            self.say(f"GPU {slot} was assigned but this machine has no NVIDIA device: grading in CPU mode "
                     "(perf checks not run here)")
        self.not_run_here = found.not_run_here
        if self.settings.split:
            problem_of = {check.id: problem.id for problem in self.points.problems for check in problem.checks}
            self.parts = parts.plan(found.collected_tests, problem_of, max_parts=self.settings.parts_each)
        self.batch_maximum = build_result("preflight", self.points, outcome.read, "graded", "", "", {},
                                          suites=self.suites(), perf=self.settings.perf,
                                          not_run_here=self.not_run_here)["score"]["possible"]

    def report_harness_errors(self) -> int:
        """List every submission left without a grade by the harness, loudly; 1 when there is one."""
        broken = [r for r in load_results(self.settings.out) if r.get("status") == HARNESS_ERROR]
        if not broken:
            return 0
        click.echo(f"\nHARNESS ERRORS: {len(broken)} submission(s) NOT graded (not their fault; "
                   "fix the cause and run the same command again, they are regraded):", err=True)
        for result in broken:
            click.echo(f"  {result['id']}: {result.get('reason', '')}", err=True)
        return 1

    def grade(self, sources):
        self.grade_on(sources, self.settings.slots)
        if self.alone_again and not self.stopping.is_set():
            again, self.alone_again = self.alone_again, []
            self.say(f"grading {len(again)} submission(s) again, each with a GPU to itself: their GPU's memory "
                     "or their time ran out while they shared it")
            self.grade_on(again, list(dict.fromkeys(self.settings.slots)), alone=True)

    def grade_on(self, sources, slot_list, alone: bool = False):
        """Grade `sources` on `slot_list`. Split into parts, as many submissions are let in per GPU as it
        has seats (grader.grade.seats), and each part runs once it has one; whole, one per slot."""
        split = bool(self.parts) and not alone
        admitted = seats.admissions(slot_list, len(self.parts)) if split else slot_list
        self.seats = seats.Seats(seats.counts(slot_list, len(self.parts))) if split else None
        self.runs_at_once = min(len(admitted), len(sources) * (len(self.parts) if split else 1))
        slots: queue.Queue = queue.Queue()
        for slot in admitted:
            slots.put(slot)
        started = time.perf_counter()
        done, total = 0, len(sources)
        with ThreadPoolExecutor(max_workers=len(admitted)) as pool:
            pending = {pool.submit(self.grade_one, source, slots, alone, place): source
                       for place, source in enumerate(sources)}
            try:
                while pending:
                    finished, _ = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                    for future in finished:
                        source = pending.pop(future)
                        done += 1
                        try:
                            word = future.result()
                        except Exception as error:  # noqa: BLE001 - one submission's failure is its own
                            word = self.not_gradable_after(source, error)
                        self.progress(done, total, source.id, word, started)
            except KeyboardInterrupt:
                self.stopping.set()
                for future in pending:
                    future.cancel()
                self.kill_all()
                raise

    def grade_one(self, source, slots, alone: bool = False, place: int = 0) -> str:
        """Grade one submission (or reuse its grade); write its outputs; return a progress word.
        `alone`: no other submission is graded on its GPU meanwhile (the batch's second pass). `place`:
        its place in the batch, which ranks its parts for the GPU's seats."""
        begin = time.perf_counter()
        scratch = self.run_scratch(source.id)
        try:
            staged = submission.stage(source, scratch / "impl")
        except BadSubmission as error:
            result = not_gradable_result(source.id, str(error), self.context(source.id, None) | {
                "timing": {"total_s": round(time.perf_counter() - begin, 3)}}, self.maximum())
            return self.finish(source, result, scratch, log="")
        key = self.grade_key(staged)
        previous = self.previous(source.id)
        if previous and previous.get("grade_key") == key and not self.settings.force and not alone \
                and previous.get("status") != HARNESS_ERROR:      # a harness error is never kept
            shutil.rmtree(scratch, ignore_errors=True)
            return f"unchanged, kept {previous['status']}"
        context = self.context(source.id, staged) | {"grade_key": key,
                                                     "leaderboard_name": pseudonyms.chosen_name(source.path)}
        if not staged.files:
            result = not_gradable_result(source.id, staged.nothing_reason(),
                                         context | {"timing": {"total_s": round(time.perf_counter() - begin, 3)}},
                                         self.maximum())
            return self.finish(source, result, scratch, log="")
        slot = slots.get()
        if self.stopping.is_set():
            slots.put(slot)
            return "interrupted"
        used = [] if alone else self.parts      # alone: one whole run, nothing beside it on the GPU
        try:
            outcome = self.execute_parts(source.id, scratch, slot, used, place)
        finally:
            slots.put(slot)
        with self.lock:
            self.durations.append(outcome.duration)
        if self.stopping.is_set():           # killed by Ctrl-C, not by its own doing: no grade
            shutil.rmtree(scratch, ignore_errors=True)
            return "interrupted"
        context |= {"gpu": slot, "exit_code": outcome.exit_code, "parts": [part.label for part in used]}
        shared_by = 1 if alone or slot is None else self.settings.per_gpu * max(1, len(used))
        result = self.result_of(source, outcome, context, shared_by, begin)
        return self.finish(source, result, scratch, log=outcome.log)

    def result_of(self, source, outcome: Outcome, context: dict, shared_by: int, begin: float) -> dict:
        """The submission's result, built once: what its run became (graded, no grade, or no grade until
        it is graded again alone) is decided from the run before the result is written down."""
        timing = {"child_s": round(outcome.duration, 3), "seat_wait_s": round(self.seat_waits.get(source.id, 0.0), 3),
                  "total_s": round(time.perf_counter() - begin, 3),
                  "shared_triton_cache": bool(context.get("parts"))}    # its parts shared one (execute)
        context = context | {"timing": timing}
        if outcome.status == HARNESS_ERROR:
            return unscored_result(source.id, HARNESS_ERROR, outcome.reason, context, self.maximum(), outcome.log)
        status, reason = outcome.status, outcome.reason
        tests = outcome.read.results.tests if outcome.read.results else []
        withheld = gpu_sharing.withheld_reason(status, tests, shared_by, context["gpu"])
        if withheld is not None:
            # written as no grade first: an interrupted batch regrades it
            (reason, grade_alone), status = withheld, HARNESS_ERROR
            if grade_alone:
                with self.lock:
                    self.alone_again.append(source)
        return build_result(source.id, self.points_for(outcome.read), outcome.read, status, reason, outcome.log,
                            context, suites=self.suites(), perf=self.settings.perf, not_run_here=self.not_run_here)

    def finish(self, source, result, scratch, log) -> str:
        write_submission_outputs(self.settings.out / source.id, result, log)
        remove_tree(scratch)
        score, seconds = result["score"], result.get("timing", {}).get("total_s")
        took = f" in {seconds:.0f} s" if seconds is not None else ""
        return f"{result['status']} {points_text(score['earned'])}/{points_text(score['possible'])}{took}"

    def not_gradable_after(self, source, error) -> str:
        """What is left to do when grading one submission raised: record it as not gradable, if even
        that can be written; the batch and the class files go on either way."""
        reason = f"the grader failed on this submission ({type(error).__name__}: {str(error)[:300]})"
        try:
            result = not_gradable_result(source.id, reason, self.context(source.id, None), self.maximum())
            return self.finish(source, result, self.run_scratch(source.id), log="")
        except Exception as again:  # noqa: BLE001
            return f"{reason}; its outputs could not be written ({type(again).__name__})"

    # --- one child run ---------------------------------------------------------------------------

    def execute_parts(self, student: str, scratch: Path, slot: str | None, part_list, place: int = 0) -> Outcome:
        """The submission's checking run, or one per part on the same GPU, combined. Each part waits
        for a seat of the GPU (when the batch has seats), longest part first."""
        if not part_list:
            return self.execute(student, scratch, slot)
        longest_first = {part.label: rank for rank, part in enumerate(sorted(part_list, key=lambda p: -p.seconds))}
        moments: list[float] = []            # each part's start and end: the submission's run spans them

        def run(part):
            seat = (self.seats.seat(slot, (place, longest_first[part.label]), self.stopping) if self.seats
                    else contextlib.nullcontext(True))
            asked = time.perf_counter()
            with seat as seated:
                with self.lock:
                    self.seat_waits[student] = self.seat_waits.get(student, 0.0) + time.perf_counter() - asked
                if not seated:                 # the batch stopped first: nothing ran, nothing to grade
                    return part.label, Outcome(HARNESS_ERROR, "interrupted before it started", None, 0.0, "", "")
                folder = scratch / "parts" / part.label
                shutil.copytree(scratch / "impl", folder / "impl")    # each run sees its own scratch alone
                start = time.perf_counter()
                outcome = self.execute(student, folder, slot, part=part)
                moments.extend((start, start + outcome.duration))
                return part.label, outcome

        with ThreadPoolExecutor(max_workers=len(part_list)) as pool:
            combined = parts.combine(list(pool.map(run, part_list)))
        return dataclasses.replace(combined, duration=max(moments) - min(moments)) if moments else combined

    def execute(self, student: str, scratch: Path, slot: str | None, collect_only: bool = False,
                part: parts.Part | None = None) -> Outcome:
        self.fingerprint                        # noqa: B018 - builds the checker tree on first use
        # A part compiles into its submission's one Triton cache, which its other parts read; a whole run
        # keeps its own, a tmpfs in its scratch (grader.grade.sandbox.build_launch).
        triton_cache = self.shared_triton_cache(student) if part is not None else None
        shared = [triton_cache] if triton_cache is not None else []
        for folder in [*sandbox.scratch_folders(scratch), scratch / "impl", *shared]:
            folder.mkdir(parents=True, exist_ok=True)
        read_end, write_end = os.pipe()
        chosen = selection_file(self.tests_of(part))
        command = self.checker_command(scratch / "impl", write_end, part, selection_fd=chosen) + \
            (["--collect-only"] if collect_only else [])
        # Its own open file descriptions of the GPU's lock files: see grader.perf.gpu_lock.
        lock_fds = gpu_lock.open_for_child(self.scratch_root / "gpu-locks", slot) if slot is not None else ()
        lock_env = {gpu_lock.FDS_ENV: gpu_lock.env_value(lock_fds)} if lock_fds else {}
        kept = self.kept_cores.get(slot, [])
        cores_env = {timing_cores.CORES_ENV: timing_cores.env_value(kept)} if kept else {}
        threads_env = sizing.thread_pool_env(len(self.compile_cores) or len(os.sched_getaffinity(0)),
                                             self.runs_at_once)
        launch = sandbox.build_launch(
            command, scratch=scratch, checker_root=self.checker_tree_for(scratch),
            gpus=[slot] if slot is not None else ([] if not self.settings.gpu_mode else None),
            sandbox=self.settings.sandbox, bwrap=self.bwrap, base_env=dict(os.environ),
            masked=self.masked_paths(), device_nodes=sandbox.gpu_device_nodes(),
            keep_visible=self.python_paths, disposable_copy=self.disposable_hidden_suite(scratch),
            triton_cache=triton_cache,
            extra_env={worker.MEMORY_ENV: str(self.settings.worker_memory_mb), **lock_env, **cores_env, **threads_env,
                       **({TASKS_ENV: str(sizing.RUN_PIDS_MAX)} if self.bwrap else {})})
        argv = launch.argv
        if not launch.sandboxed and self.unshare:
            # What the run needs from a host /tmp its private one hides: the batch's scratch and this
            # run's (written), the interpreter as bubblewrap shows it, and the checker tree (read).
            code = [*self.python_paths, launch.cwd, *launch.env.get("PYTHONPATH", "").split(os.pathsep)]
            argv = containment.wrap(argv, self.unshare, writable=[self.scratch_root, scratch, *shared],
                                    readonly=[path for path in code if path])
        bounds = cgroups.for_run(self.cgroups, sizing.run_memory_bytes(self.settings.worker_memory_mb),
                                 sizing.RUN_PIDS_MAX, label=student, say=self.say)
        if bounds is not None:                  # joined before anything of the run starts (taskset execs)
            argv = bounds.join_prefix() + argv
        if kept:                                # off its GPU's timing cores, whatever it starts too
            argv = timing_cores.launch_prefix(self.compile_cores) + argv
        key = (student, part.label if part else "")

        def started(process, at):
            with self.lock:
                first = student != "preflight" and student not in {name for name, _ in self.running}
                self.running[key] = (process, at)
            if first and student not in self.started:
                self.started.add(student)
                self.say(f"started {student}" + (f" on GPU {slot}" if slot is not None else ""))

        def ended(process):
            with self.lock:
                self.running.pop(key, None)

        try:
            return watch(argv, env=launch.env, cwd=launch.cwd, results_fd=(read_end, write_end),
                         pass_fds=(*lock_fds, chosen), timeout=self.budget_s(part), started=started, ended=ended,
                         cgroup=bounds)
        finally:
            os.close(chosen)
            for fd in lock_fds:
                os.close(fd)                    # the child's copies carry its locks; ours would only linger
            if bounds is not None:
                bounds.remove()

    def budget_s(self, part: parts.Part | None) -> float:
        """This run's wall-clock budget: the TA's --timeout, else from what the reference's tests of it
        took on the grading GPU (a whole suite: all of its parts'), else the default."""
        if self.settings.timeout_option is not None or not self.settings.gpu_mode:
            return self.settings.timeout
        seconds = part.seconds if part is not None else sum(p.seconds for p in self.parts)
        return sizing.run_budget_s(seconds, self.settings.timeout)

    def tests_of(self, part: parts.Part | None) -> tuple[str, ...]:
        """What a checking run checks: its part's selection, the chosen tests, or the suites' folders."""
        return tuple(part.selection if part else (self.settings.selection or SUITE_DIRS[self.settings.suite]))

    def checker_command(self, impl_dir: Path, results_fd: int, part: parts.Part | None = None,
                        selection_fd: int | None = None) -> list[str]:
        """The checking run's command; with `selection_fd` (grader.grade.checking_run.selection_file) the
        tests it checks are read from there, so that no test's name is on its command line."""
        command = [sys.executable, "-c", CHECKER_LAUNCHER, "-p", "grader.plugin"]
        if importable("pytest_timeout"):
            command += ["-p", "pytest_timeout"]
        tests = [SELECTION_FLAG, str(selection_fd)] if selection_fd is not None else list(self.tests_of(part))
        command += [*tests, "--impl", str(impl_dir), "--isolate",
                    "--results-json", f"/dev/fd/{results_fd}", "-q", "--tb=short", "-p", "no:cacheprovider"]
        if not self.settings.perf:
            command += ["-m", "not perf"]
        return command

    def run_scratch(self, student: str) -> Path:
        """A submission's scratch: its staged files, its parts' own scratch and its Triton cache. It is
        removed once the submission's outputs are written (`finish`)."""
        return self.scratch_root / "runs" / student

    def shared_triton_cache(self, student: str) -> Path:
        """The Triton cache all of a split submission's parts share, and no other submission's run sees:
        bound into its parts' sandboxes alone, and gone with its scratch."""
        # Parts may write it at once: Triton 3.6 FileCacheManager.put writes a temp file, then os.replace()s it.
        return self.run_scratch(student) / "shared-triton-cache"

    def checker_tree_for(self, scratch: Path) -> Path:
        """Sandboxed runs share the read-only checker tree. Without a sandbox the worker can write it
        (as root, or by chmod as its owner): each run gets its own copy, so what one submission plants
        there reaches no other submission's checking run."""
        if self.settings.sandbox and self.bwrap:
            return self.checker_root
        private = scratch / "checker"
        shutil.copytree(self.checker_root, private, symlinks=True)
        for path in (private, *(p for p in private.rglob("*") if p.is_dir() and not p.is_symlink())):
            path.chmod(0o755)   # so that removing the scratch removes it
        return private

    def disposable_hidden_suite(self, scratch: Path) -> tuple[Path, Path] | None:
        """(this run's own copy of the hidden suite, the checker-tree folder it covers) when sandboxed:
        the checker empties the copy after collection, so student code never finds the hidden tests."""
        hidden = self.checker_root / "tests_hidden"
        if not (self.settings.sandbox and self.bwrap) or not hidden.is_dir():
            return None
        return disposable.make_copy(hidden, scratch / "hidden-suite"), hidden

    def masked_paths(self) -> list[Path]:
        """Folders the sandboxed child must see empty: staff-only parts of the repo, other students."""
        candidates = [REPO_ROOT, *map(Path, sandbox.HOST_MASKS)]   # the whole staff checkout, and host secrets
        candidates += [self.settings.tests_root / "tests_hidden", self.settings.submissions,
                       self.settings.out, self.scratch_root]
        return [path.resolve() for path in candidates if path.exists() and not path.is_symlink()]

    def kill_all(self):
        self.stopping.set()
        with self.lock:
            for process, _ in self.running.values():
                kill_group(process)

    # --- bookkeeping -----------------------------------------------------------------------------

    def points_for(self, read):
        """The points table with the perf ladders calibrated for the GPU the run reported."""
        gpu = gpu_name_of(read)
        with self.lock:
            if gpu not in self.tables:
                self.tables[gpu] = load_points(self.settings.points_dir, gpu_name=gpu)
            return self.tables[gpu]

    def maximum(self) -> float:
        """The batch's one max: the preflight's (what runs here), else every selected check's."""
        if self.batch_maximum is not None:
            return self.batch_maximum
        return maximum(self.points, self.suites(), self.settings.perf)

    def suites(self) -> tuple[str, ...]:
        return ("public", "hidden") if self.settings.suite == "all" else (self.settings.suite,)

    def grade_key(self, staged) -> str:
        return grade_key(staged.content_hash, self.settings, self.fingerprint)

    def previous(self, student: str) -> dict | None:
        path = self.settings.out / student / RESULT_FILE
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def context(self, student: str, staged) -> dict:
        meta = self.metadata.get(student, {})
        return {
            "grader_version": grader.__version__, "grader_fingerprint": self.fingerprint,
            "suite": self.settings.suite, "perf_checks": self.settings.perf,
            "sandbox": "bubblewrap" if (self.settings.sandbox and self.bwrap) else "none",
            "timeout_s": self.settings.timeout_option, "worker_memory_mb": self.settings.worker_memory_mb,
            "per_gpu": self.settings.per_gpu if self.settings.gpu_mode else None,
            "files": dict(staged.files) if staged else {}, "ignored": list(staged.ignored) if staged else [],
            "missing": list(staged.missing) if staged else [], "helpers": dict(staged.helpers) if staged else {},
            "found": dict(staged.found) if staged else {},
            "missing_reasons": dict(staged.missing_reasons) if staged else {},
            "late": meta.get("late"), "submitted_at": meta.get("submitted_at", ""),
        }

    def progress(self, done, total, student, word, started):
        """One line as a submission ends: its outcome and time, what still runs, the time left."""
        now = time.perf_counter()
        with self.lock:
            launched = sorted({name for name, _ in self.running})
            graded = len(self.durations)             # runs graded in this batch: kept grades took no time
        eta = eta_from_rate(graded, now - started, total - done)
        eta_text = clock_text(eta) if eta is not None else "? (no submission graded yet)"
        self.say(f"[{done}/{total}] {student}: {word} | running: {', '.join(launched) or '-'} | ETA {eta_text}")

    def write_class_files(self):
        if self.settings.class_files:
            self.say(write_class_files(self.settings.out, self.points))

    def say(self, line: str):
        if not self.settings.quiet:
            click.echo(line, err=True)
