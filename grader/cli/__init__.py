"""`grader`: the one command staff, TAs and students run.

Each subcommand parses its options and calls one function in the module that owns the job; heavy
imports (torch, Triton) stay inside those functions so `grader --help` is instant.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from grader.errors import GraderError

AUDIENCE = "staff"   # the commands staff and TAs type; the checking run never imports it (grader/layout.py)


class _Group(click.Group):
    """Turns a GraderError anywhere below into a one-line message and exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except GraderError as error:
            raise click.ClickException(str(error)) from None


@click.group(cls=_Group)
@click.version_option(package_name="gpu-systems-assignment")
def main():
    """GPU-systems assignment: grade submissions, build the handout, benchmark kernels."""


# --- options more than one command takes: declared once ---------------------------------------------------

SUITE = click.option("--suite", type=click.Choice(["public", "hidden", "all"]), default="all", show_default=True,
                     help="Which suites each submission is graded with.")
def refuse_absent_gpus(gpus: str | None) -> None:
    """--gpus as given must name GPUs this machine has (None or "all": whatever is visible)."""
    if gpus is None or gpus.strip().lower() == "all":
        return
    from grader.grade import sizing

    problem = sizing.absent_gpus(sizing.parse_gpus(gpus), sizing.detect_gpus(os.environ))
    if problem:
        raise click.BadParameter(problem, param_hint="'--gpus'")


GPUS = click.option("--gpus", default=None,
                    help="Comma-separated GPU indices, '' for the CPU only (default: all visible).")
NO_PERF = click.option("--no-perf", is_flag=True, help="Skip the timed performance checks.")


def per_gpu_option(more_default: str = ""):
    """--per-gpu, for `grade` and `bench grading` alike; `grade`'s says what it means with --slurm."""
    return click.option("--per-gpu", type=click.IntRange(min=1), default=None, metavar="N",
                        help="Submissions graded at once on each GPU; perf checks' timing still has the GPU "
                             f"alone [default: from the cores, RAM and GPU memory, at most 4{more_default}].")


PER_GPU = per_gpu_option()
GRADE_PER_GPU = per_gpu_option("; with --slurm: 1, and N makes each array task grade N students at once")
SPLIT = click.option("--split/--whole-suite", default=None,
                     help="Check each submission's suite as up to four checking runs on its GPU, packed by "
                          "the reference's measured test times, so that its Triton compiles run on several "
                          "cores; each run takes one of the GPU's seats (per-gpu x parts), so the next "
                          "submission's parts start as earlier ones end; the grade is the same [default: "
                          "--split with a GPU, --whole-suite on the CPU].")
COURSE = click.option("--course", type=click.Path(exists=True, dir_okay=False), default=None, metavar="FILE",
                      help="The course file (course.toml: due date, late policy, extensions, ...); a copy is "
                           "kept in the output folder and applied by every later `grader report` there.")
IMPL = click.option("--impl", "impl_name", default="solutions", show_default=True,
                    help="assignment, solutions, or a path to a submission.")


# --- grade (owned by grader/grade/runner.py) ---------------------------------------------------------------


@main.command()
@click.argument("submissions", type=click.Path(exists=True, file_okay=False))
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="Folder for grades.csv, index.html and one folder per submission.")
@SUITE
@GPUS
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Parallel submissions on a CPU-only machine.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Wall-clock budget per submission, seconds.")
@click.option("--only", multiple=True,
              help="Grade only these student ids (repeatable); unchanged ones are kept unless --force.")
@click.option("--force", is_flag=True, help="Regrade even when files and suite are unchanged.")
@click.option("--no-sandbox", is_flag=True, help="Do not run submissions inside bubblewrap.")
@NO_PERF
@GRADE_PER_GPU
@SPLIT
@click.option("--worker-memory", type=click.IntRange(min=0), default=None, metavar="MB",
              help="Private memory cap of the process running each submission's code [default: half "
                   "the RAM shared over the workers running at once (one per part), at least 8192; 0: no cap]. "
                   "Where a cgroup can be made, each checking run's memory in all, shared and memfd "
                   "pages included, is bounded at this plus 2048 (`grader doctor`).")
@click.option("--slurm", is_flag=True, help="Grade on a Slurm cluster: one array job, one task per "
              "submission or per --per-gpu N of them (checkout, venv and --out on a shared filesystem).")
@click.option("--sbatch-arg", "sbatch_args", multiple=True, metavar="ARG",
              help="With --slurm: pass ARG to sbatch, e.g. --sbatch-arg=--partition=gpu (repeatable).")
@click.option("--array-parallelism", type=click.IntRange(min=1), default=None, metavar="P",
              help="With --slurm: at most P tasks of the array run at once.")
