"""The implementation under test, behind one API in two modes.

`resolve(name_or_path)` (grader.worker.modules) says where the modules are. Tests get an `Impl`:
- `InProcessImpl` imports the student's modules into the test process (a student's local `make test`:
  prints and breakpoints work);
- `IsolatedImpl` imports nothing: every call crosses to a worker process (`grader.worker.process`) and comes
  back as plain, checker-owned values (`grader.worker.channel`, `grader.worker.shared_tensors`). Grading always
  uses it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from grader.perf import gpu_lock
from grader.returned_values import ReturnedValues, caller_outside
from grader.worker.modules import MODULES, SUBMISSION_PACKAGE, ImplSpec, ModuleMissing, Modules, resolve

DEFAULT_CALL_TIMEOUT = float(os.environ.get("GRADER_CALL_TIMEOUT", "300"))
STARTUP_TIMEOUT = 120.0
HIDDEN_SUITE_DIR = "tests_hidden"   # graded runs empty it before student code runs (grader.disposable)
# Workers start with the environment as it was when this module was imported, before any test ran:
# pytest sets PYTEST_CURRENT_TEST to the running test's node id, and a worker respawned during a hidden
# test would read the hidden test's name there. No PYTEST_* variable is anything student code needs.
WORKER_ENV = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
CUDA_CONTEXT_LOST = (" (this fault broke the CUDA context of the process running your code, typically a "
                     "load or store outside a tensor: check the kernel's masks; later checks get a fresh process)")


class StudentCodeError(Exception):
    """The student's code raised; carries the original type name, message and traceback text."""

    def __init__(self, type_name: str, message: str, traceback_text: str = ""):
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.traceback_text = traceback_text


class RuleViolation(AssertionError):
    """The call broke a rule of the check (forbidden op, no Triton launch): a failed test."""


class WorkerLost(AssertionError):
    """The worker died or hung during this call: the test fails, the next one gets a fresh worker.

    `timed_out` is True when the call hung (no reply within the per-call timeout). `previous_call` is the
    call the same worker served before this one, as (function, test): a death may be the delayed effect
    of that call's out-of-bounds store (grader.memory_safety)."""

    timed_out = False
    previous_call: tuple[str, tuple | None] | None = None


@dataclass
class _Rules:
    forbid: tuple[str, ...] = ()
    require_triton: bool = False
    scan: tuple[str, tuple[str, ...]] | None = None   # (module, entry names) to scan statically


