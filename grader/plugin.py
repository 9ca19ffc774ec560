"""The pytest plugin both suites run under: picks the implementation, ties tests to points, reports.

Loaded with `-p grader.plugin` (pyproject's addopts; the grader passes it explicitly). What it adds:
- options `--impl NAME_OR_PATH` (env GRADER_IMPL), `--isolate` (env GRADER_ISOLATE=1),
  `--results-json PATH` (a line-per-test stream the grader scores);
- markers `check(id)`, `perf(id)`, `gpu_only`, `triton`; every test in a suite must name a known check;
- fixtures `impl`, `device`, `on_gpu`, `gen`, `record_perf`;
- outcomes: passed, failed, not implemented, not run here, harness error (see grader/results.py);
- a per-problem points summary at the end of the run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from grader import devices, disposable, hints, memory_safety, results
from grader.errors import not_implemented_cause
from grader.hints import device_hint
from grader.interpreter_limits import interpreter_limit, limit_in_chain, not_run_reason
from grader.points import load_points
from grader.student_traceback import student_frames

GRADING_RUN = pytest.StashKey["GradingRun"]()   # this run's state (class GradingRun, below)
SUITE_DIRS = {"tests_public": "public", "tests_hidden": "hidden"}


# --- options and configuration --------------------------------------------------------------------


def pytest_addoption(parser):
    group = parser.getgroup("grader", "GPU-systems assignment")
    group.addoption("--impl", default=os.environ.get("GRADER_IMPL", "assignment"),
                    help="implementation under test: assignment (default), solutions, or a folder")
    group.addoption("--isolate", action="store_true", default=os.environ.get("GRADER_ISOLATE") == "1",
                    help="run the implementation in a worker process (always used when grading)")
    group.addoption("--results-json", default=None, help="write one JSON line per test to this file")
    group.addoption("--grader-seed", default="", help="extra salt for the per-test seeds (replays)")
    group.addoption("--checks", action="store_true", default=False,
                    help="print each check's points in the summary (as -v does)")
    group.addoption("--resume-from", default=None, metavar="RESULTS_JSON",
                    help="skip the tests this results stream reports and count its records in the summary "
                         "(grader.local_run, after the student's code killed an in-process run)")


def pytest_configure(config):
    from grader.perf import gpu_lock

    gpu_lock.current()   # takes the GPU lock's fds and makes them non-inheritable before a worker spawns
    early_worker = None
    if config.getoption("--isolate") and not config.getoption("--collect-only", False):
        early_worker = _start_worker_early(config)  # first: its torch import overlaps this process's
    policy = devices.configure()  # before anything imports Triton
    for line in (
        "check(id): ties the test to a check in grader/points/<problem>.toml",
        "perf(id): a timed performance check (GPU only), scored on its ladder",
        "gpu_only: needs CUDA; reported as 'not run here' without it",
        "triton: needs Triton; reported as 'Triton not installed' without it",
    ):
        config.addinivalue_line("markers", line)
    run = GradingRun(policy, load_points(gpu_name=_gpu_name(policy)), config.getoption("--impl"), early_worker)
    config.stash[GRADING_RUN] = run
    config.pluginmanager.register(run, "grader-run")


def pytest_unconfigure(config):
    run = config.stash.get(GRADING_RUN, None)
    if run is not None:
        config.pluginmanager.unregister(run)
        del config.stash[GRADING_RUN]


def _start_worker_early(config):
    """Spawn the isolated worker before this process imports torch: the two imports then run side by
    side, and the worker is usually ready when collection ends."""
    from grader.impl import make_impl

    paths = [Path(arg.split("::")[0]).resolve() for arg in config.args]
    folders = sorted({str(p if p.is_dir() else p.parent) for p in paths if p.exists()})
    try:
        built = make_impl(config.getoption("--impl"), isolated=True,
                          extra_sys_path=_worker_sys_path(folders, config.rootpath))
    except FileNotFoundError:
        return None  # the impl fixture reports it on first use
    built.start()
    return built


def _worker_sys_path(test_folders, rootpath) -> list[str]:
    """Nothing beyond the grader's own folder: the scenarios impl.run may send live in the grader
    (grader.worker.entry_points), and a test module on the worker's path would be one student code can change."""
    return []


