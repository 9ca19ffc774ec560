"""The implementation under test, behind one API in two modes.

`resolve(name_or_path)` says where the modules are: the `assignment` or `solutions` package of this
repo, or a submission folder holding the module files flat or under `assignment/`. `Modules` imports
them (only allow-listed names). Tests get an `Impl`:
- `InProcessImpl` imports the student's modules into the test process (a student's local `make test`:
  prints and breakpoints work);
- `IsolatedImpl` imports nothing: every call crosses to a worker process (`grader.worker`) and comes
  back as plain, checker-owned values (`grader.channel`). Grading always uses it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

from grader import gpu_lock

MODULES = ("accounting", "mixed_precision", "softmax", "matmul", "flash_attention")
REPO_ROOT = Path(__file__).resolve().parent.parent
SUBMISSION_PACKAGE = "assignment"   # a submission folder is imported under the name students use
DEFAULT_CALL_TIMEOUT = float(os.environ.get("GRADER_CALL_TIMEOUT", "300"))
STARTUP_TIMEOUT = 120.0
HIDDEN_SUITE_DIR = "tests_hidden"   # graded runs empty it before student code runs (grader.disposable)
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

    `timed_out` is True when the call hung (no reply within the per-call timeout)."""

    timed_out = False


class ModuleMissing(NotImplementedError):
    """The submission has no file for this module: counts as not implemented."""


@dataclass(frozen=True)
class ImplSpec:
    label: str            # what the user asked for, for reports
    package: str          # import name: "assignment", "solutions", or SUBMISSION_PACKAGE for a folder
    directory: str        # the folder holding <module>.py files

    @property
    def is_folder(self) -> bool:
        return self.package == SUBMISSION_PACKAGE and Path(self.directory) != REPO_ROOT / "assignment"


def resolve(name_or_path: str) -> ImplSpec:
    """Find the modules for `assignment`, `solutions`, or a submission folder (flat or assignment/)."""
    if name_or_path in ("assignment", "solutions"):
        return ImplSpec(name_or_path, name_or_path, str(REPO_ROOT / name_or_path))
    folder = Path(name_or_path).expanduser().resolve()
    if not folder.is_dir():
        raise FileNotFoundError(f"--impl {name_or_path!r}: not 'assignment', 'solutions' or a folder")
    if (folder / "assignment").is_dir():
        folder = folder / "assignment"
    if not any((folder / f"{module}.py").is_file() for module in MODULES):
        raise FileNotFoundError(f"--impl {name_or_path!r}: no module files ({', '.join(MODULES)}) "
                                "flat or under assignment/")
    return ImplSpec(name_or_path, SUBMISSION_PACKAGE, str(folder))