class Impl:
    """Common API: `impl.<module>.<function>(...)`, `impl.run(fn, ...)`, `with impl.guards(...)`."""

    def __init__(self, spec: ImplSpec):
        self.spec = spec
        self._rules = _Rules()
        # The scan's copy, taken before any student code runs: the worker can rewrite the files later.
        self._sources = _read_sources(spec.directory)
        self._scanned: dict[tuple, list] = {}
        # What the student's code handed back this test: judging it may raise, which is their failure.
        self.returned = ReturnedValues()

    @contextlib.contextmanager
    def guards(self, forbid: tuple[str, ...] = (), require_triton: bool = False,
               scan: tuple[str, tuple[str, ...]] | None = None):
        """Calls inside the block must not use `forbid` ops and, if asked, must launch Triton.

        Forbidden ops are also looked for statically (grader.scan) from the called function, or from
        `scan=(module, (entry, ...))` for `impl.run` scenarios.
        """
        previous = self._rules
        self._rules = _Rules(tuple(forbid), require_triton, scan)
        try:
            yield self
        finally:
            self._rules = previous

    def __repr__(self) -> str:
        return "impl"

    def __getattr__(self, name: str):
        if name in MODULES:
            return _ModuleProxy(self, name)
        raise AttributeError(name)

    def call(self, module: str, function: str, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841
        self._scan(self._rules.scan or (module, (function,)))
        with gpu_lock.shared():    # other submissions on this GPU may run too, unless a perf check times
            return self._returning(self._request("call", (module, function), args, kwargs))

    def run(self, fn, *args, **kwargs):
        """Run the harness function `fn(modules, *args, **kwargs)` where the student's code lives."""
        __tracebackhide__ = True  # noqa: F841
        _refuse_unless_entry_point(fn)
        if self._rules.scan:
            self._scan(self._rules.scan)
        with gpu_lock.shared():
            return self._returning(self._request("run", fn, args, kwargs))

    def run_harness(self, fn, *args, **kwargs):
        """`run` for the harness's own housekeeping (say, handing cached GPU memory back), which calls no
        student code: the rules of `guards` are about the student's calls and do not apply to it."""
        __tracebackhide__ = True  # noqa: F841
        previous, self._rules = self._rules, _Rules()
        self._housekeeping = True   # not the student's call: a later death is never charged to it
        try:
            return self.run(fn, *args, **kwargs)
        finally:
            self._rules, self._housekeeping = previous, False

    def _returning(self, value):
        self.returned.record(value, caller_outside())
        return value

    def fresh_worker(self) -> None:
        """The next call runs in a new worker, which holds nothing an earlier call left in memory."""

    def start_fresh_worker(self, cuda_context: bool = False) -> int:
        """A new worker now, waiting for its first call, and its pid. In-process the test process is
        the worker: its pid, with its CUDA context opened when asked."""
        if cuda_context:
            from grader.worker.process import open_cuda_context

            open_cuda_context()
        return os.getpid()

    def source(self, module: str) -> str:
        """The submitted source of `module`, read as text (never imported here)."""
        if self._sources.get(module) is None:
            raise ModuleMissing(f"{module}.py is missing from the submission")
        return self._sources[module]

    def _scan(self, target) -> None:
        __tracebackhide__ = True  # noqa: F841
        if not self._rules.forbid:
            return
        from grader.guards import TENSOR_MATH_OPS
        from grader.scan import forbidden_calls

        module, entries = target
        math_ops = TENSOR_MATH_OPS if self._rules.require_triton else ()
        key = (module, tuple(entries), self._rules.forbid, self._rules.require_triton)
        if key not in self._scanned:   # the sources never change: one scan per entry and rules
            try:
                self._scanned[key] = forbidden_calls(
                    self.source(module), list(entries), self._rules.forbid, math_ops,
                    siblings={m: text for m, text in self._sources.items() if text}, module=module,
                    wrapper_only=self._rules.require_triton)
            except SyntaxError:
                self._scanned[key] = []   # the import fails in the worker and reports it
        findings = self._scanned[key]
        if findings:
            raise RuleViolation(f"{module}.py uses operations not allowed here (write them as Triton "
                                "kernels): " + "; ".join(str(finding) for finding in findings[:5]))

    def close(self) -> None:
        pass

    def _request(self, kind, target, args, kwargs):
        raise NotImplementedError

    def _enforce(self, claims: dict) -> None:
        __tracebackhide__ = True  # noqa: F841
        if claims.get("forbidden"):
            names = ", ".join(f"torch.{name}" for name in sorted(set(claims["forbidden"])))
            raise RuleViolation(f"your code called {names}, which is not allowed here: "
                                "write the computation as a Triton kernel")
        if self._rules.require_triton and claims.get("launches", 0) == 0:
            raise RuleViolation("no Triton kernel was launched: this function must run a Triton kernel")


class _ModuleProxy:
    def __init__(self, impl: Impl, module: str):
        self._impl = impl
        self._module = module

    def __repr__(self) -> str:
        return self._module  # assertion messages read "where softmax = impl.softmax"

    def __getattr__(self, function: str):
        if function.startswith("__"):
            raise AttributeError(function)
        return _StudentFunction(self._impl, self._module, function)


class _StudentFunction:
    """`impl.<module>.<function>`: calls through the impl; shows in assertion messages as `module.function`."""

    def __init__(self, impl: Impl, module: str, function: str):
        self._impl, self._module, self._function = impl, module, function

    def __call__(self, *args, **kwargs):
        __tracebackhide__ = True  # noqa: F841 - pytest hides harness frames from the student
        return self._impl.call(self._module, self._function, *args, **kwargs)

    def __repr__(self) -> str:
        return f"{self._module}.{self._function}"


class InProcessImpl(Impl):
    """Student code runs right here; the same guards apply, enforced locally."""

    def __init__(self, spec: ImplSpec):
        super().__init__(spec)
        self.modules = Modules(spec)

    def _request(self, kind, target, args, kwargs):
        __tracebackhide__ = True  # noqa: F841
        from grader.worker.guarded_call import execute

        rules = (self._rules.forbid, self._rules.require_triton)
        result, claims = execute(self.modules, kind, target, args, kwargs, rules)
        self._enforce(claims)
        return result


class IsolatedImpl(Impl):
    """Student code runs in a worker process; this process never imports it."""

    def __init__(self, spec: ImplSpec, extra_sys_path=(), scratch: str | None = None,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT):
        super().__init__(spec)
        self.extra_sys_path = list(extra_sys_path)
        self.scratch = scratch
        self.call_timeout = call_timeout
        self._process = None
        self._sock = None
        self._transport = None
        self._ready = False
        self._resting = False          # the worker's process group is stopped between calls
        self._notices_asked = False    # whether this worker was told to send compile notices
        self._hung: set[str] = set()   # functions that hung once: not called again, so one hang costs one function
        self.staging: str | None = None   # the staged copy make_impl ran the code from, removed at close
        # Which test is calling (set by the plugin), and the last student call this worker served, as
        # (function, test): grader.memory_safety charges a later death to it when the test that died
        # passes in a fresh worker.
        self.current_test: tuple[str, str] | None = None
        self.last_call: tuple[str, tuple | None] | None = None
        self._housekeeping = False

    def _request(self, kind, target, args, kwargs):
        __tracebackhide__ = True  # noqa: F841
        from grader.worker import channel

        name = _called_name(kind, target, args)
        if name in self._hung:
            # Waiting out the timeout again would spend the submission's budget on a known hang.
            raise WorkerLost(f"{name} hung earlier in this run (no reply within {self.call_timeout:g} s), so it is "
                             "not called again; the other functions are still graded")
        self._connection()
        previous = self.last_call
        if not self._housekeeping:
            self.last_call = (name, self.current_test)
        self._wake()
        deadline = time.monotonic() + self.call_timeout
        try:
            try:
                self._send(channel.Call(kind, target, args, kwargs, self._rules.forbid, self._rules.require_triton),
                           deadline)
                reply, deadline = self._past_compiles(self._next_reply(deadline), deadline)
                if isinstance(reply, channel.NeedBuffers):
                    self._send(channel.Buffers(self._transport.allocate(reply.wanted)), deadline)
                    reply = self._next_reply(deadline)
            except WorkerLost:
                raise
            except BaseException:
                # Left mid-exchange (a reply buffer the GPU had no memory for, a forged frame): the worker
                # may still wait for an answer, so the next call would be read as one. It gets a fresh worker.
                self._kill()
                raise
            return self._outcome(reply, channel)
        except WorkerLost as lost:
            if lost.timed_out:
                self._hung.add(name)
            else:
                lost.previous_call = previous
            raise
        finally:
            if self._transport is not None:
                self._transport.end_call()
            self.rest_worker()

    def fresh_worker(self) -> None:
        self._kill()

    def start_fresh_worker(self, cuda_context: bool = False) -> int:
        """A new worker, started now and ready, and its pid. It has run no student code yet (the student's
        modules are imported on the first call). With `cuda_context` it opened its CUDA context before
        saying it was ready, so what the driver reports for it now is that context alone
        (grader.perf.worker_memory's baseline)."""
        self._kill()
        self._spawn(cuda_context=cuda_context)
        self._connection()
        return self._process.pid

    def rest_worker(self) -> None:
        """Stop the worker's process group while no call is in flight: a thread its code left running
        cannot load the GPU during another submission's timing, nor this one's baselines."""
        process = self._process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGSTOP)
                self._resting = True

    def _wake(self) -> None:
        process = self._process
        if process is not None and self._resting:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGCONT)
        self._resting = False

    def _past_compiles(self, reply, deadline: float):
        """Serve the worker's compile notices until its reply: while it compiles, the GPU lock goes to
        the other submissions on this GPU (grader.worker.compile_notices). Waiting to get it back is not the
        student's time, so the call's deadline moves by that wait. Notices are taken only when the worker
        was told to send them, in their order (compiling, then compiled), and at most
        `channel.MAX_COMPILE_NOTICES` per call: each one moves the deadline, so a flood must not."""
        from grader.worker import channel

        lock, compiles = gpu_lock.current(), 0
        while isinstance(reply, (channel.Compiling, channel.Compiled)):
            compiles += 1
            refusal = ("the checker did not ask for them" if not self._notices_asked else
                       "'compiled' before 'compiling'" if isinstance(reply, channel.Compiled) else
                       f"more than {channel.MAX_COMPILE_NOTICES} in one call"
                       if compiles > channel.MAX_COMPILE_NOTICES else None)
            if refusal is None:
                reply, deadline = self._through_compile(lock, deadline)
                refusal = "two 'compiling' in a row" if isinstance(reply, channel.Compiling) else None
            if refusal is not None:
                raise channel.ChannelError(f"the process running your code sent a compile notice out of turn "
                                           f"({refusal}); only Triton's compile hooks may send them")
            if isinstance(reply, channel.Compiled):
                self._send(channel.Resume(), deadline)
                reply = self._next_reply(deadline)
        return reply, deadline

    def _through_compile(self, lock, deadline: float):
        """The reply that ends a compile the worker announced, and the call's deadline: the hold is kept
        for a compile over within gpu_lock.LEND_AFTER_S (a load from Triton's cache), set aside otherwise."""
        import select

        if select.select([self._sock], [], [], gpu_lock.LEND_AFTER_S)[0]:
            lock.kept_through_compile()
            return self._next_reply(deadline), deadline
        with lock.set_aside() as aside:
            reply = self._next_reply(deadline)
        return reply, deadline + aside.rewait_s

    def _send(self, message, deadline: float) -> None:
        """Send within the call's deadline: a worker that stops reading is a hung call, never a stalled
        checker."""
        from grader.worker import channel

        data = self._transport.dump_request(message)
        try:
            channel.send_frame(self._sock, data, timeout=max(0.001, deadline - time.monotonic()))
        except TimeoutError:
            self._kill()
            lost = WorkerLost(f"your code did not return within {self.call_timeout:g} s (it stopped reading "
                              "the checker's messages; stopped)")
            lost.timed_out = True
            raise lost from None
        except OSError:
            code = self._kill()
            raise WorkerLost(f"the process running your code died (exit code {code})") from None

    def _next_reply(self, deadline: float):
        from grader.worker import channel

        data = self._receive(max(0.0, deadline - time.monotonic()), "your code did not return",
                             self.call_timeout)
        return channel.read_reply(data, self._transport)

    def _receive(self, timeout: float, what: str, shown: float | None = None) -> bytes:
        """One whole reply within `timeout` seconds, or the worker is stopped (a stalled frame too)."""
        import threading

        from grader.worker import channel

        box = {}

        def read():
            try:
                box["data"] = channel.recv_frame(self._sock, channel.MAX_REPLY_FRAME)
            except BaseException as error:  # noqa: BLE001 - EOF, a broken pipe, an absurd frame
                box["error"] = error

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self._kill()  # ends the blocked read with EOF
            reader.join(5)
            lost = WorkerLost(f"{what} within {shown if shown is not None else timeout:g} s (stopped)")
            lost.timed_out = True
            raise lost
        if isinstance(box.get("error"), channel.ChannelError):
            raise box["error"]
        if "error" in box:
            code = self._kill()
            raise WorkerLost(f"the process running your code died (exit code {code})")
        return box["data"]

    def _outcome(self, reply, channel):
        __tracebackhide__ = True  # noqa: F841
        if isinstance(reply, channel.Ok):
            self._enforce({"launches": reply.launches, "forbidden": reply.forbidden})
            return reply.value
        if isinstance(reply, channel.NotDone):
            raise NotImplementedError(reply.message)
        if isinstance(reply, channel.Failed):
            message = reply.message
            if reply.cuda_broken:   # the worker's CUDA context is broken; it exits after this reply
                self._kill()
                message += CUDA_CONTEXT_LOST
            raise StudentCodeError(reply.type_name, message, reply.traceback)
        if isinstance(reply, channel.Refused):
            raise channel.ChannelError(reply.message)
        raise channel.ChannelError(f"malformed reply from the worker ({type(reply).__name__} out of turn)")

    @property
    def worker_pid(self) -> int | None:
        """The worker's pid, for grader.perf.measure to pause it while the checker times baselines."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def start(self) -> None:
        """Spawn the worker now, so it imports torch while the checker is still collecting tests."""
        if self._process is None:
            self._spawn()

    def _connection(self):
        if self._process is None or self._process.poll() is not None:
            self._kill()
            self._spawn()
        if not self._ready:
            # Start-up (importing torch and Triton) is not the student's time: wait for "ready" apart.
            from grader.worker import channel

            if not isinstance(channel.read_reply(self._receive(STARTUP_TIMEOUT, "the worker did not start")),
                              channel.Ready):
                self._kill()
                raise channel.ChannelError("the worker did not start cleanly")
            self._ready = True

    def _spawn(self, cuda_context: bool = False) -> None:
        """A plain subprocess with a socket pair: it inherits no key and reaches no listener of ours."""
        import pickle
        import socket
        import subprocess

        from grader.worker import channel
        from grader.worker import process as worker
        from grader.worker.shared_tensors import CheckerTransport

        if self._transport is None:
            self._transport = CheckerTransport()
        self._sock, child = socket.socketpair()
        fds = (child.fileno(), *self._transport.worker_fds())
        try:
            self._process = subprocess.Popen(worker.launch_argv(*fds), pass_fds=fds, stdin=subprocess.DEVNULL,
                                             env=dict(WORKER_ENV), **_OWN_PROCESS_GROUP)
        finally:
            child.close()
        self._notices_asked = gpu_lock.current().lends_compiles
        setup = channel.Setup(self.spec, tuple(self.extra_sys_path), self.scratch,
                              compile_notices=self._notices_asked, cuda_context=cuda_context)
        channel.send_frame(self._sock, pickle.dumps(setup), timeout=STARTUP_TIMEOUT)
        self._ready, self._resting = False, False
        self.last_call = None   # a fresh process: nothing earlier can have corrupted its memory

    def _kill(self):
        process, self._process = self._process, None
        if process is None:
            return None
        process.kill()
        try:
            process.wait(5)
        except Exception:  # noqa: BLE001 - unkillable (uninterruptible sleep): leave it to the runner
            pass
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        return process.returncode

    def close(self) -> None:
        self._kill()  # nothing in the worker is worth a graceful exit; tearing down torch costs ~0.5 s
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        if self.staging is not None:
            import shutil

            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None


# The worker leads a process group of its own (in the checker's session, which the runner kills whole),
# so that one signal stops all of it between calls.
_OWN_PROCESS_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}


def _called_name(kind, target, args) -> str:
    """The student function a request reaches: module.function, or a scenario with the names it is given."""
    if kind == "call":
        return ".".join(target)
    names = [arg for arg in args if isinstance(arg, str)]
    return f"{getattr(target, '__qualname__', target)}({', '.join(names)})"


def _read_sources(directory: str) -> dict[str, str | None]:
    """The five modules (None when missing) and the helper modules that count beside them, as text."""
    from grader import submission_files

    helpers = submission_files.count_folder(Path(directory)).helpers if Path(directory).is_dir() else {}
    paths = {module: Path(directory) / f"{module}.py" for module in (*MODULES, *helpers)}
    return {module: path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
            for module, path in paths.items()}


def _refuse_unless_entry_point(fn) -> None:
    """Only the harness's own scenario functions run in the worker (grader.worker.entry_points): never a
    function of a test module, which the worker would have to import, and whose results it could forge."""
    from grader.worker.entry_points import MODULES, is_entry_point

    if not is_entry_point(fn):
        where = "a hidden test module" if HIDDEN_SUITE_DIR in Path(
            getattr(sys.modules.get(getattr(fn, "__module__", None) or ""), "__file__", None) or "").parts \
            else f"module {getattr(fn, '__module__', None)!r}"
        raise TypeError(f"impl.run({getattr(fn, '__qualname__', fn)!r}): a function of {where} cannot run in the "
                        f"worker; only module-level functions of {', '.join(MODULES)} can")


def make_impl(name_or_path: str, *, isolated: bool, extra_sys_path=(), scratch=None) -> Impl:
    """The implementation `name_or_path` names. Isolated, student code runs from a staged copy of what
    counts (grader.submission_files), as when it is graded: a file that is not graded is not there."""
    spec = resolve(name_or_path)
    if not isolated:
        return InProcessImpl(spec)
    staging = None
    from grader import submission_files

    if spec.package == SUBMISSION_PACKAGE and not submission_files.is_staged(Path(spec.directory)):
        import tempfile

        staging = tempfile.mkdtemp(prefix="grader-staged-")
        submission_files.copy_counted(Path(spec.directory), Path(staging))
        spec = ImplSpec(spec.label, SUBMISSION_PACKAGE, str(Path(staging) / SUBMISSION_PACKAGE))
    built = IsolatedImpl(spec, extra_sys_path=extra_sys_path, scratch=scratch)
    built.staging = staging
    return built