def _gpu_name(policy):
    if not policy.on_gpu:
        return None
    import torch

    return torch.cuda.get_device_name(0)


def pytest_report_header(config):
    mode = "isolated worker" if config.getoption("--isolate") else "in-process"
    return [f"grader: impl={config.getoption('--impl')} ({mode}); {config.stash[GRADING_RUN].policy.reason}"]


# --- collection: every graded test names a known check ------------------------------------------


def pytest_collection_modifyitems(session, config, items):
    run = config.stash[GRADING_RUN]
    known, policy = run.points.checks, run.policy
    if config.getoption("--resume-from"):
        from grader.local_run import resume

        resume(config, items, run)
    for item in items:
        check_id = _check_id(item)
        if check_id is None:
            if _suite_of(item):
                item.add_marker(pytest.mark.xfail(reason="harness: no check marker", run=False, strict=True))
                item.user_properties.append(("grader_error", "test has no @pytest.mark.check(id)"))
            continue
        if check_id not in known:
            raise pytest.UsageError(f"{item.nodeid}: check id {check_id!r} is not in grader/points/*.toml")
        reason = _not_run_reason(item, policy)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
    path = config.getoption("--results-json")
    if path:
        run.open_stream(path, [(item.nodeid, _check_id(item)) for item in items if _check_id(item)],
                        [item.nodeid for item in items if _check_id(item) and _not_run_reason(item, policy)])


def pytest_collection_finish(session):
    """Grading: every hidden test module is in memory now, so their disposable copy is emptied before
    any student code runs (the worker imports the student's modules on its first call, in a test),
    and no folder student code can write stays on this process's import path (grader.worker.import_path)."""
    run = session.config.stash[GRADING_RUN]
    if session.config.getoption("--resume-from") and session.items:
        run.died_in = session.items[0].nodeid   # the first test the run that died did not report
    if session.config.getoption("--isolate"):
        disposable.empty_named_copy()
        from grader.worker import import_path

        import_path.seal({str(Path(str(item.path)).parent) for item in session.items})


def _environment(policy) -> dict:
    """The fingerprint every grade carries; throughput is measured only where it can matter (GPU)."""
    from grader.perf.environment import fingerprint

    try:
        return {"device": policy.reason, **fingerprint(measure=policy.on_gpu)}
    except Exception as error:  # noqa: BLE001 - a missing nvidia-smi must not stop the grading
        return {"device": policy.reason, "fingerprint_error": f"{type(error).__name__}: {error}"}


def _check_id(item):
    for name in ("check", "perf"):
        marker = item.get_closest_marker(name)
        if marker is not None:
            return marker.args[0]
    return None


def _suite_of(item) -> str | None:
    for part in Path(str(item.path)).parts:
        if part in SUITE_DIRS:
            return SUITE_DIRS[part]
    return None


def _not_run_reason(item, policy) -> str | None:
    if (item.get_closest_marker("gpu_only") or item.get_closest_marker("perf")) and not policy.on_gpu:
        return "GPU-only check: not run here (no CUDA)"
    if item.get_closest_marker("triton") and not policy.triton:
        return "Triton not installed: not run here"
    return None


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def impl(request):
    """The implementation under test (see docs/harness-api.md)."""
    from grader.impl import make_impl

    config = request.config
    built = config.stash[GRADING_RUN].worker
    if built is None:
        test_dirs = sorted({str(Path(str(item.path)).parent) for item in request.session.items})
        built = make_impl(config.getoption("--impl"), isolated=config.getoption("--isolate"),
                          extra_sys_path=_worker_sys_path(test_dirs, config.rootpath))
    yield built
    # The last calls' damage surfaces in no later test: probe the worker before it goes (grader.memory_safety).
    fault = memory_safety.probe(built)
    if fault is not None:
        config.stash[GRADING_RUN].charge_memory_fault(fault, memory_safety.AFTER_LAST_TEST)
    built.close()


@pytest.fixture(scope="session")
def device(request) -> str:
    return request.config.stash[GRADING_RUN].policy.device