@click.option("--no-wait", is_flag=True, help="With --slurm: submit and return instead of waiting.")
@COURSE
def grade(slurm, sbatch_args, array_parallelism, no_wait, course, **options):
    """Grade every submission in SUBMISSIONS (one folder or archive per student, or a Canvas bulk
    download's flat files). Staff facts beside them: metadata.csv (id, submitted_at, late); see
    docs/course-operations.md."""
    if course:
        from grader.course.course_file import install_course

        install_course(course, options["out"])
    if slurm:
        from grader.grade.slurm import grade_on_slurm

        sys.exit(grade_on_slurm(**options, sbatch_args=sbatch_args, array_parallelism=array_parallelism,
                                no_wait=no_wait))
    if sbatch_args or array_parallelism is not None or no_wait:
        raise click.UsageError("--sbatch-arg, --array-parallelism and --no-wait need --slurm")
    refuse_absent_gpus(options["gpus"])      # with --slurm the GPUs are the nodes', not this machine's
    from grader.grade.runner import grade_all

    sys.exit(grade_all(**options))


@main.command()
@click.argument("out", type=click.Path(exists=True, file_okay=False))
@COURSE
def report(out, course):
    """Rebuild OUT's class files (grades.csv, index.html, leaderboard.html) from the results on disk, and
    the students' report.html and gradescope.json where the course file changes them."""
    from grader.points import load_points
    from grader.report.class_files import write_class_files

    if course:
        from grader.course.course_file import install_course

        install_course(course, out)
    click.echo(write_class_files(out, load_points()), err=True)


@main.command()
def doctor():
    """Show what grading would use here (interpreter, torch, GPUs, sandbox, ...) and how to fix problems."""
    from grader.grade.doctor import run_doctor

    sys.exit(run_doctor(click.echo))


# --- handout (owned by grader/handout/) --------------------------------------------------------------


@main.group()
def handout():
    """Build what students receive from solutions/."""


@handout.command()
@click.option("--check", is_flag=True, help="Only verify assignment/ is up to date; exit 1 if not.")
def stubs(check):
    """Write assignment/ from solutions/ (solution regions become NotImplementedError)."""
    from grader.handout.stubs import write_stubs

    sys.exit(write_stubs(check_only=check))


@handout.command()
@click.option("--out", default="dist/handout", show_default=True, type=click.Path(file_okay=False))
@click.option("--no-verify", is_flag=True, help="Skip the consistency proofs (faster, for drafts).")
def build(out, no_verify):
    """Build the student handout folder and its .tar.gz, then prove it consistent."""
    from grader.handout.build import build_handout

    sys.exit(build_handout(out, verify=not no_verify))


# --- bench and calibrate (owned by grader/bench/) --------------------------------------------------------


class _BenchGroup(click.Group):
    """`grader bench --grader ...` is `grader bench grading ...`, another spelling of the same command."""

    def parse_args(self, ctx, args):
        if args[:1] == ["--grader"]:
            args = ["grading", *args[1:]]
        return super().parse_args(ctx, args)


@main.group(cls=_BenchGroup)
def bench():
    """Measure speed: the kernels against their baselines, or the grader itself (`grading`, also
    spelled `--grader`)."""


@bench.command()
@IMPL
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the measurements as JSON.")
@click.option("--chart", type=click.Path(dir_okay=False), default="roofline.svg", show_default=True)
@click.option("--kernel", "kernels", multiple=True, help="Only these kernels (repeatable).")
def kernels(impl_name, json_path, chart, kernels):
    """Time every kernel against its baseline and print the ratios. Without a CUDA GPU: every case at
    tiny sizes in Triton's interpreter, a check that each path runs (the ratios mean nothing there).
    Exit status 1 when a case did not run or was wrong."""
    from grader.bench.kernels import run_bench

    sys.exit(run_bench(impl_name, json_path=json_path, chart_path=chart, kernels=kernels))


@bench.command()
@click.option("--copies", type=click.IntRange(min=1), default=4, show_default=True,
              help="How many copies of the reference submission to grade.")
@GPUS
@PER_GPU
@SUITE
@NO_PERF
@SPLIT
@click.option("--out", default=None, type=click.Path(file_okay=False),
              help="Keep the copies' grades in this folder (default: a temporary one, deleted).")
@click.option("--save-test-seconds", is_flag=True,
              help="Write how long each test (each case of a parametrized one) took into "
                   "grader/grade/test_seconds.json, which --split divides submissions by (run it with "
                   "--copies 8 --per-gpu 4 on the grading GPU: the seconds of tests that share it).")
def grading(copies, gpus, per_gpu, suite, no_perf, out, split, save_test_seconds):
    """Grade copies of the reference: submissions per hour per GPU and the grader's overhead."""
    refuse_absent_gpus(gpus)
    from grader.bench.grading import bench_grader

    sys.exit(bench_grader(copies, gpus=gpus, suite=suite, no_perf=no_perf, per_gpu=per_gpu, out=out,
                          split=split, save_test_seconds=save_test_seconds))