class Modules:
    """Imports the implementation's modules on first use; `modules.softmax` is the module."""

    def __init__(self, spec: ImplSpec):
        self.spec = spec
        self._package = None

    def load(self, name: str) -> types.ModuleType:
        if name not in MODULES:
            raise AttributeError(f"{name!r} is not one of the assignment modules {MODULES}")
        if not (Path(self.spec.directory) / f"{name}.py").is_file():
            raise ModuleMissing(f"{name}.py is missing from the submission")
        self._ensure_package()
        return importlib.import_module(f"{self.spec.package}.{name}")

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "spec":
            raise AttributeError(name)
        return self.load(name)

    def _ensure_package(self) -> None:
        if self._package is not None:
            return
        if self.spec.is_folder:
            # A fresh package object whose path is the submission folder, under the name students use.
            package = types.ModuleType(SUBMISSION_PACKAGE)
            package.__path__ = [self.spec.directory]
            package.__file__ = None
            sys.modules[SUBMISSION_PACKAGE] = package
            self._package = package
        else:
            if str(REPO_ROOT) not in sys.path:
                sys.path.insert(0, str(REPO_ROOT))
            self._package = importlib.import_module(self.spec.package)


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
            return self._request("call", (module, function), args, kwargs)

    def run(self, fn, *args, **kwargs):
        """Run the harness function `fn(modules, *args, **kwargs)` where the student's code lives."""
        __tracebackhide__ = True  # noqa: F841
        _refuse_hidden_test_function(fn)
        if self._rules.scan:
            self._scan(self._rules.scan)
        with gpu_lock.shared():
            return self._request("run", fn, args, kwargs)

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
        try:
            findings = forbidden_calls(self.source(module), list(entries), self._rules.forbid, math_ops,
                                       siblings={m: text for m, text in self._sources.items() if text}, module=module)
        except SyntaxError:
            return  # the import fails in the worker and reports it
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
        from grader.worker import _execute

        rules = (self._rules.forbid, self._rules.require_triton)
        result, claims = _execute(self.modules, kind, target, args, kwargs, rules)
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
        self._conn = None
        self._ready = False
        self._hung: set[str] = set()   # functions that hung once: not called again (issue 15)

    def _request(self, kind, target, args, kwargs):
        __tracebackhide__ = True  # noqa: F841
        from grader import channel

        name = _called_name(kind, target, args)
        if name in self._hung:
            # Waiting out the timeout again would spend the submission's budget on a known hang.
            raise WorkerLost(f"{name} hung earlier in this run (no reply within {self.call_timeout:g} s), so it is "
                             "not called again; the other functions are still graded")
        conn = self._connection()
        rules = (self._rules.forbid, self._rules.require_triton)
        # Clones: the worker maps what it receives, so it must never see the checker's own tensors.
        conn.send((kind, target, _clone_tensors(args), _clone_tensors(kwargs), rules))
        try:
            data = self._receive(self.call_timeout, "your code did not return")
        except WorkerLost as lost:
            if lost.timed_out:
                self._hung.add(name)
            raise
        try:
            return self._unpack(channel.load_reply(data), channel)
        except channel.ChannelError:
            self._kill()  # the channel may be out of step now: the next call gets a fresh worker
            raise

    def _receive(self, timeout: float, what: str) -> bytes:
        """One whole reply within `timeout` seconds, or the worker is stopped (a stalled frame too)."""
        import threading

        box = {}

        def read():
            try:
                box["data"] = self._conn.recv_bytes()
            except BaseException as error:  # noqa: BLE001 - EOF or a broken pipe: the worker is gone
                box["error"] = error

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self._kill()  # ends the blocked read with EOF
            reader.join(5)
            lost = WorkerLost(f"{what} within {timeout:g} s (stopped)")
            lost.timed_out = True
            raise lost
        if "error" in box:
            code = self._kill()
            raise WorkerLost(f"the process running your code died (exit code {code})")
        return box["data"]

    def _unpack(self, reply, channel):
        __tracebackhide__ = True  # noqa: F841
        if not isinstance(reply, tuple) or not reply:
            raise channel.ChannelError("malformed reply from the worker")
        status = reply[0]
        if status == "ok" and len(reply) == 3:
            result = channel.validate(reply[1])
            self._enforce(channel.validate(reply[2]) if isinstance(reply[2], dict) else {})
            return result
        if status == "not_implemented":
            raise NotImplementedError(str(reply[1]))
        if status == "error" and len(reply) == 5:
            message = str(reply[2])
            if reply[4] is True:   # the worker's CUDA context is broken; it exits after this reply
                self._kill()
                message += CUDA_CONTEXT_LOST
            raise StudentCodeError(str(reply[1]), message, str(reply[3]))
        raise channel.ChannelError(f"malformed reply from the worker (status {status!r})")

    @property
    def worker_pid(self) -> int | None:
        """The worker's pid, for grader.timing to pause it while the checker times baselines."""
        process = self._process
        return process.pid if process is not None and process.is_alive() else None

    def start(self) -> None:
        """Spawn the worker now, so it imports torch while the checker is still collecting tests."""
        if self._process is None:
            self._spawn()

    def _connection(self):
        if self._process is None or not self._process.is_alive():
            self._kill()
            self._spawn()
        if not self._ready:
            # Start-up (importing torch and Triton) is not the student's time: wait for "ready" apart.
            import torch.multiprocessing  # noqa: F401 - registers how tensors cross the pipe (shared memory)

            from grader import channel

            if channel.load_reply(self._receive(STARTUP_TIMEOUT, "the worker did not start")) != ("ready",):
                self._kill()
                raise channel.ChannelError("the worker did not start cleanly")
            self._ready = True
        return self._conn

    def _spawn(self) -> None:
        import multiprocessing  # not torch's: spawning must not wait for this process to import torch

        from grader import worker

        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=worker.serve, daemon=True,
                                        args=(child_conn, self.spec, self.extra_sys_path, self.scratch))
        self._process.start()
        child_conn.close()
        self._ready = False

    def _kill(self):
        process, self._process = self._process, None
        if process is None:
            return None
        process.kill()
        process.join(5)
        return process.exitcode

    def close(self) -> None:
        self._kill()  # nothing in the worker is worth a graceful exit; tearing down torch costs ~0.5 s


def _called_name(kind, target, args) -> str:
    """The student function a request reaches: module.function, or a scenario with the names it is given."""
    if kind == "call":
        return ".".join(target)
    names = [arg for arg in args if isinstance(arg, str)]
    return f"{getattr(target, '__qualname__', target)}({', '.join(names)})"


def _read_sources(directory: str) -> dict[str, str | None]:
    paths = {module: Path(directory) / f"{module}.py" for module in MODULES}
    return {module: path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
            for module, path in paths.items()}


def _refuse_hidden_test_function(fn) -> None:
    """The worker imports `fn`'s module; a hidden test module must stay unreadable to student code."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    if HIDDEN_SUITE_DIR in Path(getattr(module, "__file__", None) or "").parts:
        raise TypeError(f"impl.run({getattr(fn, '__qualname__', fn)!r}): a function of a hidden test module "
                        "cannot run in the worker; move it to grader/scenarios/")


def _clone_tensors(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_clone_tensors(item) for item in value)
    if isinstance(value, dict):
        return {key: _clone_tensors(item) for key, item in value.items()}
    return value


def make_impl(name_or_path: str, *, isolated: bool, extra_sys_path=(), scratch=None) -> Impl:
    spec = resolve(name_or_path)
    if isolated:
        return IsolatedImpl(spec, extra_sys_path=extra_sys_path, scratch=scratch)
    return InProcessImpl(spec)