@pytest.fixture(scope="session")
def on_gpu(request) -> bool:
    return request.config.stash[GRADING_RUN].policy.on_gpu


@pytest.fixture
def gen(request):
    """A generator seeded by this test's id and suite: hidden and public tests draw different inputs."""
    import torch

    from grader.numerics import seed_for

    salt = f"{_suite_of(request.node) or 'local'}{request.config.getoption('--grader-seed')}"
    return torch.Generator().manual_seed(seed_for(request.node.nodeid, salt))


@pytest.fixture
def record_perf(request):
    """Perf tests call record_perf(ratio=..., **details); the ratio is scored on the check's ladder."""

    def record(ratio: float, **details):
        request.node.user_properties.append(("perf", {"ratio": float(ratio), **details}))

    return record


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """An ordinary test holds its GPU's shared lock throughout (its worker calls and the checker's own
    reference maths), so a neighbour's perf check times alone; a perf test takes the lock itself, shared
    for its warm-up and exclusively for its rounds (grader.perf.measure). A test whose worker died runs
    once more in a fresh one (grader.memory_safety). A perf test that passed below its check's top step,
    or flagged retry, is timed once more in a fresh worker, and the better reading counts (grader.perf.retime)."""
    from grader.impl import WorkerLost
    from grader.perf import gpu_lock

    returned = getattr(getattr(item, "funcargs", {}).get("impl"), "returned", None)
    if returned is not None:
        returned.clear()          # what an earlier test got back is not this test's to judge
    with _hint_circumstances(item), _calling_test(item) as again:
        if item.get_closest_marker("perf"):
            result = yield        # a first reading that failed raises here: it is not timed again
            again.retime()
            return result
        with gpu_lock.shared():
            try:
                return (yield)
            except WorkerLost as lost:
                died = lost
            # outside the except block: the rerun's own failure is not shown as raised "during" the death
            return again.after_death(died)


def _calling_test(item):
    """Tell the isolated worker which test calls it, and give the test's two reruns, each once more in a
    fresh worker from the same inputs: `after_death(lost)`, after its worker died (grader.memory_safety),
    and `retime()`, of a perf test whose reading lost points (grader.perf.retime)."""
    import contextlib
    import types

    from grader.impl import IsolatedImpl, WorkerLost

    impl, check_id = getattr(item, "funcargs", {}).get("impl"), _check_id(item)
    generator = getattr(item, "funcargs", {}).get("gen")
    if not hasattr(generator, "get_state"):   # a suite may define a `gen` fixture of its own
        generator = None
    state = generator.get_state() if generator is not None else None

    charge = item.config.stash[GRADING_RUN].charge_memory_fault

    def reset_inputs():
        if generator is not None:
            generator.set_state(state)

    def rerun(lost):
        __tracebackhide__ = True  # noqa: F841
        if not isinstance(impl, IsolatedImpl) or lost.timed_out:
            raise lost
        return memory_safety.rerun_after_death(item, lost, reset_inputs, lambda fault, died_in: charge(
            fault, memory_safety.died_later_in(died_in), current=item.nodeid))

    def retime():
        __tracebackhide__ = True  # noqa: F841
        run = item.config.stash[GRADING_RUN]
        if not isinstance(impl, IsolatedImpl) or not run.policy.on_gpu:
            return   # grading only: a student's own run, and the CPU, time nothing twice
        from grader.perf import retime as perf_retime

        def charge_damage(fault):
            raise WorkerLost(memory_safety.charge_message(fault, memory_safety.BEFORE_RETIME))

        perf_retime.retime(item, impl, run.points.checks.get(check_id), reset_inputs, charge_damage)

    @contextlib.contextmanager
    def calling():
        if isinstance(impl, IsolatedImpl):
            # An earlier test's damage is charged to it here, so no later test's own crash can hide it
            # (cheap: no garbage collection).
            fault = memory_safety.probe(impl, collect=False)
            if fault is not None:
                charge(fault, memory_safety.probed_before(item.nodeid))
            impl.current_test = (item.nodeid, check_id)
        try:
            yield types.SimpleNamespace(after_death=rerun, retime=retime)
        finally:
            if isinstance(impl, IsolatedImpl):
                impl.current_test = None

    return calling()