@main.command()
@click.option("--gpu-name", default=None, help="Write the ladder under this GPU model name.")
@click.option("--dry-run", is_flag=True, help="Show old and new ladders without writing.")
@click.option("--kernel", "kernels", multiple=True, help="Only these kernels' checks (repeatable).")
def calibrate(gpu_name, dry_run, kernels):
    """Measure the reference solutions on this GPU and write its perf ladders. Without a CUDA GPU it
    writes nothing: --dry-run runs the tiny cases in Triton's interpreter and shows the ladders."""
    from grader.bench.kernels import calibrate as run_calibrate

    sys.exit(run_calibrate(gpu_name=gpu_name, dry_run=dry_run, kernels=kernels))


# --- course operations (owned by grader/course/) -------------------------------------------------------


@main.group()
def export():
    """Write the class's grades in an LMS's import format."""


@export.command()
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--roster", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Canvas's gradebook export or Gradescope's roster (CSV; told apart by the header).")
@click.option("--reports", default="reports", show_default=True, type=click.Path(exists=True, file_okay=False),
              help="The graded output folder (its course.toml's late policy is applied).")
@click.option("--assignment", default=None,
              help="The assignment column's name; \"Name (12345)\" updates Canvas assignment 12345 "
                   "[default: assignment.name of the course file].")
def canvas(out, roster, reports, assignment):
    """Write OUT, a CSV Canvas's gradebook imports: one row per roster student, the final totals."""
    from grader.course.canvas_export import export_canvas

    click.echo(export_canvas(reports, out, roster, assignment).summary(), err=True)


@main.group()
def gradescope():
    """The Gradescope autograder: build its zip, run it (inside Gradescope), bake in final grades."""


@gradescope.command(name="build")
@click.option("--out", default="dist/autograder.zip", show_default=True, type=click.Path(dir_okay=False))
@COURSE
@click.option("--final", "final_reports", type=click.Path(exists=True, file_okay=False), default=None,
              metavar="REPORTS", help="Bake in each student's gradescope.json from a GPU grade's output "
              "folder: after uploading this zip, Gradescope's \"Regrade all submissions\" shows the final grades.")
def gradescope_build(out, course, final_reports):
    """Write the autograder zip (setup.sh, run_autograder, the grader and the suites it runs)."""
    from grader.course.autograder_build import build_autograder
    from grader.course.course_file import load_course

    click.echo(build_autograder(out, load_course(course) if course else None, final_reports), err=True)


@gradescope.command(name="run")
@click.option("--root", default="/autograder", show_default=True, type=click.Path(file_okay=False),
              help="Gradescope's folder: submission/ in, results/results.json out, source/ the zip.")
def gradescope_run(root):
    """Grade ROOT/submission on the CPU and write ROOT/results/results.json (what run_autograder calls)."""
    from grader.course.autograder_run import run_autograder

    sys.exit(run_autograder(root))


@main.command()
@click.argument("submissions", type=click.Path(exists=True, file_okay=False))
@click.option("--out", default="reports/similarity", show_default=True, type=click.Path(file_okay=False),
              help="Folder for index.html (pairs ranked) and one side-by-side page per pair; staff only.")
@click.option("--stubs", type=click.Path(exists=True, file_okay=False), default=None,
              help="The handout's stubs, whose code is boilerplate [default: assignment/ of this checkout].")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="Similarity from which a pair is flagged [default: copydetect's, 0.33].")
def similarity(submissions, out, stubs, threshold):
    """Compare SUBMISSIONS with each other, module by module (copydetect); never changes a grade."""
    from grader.course.similarity import write_similarity_report

    click.echo(write_similarity_report(submissions, out, stubs=stubs, threshold=threshold), err=True)


@main.command(name="leaderboard")
@click.argument("out", type=click.Path(exists=True, file_okay=False))
def leaderboard_command(out):
    """Rebuild OUT/leaderboard.html from the results on disk and print each perf case's ranking."""
    from grader.course import leaderboard
    from grader.course.course_file import installed_course
    from grader.report.class_files import LEADERBOARD_FILE, load_results

    results = load_results(out)
    salt = leaderboard.salt_for(out, installed_course(out))
    leaderboard.write_leaderboard(Path(out) / LEADERBOARD_FILE, results, salt)
    for board in leaderboard.boards(results, salt):
        click.echo(board.label)
        for rank, entry in enumerate(board.entries, start=1):
            click.echo(f"  {rank:3d}. {entry.ratio:6.3f}x  {entry.name}")
        if not board.entries:
            click.echo(f"  {leaderboard.NOT_MEASURED} ({board.not_measured} graded without a GPU)")
    click.echo(f"wrote {Path(out) / LEADERBOARD_FILE}", err=True)