def _hint_circumstances(item):
    """Hints judge by this machine and the code of the module the test's check belongs to (grader.hints)."""
    import contextlib

    from grader.worker.modules import ModuleMissing

    impl, check_id = getattr(item, "funcargs", {}).get("impl"), _check_id(item)
    if impl is None or check_id is None:
        return contextlib.nullcontext()
    try:
        source = impl.source(check_id.split(".")[0])
    except (ModuleMissing, AttributeError):
        source = None
    return hints.circumstances(item.config.stash[GRADING_RUN].policy.on_gpu, source)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    """Fixtures put inputs and references on the GPU too, set up or torn down: never while a neighbour's
    perf check times. Before they do, the blocks the previous test freed go back to the driver."""
    from grader.perf import gpu_lock

    with gpu_lock.shared():
        _return_cached_gpu_memory()
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    from grader.perf import gpu_lock

    with gpu_lock.shared():
        return (yield)


def _return_cached_gpu_memory():
    """torch keeps what a test freed cached for its own process, where the other checking runs and
    workers sharing the GPU cannot use it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


# --- outcomes ------------------------------------------------------------------------------------


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    check_id = _check_id(item)
    if check_id is None:
        return report
    outcome, message = _classify(item, call, report)
    if outcome == results.NOT_RUN_HERE and report.failed:   # a limit of this machine, not a failure
        report.outcome, report.longrepr = "skipped", (str(item.path), item.location[1] or 0, message)
    elif outcome == results.NOT_IMPLEMENTED and report.failed:
        report.longrepr = f"not implemented: {message}"
    elif outcome == results.FAILED and call.excinfo is not None and _from_the_worker(call.excinfo.value):
        # what the student needs is the test's line and their own frames, not the checker's plumbing
        report.longrepr = message
    if outcome == results.FAILED:
        hint = device_hint(message, item.config.stash[GRADING_RUN].policy.on_gpu)
        if hint:
            message = f"{message}\n{hint}"
            report.longrepr = f"{report.longreprtext}\n{hint}"
    if report.when == "call" or (report.when == "setup" and not report.passed):
        perf = dict(item.user_properties).get("perf")
        record = results.TestRecord(item.nodeid, check_id, outcome, message, round(report.duration, 4), perf)
        item.config.stash[GRADING_RUN].record(record)
    return report


def _classify(item, call, report) -> tuple[str, str]:
    from grader.impl import StudentCodeError

    if report.skipped:
        return results.NOT_RUN_HERE, _skip_reason(report)
    if report.passed:
        return results.PASSED, ""
    error = call.excinfo.value if call.excinfo else None
    limit = _interpreter_limit(item, error) if report.when == "call" else None
    if limit is not None:
        return results.NOT_RUN_HERE, limit
    not_implemented = not_implemented_cause(error)
    if not_implemented is not None:
        return results.NOT_IMPLEMENTED, str(not_implemented) or "raised NotImplementedError"
    if isinstance(error, StudentCodeError):
        impl = item.funcargs.get("impl")
        frames = student_frames(error.traceback_text, impl.spec.directory) if impl is not None else ""
        return results.FAILED, f"{_test_line(item, call)}your code raised {error}" + (f"\n{frames}" if frames else "")
    if _from_the_worker(error):
        return results.FAILED, f"{_test_line(item, call)}{error}"
    if report.when == "call" and (isinstance(error, AssertionError) or _raised_in_student_code(item, call)):
        return results.FAILED, _short(report)
    if report.when == "call" and _is_failure(call):
        return results.FAILED, _short(report)
    judged = _judging_what_it_returned(item, call, error) if report.when == "call" else None
    if judged is not None:
        return results.FAILED, judged
    return results.HARNESS_ERROR, _short(report)


def _judging_what_it_returned(item, call, error) -> str | None:
    """The message when the checker raised while judging a value the student's code returned: a value
    it could not judge is the student's failure (grader.returned_values), never a withheld grade."""
    from grader.returned_values import describe

    returned = getattr(item.funcargs.get("impl"), "returned", None)
    if returned is None or error is None:
        return None
    test_folder = os.path.dirname(os.path.realpath(str(item.path))) + os.sep
    try:
        found, value = returned.culprit(call.excinfo.tb, (test_folder,))
        if not found:
            return None
        text = " ".join(str(error).split())[:300]
    except Exception:  # noqa: BLE001 - classifying must never crash the run: undecided stays a harness error
        return None
    return (f"{_test_line(item, call)}the checker could not judge what your code returned, "
            f"{describe(value)}: {type(error).__name__}: {text}\nCheck the type and shape your function returns "
            "against its docstring.")


def _interpreter_limit(item, error) -> str | None:
    """The not-run-here reason when, under Triton's interpreter, the call hit an operation it lacks."""
    from grader.impl import StudentCodeError

    if error is None or not item.config.stash[GRADING_RUN].policy.interpreter:
        return None
    if isinstance(error, StudentCodeError):
        what, detail = interpreter_limit(error.type_name, error.message), f"{error.type_name}: {error.message}"
    else:
        what, detail = limit_in_chain(error), f"{type(error).__name__}: {error}"
    return not_run_reason(what, detail) if what else None


def _from_the_worker(error) -> bool:
    """Errors the impl raises on the student's behalf: their text is the whole story."""
    from grader.impl import RuleViolation, StudentCodeError, WorkerLost

    return isinstance(error, (StudentCodeError, RuleViolation, WorkerLost))


def _test_line(item, call) -> str:
    """'tests_public/test_x.py:12: out = impl.m.f(x)\n', the test's line that made the call."""
    test_file = os.path.realpath(str(item.path))
    for entry in reversed(call.excinfo.traceback):
        if os.path.realpath(str(entry.path)) == test_file:
            try:
                source = str(entry.statement).strip().splitlines()[0]
            except Exception:  # noqa: BLE001 - no source at hand: the location alone still helps
                source = ""
            return f"{item.path.name}:{entry.lineno + 1}: {source}\n"
    return ""


def _is_failure(call) -> bool:
    """pytest.fail() and the channel's refusals are failures of the submission, not of the harness."""
    from grader.worker.channel import ChannelError

    return call.excinfo.errisinstance((pytest.fail.Exception, ChannelError))


def _raised_in_student_code(item, call) -> bool:
    impl = item.funcargs.get("impl") if hasattr(item, "funcargs") else None
    if impl is None or call.excinfo is None:
        return False
    folder = os.path.realpath(impl.spec.directory)
    return any(os.path.realpath(str(entry.path)).startswith(folder) for entry in call.excinfo.traceback)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def _short(report, limit: int = 3000) -> str:
    text = report.longreprtext or ""
    return text if len(text) <= limit else text[: limit // 3] + "\n...\n" + text[-2 * limit // 3:]


# --- the run's state: one registered object, as junitxml's LogXML ----------------------------------------


class GradingRun:
    """What one pytest run of the suites holds: where it runs, the points, the implementation's worker,
    every test's record and the results stream. Registered as a plugin for the end-of-run hooks."""

    def __init__(self, policy, points, impl_name: str, worker=None):
        self.policy, self.points, self.impl_name, self.worker = policy, points, impl_name, worker
        self.records: list[results.TestRecord] = []
        self.amended: list[results.TestRecord] = []   # failed after they reported (charge_memory_fault)
        self.earlier: list[results.TestRecord] = []   # --resume-from: what the run that died reported
        self.died_in: str | None = None                # --resume-from: the test it died in
        self.stream = None

    def open_stream(self, path: str, graded: list[tuple[str, str]], not_run_here: list[str] = ()) -> None:
        self.stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed at session end
        checks = sorted({check for _, check in graded})
        self.stream.write(results.header_line(self.impl_name, self.policy.device, _environment(self.policy),
                                              checks, graded, not_run_here) + "\n")
        self.stream.flush()

    def record(self, record: results.TestRecord) -> None:
        self.records.append(record)
        if self.stream is not None:
            self.stream.write(results.record_line(record) + "\n")
            self.stream.flush()

    def charge_memory_fault(self, lost, where: str, current: str | None = None) -> None:
        """Charge a worker's death to the student call it served before (grader.memory_safety): fail that
        call's test, the running one by raising, an earlier one by amending its record."""
        from grader.impl import WorkerLost

        test = lost.previous_call[1] if lost.previous_call else None
        if test is None:
            return   # a fresh worker's first call, or a call outside any test: nobody else to charge
        message = memory_safety.charge_message(lost, memory_safety.SAME_TEST if test[0] == current else where)
        if test[0] == current:
            raise WorkerLost(message)
        record = next((r for r in reversed(self.records) if r.nodeid == test[0]), None)
        if record is None or record.outcome in (results.NOT_IMPLEMENTED, results.NOT_RUN_HERE):
            return   # a stub ran no kernel, and a limit of this machine is never the student's charge
        record.outcome, record.message = results.FAILED, results.amended_message(message, record.message)
        self.amended.append(record)
        if self.stream is not None:
            self.stream.write(results.amend_line(record.nodeid, message) + "\n")
            self.stream.flush()

    def pytest_sessionfinish(self, session):
        if self.amended and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.worker is not None:
            self.worker.close()  # also when no test asked for it (everything deselected or skipped)
        if self.stream is not None:
            from grader.perf import gpu_lock

            lock_summary = gpu_lock.current().summary()
            if lock_summary is not None:
                self.stream.write(results.gpu_lock_line(lock_summary) + "\n")
            self.stream.write(results.END_LINE + "\n")
            self.stream.close()
            self.stream = None

    def pytest_terminal_summary(self, terminalreporter, config):
        if self.died_in or self.earlier:
            from grader.local_run import write_earlier_run

            write_earlier_run(terminalreporter, self.earlier, self.died_in)
        if self.records:
            from grader.local_summary import write_summary

            breakdown = config.getoption("--checks") or config.getoption("verbose") > 0
            write_summary(terminalreporter, self.points, self.records, self.impl_name, breakdown=breakdown,
                          code_folder=_student_code_folder(self.impl_name))
            _write_refused_imports(terminalreporter, self.impl_name)
        for record in self.amended:
            terminalreporter.write_line(f"FAILED AFTER IT RAN {record.nodeid}: {record.message}", red=True)
        _write_gpu_lock_totals(terminalreporter)


def _write_refused_imports(terminalreporter, impl_name: str) -> None:
    """Name the imports outside the allowed list: they are placeholders, and any use of them raises."""
    from grader.worker.allowed_imports import ALLOWED_TEXT, refused_imports
    from grader.worker.modules import MODULES, resolve

    try:
        spec = resolve(impl_name)
    except FileNotFoundError:
        return
    found = []
    for module in MODULES:
        path = Path(spec.directory) / f"{module}.py"
        names = refused_imports(path.read_text(errors="replace"), (spec.package,)) if path.is_file() else []
        found += [f"{module}.py imports {', '.join(names)}"] if names else []
    if found:
        terminalreporter.write_line(f"Imports outside the allowed list ({ALLOWED_TEXT}): " + "; ".join(found)
                                    + ". They are placeholders here and when graded: annotations may name them, "
                                    "any other use raises", yellow=True)


def _write_gpu_lock_totals(terminalreporter) -> None:
    """On a GPU shared with other submissions: what waiting for it cost, and what compiles lent out."""
    from grader.perf import gpu_lock

    totals = gpu_lock.current().totals
    if totals is not None:
        terminalreporter.write_line(f"GPU lock: waited {totals.waited_s:.1f} s in all, {totals.waited_alone_s:.1f} s "
                                    f"of it for the GPU alone ({totals.takes_alone} times); held alone "
                                    f"{totals.alone_s:.1f} s; lent to other submissions during "
                                    f"{totals.lends} of {totals.compiles} compiles ({totals.lent_s:.1f} s)")


def _student_code_folder(impl_name: str) -> Path | None:
    """The folder of student code the run used (None for the reference solutions or an unknown name)."""
    from grader.worker.modules import SUBMISSION_PACKAGE, resolve

    try:
        spec = resolve(impl_name)
    except FileNotFoundError:
        return None
    return Path(spec.directory) if spec.package == SUBMISSION_PACKAGE else None
