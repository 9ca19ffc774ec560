"""The worker: the only process that imports and runs the student's code.

It serves requests from the checker over a pipe: call a module function, or run a harness function
next to the student modules (`run`), each under the guards the checker asked for. Replies carry plain
values and tensors (shared memory / CUDA IPC); the checker admits them through `grader.channel`.
Nothing the worker says is trusted beyond what the checker can verify.
"""

from __future__ import annotations

import os
import re
import sys
import traceback

from grader.errors import not_implemented_cause

MAX_TRACEBACK = 4000
MEMORY_ENV = "GRADER_WORKER_MEMORY_MB"   # set by the runner; unset (a student's make test): no cap


def serve(conn, impl_spec, extra_sys_path, scratch) -> None:
    """Entry point of the spawned worker process."""
    limit_memory(int(os.environ.get(MEMORY_ENV) or 0))
    from grader import devices

    devices.configure()
    import torch.multiprocessing  # noqa: F401 - replies carry tensors through shared memory / CUDA IPC

    from grader import timing

    timing.capture_device_sync()  # torch's own synchronize, kept before student code can rebind it
    # A worker respawned mid-run inherits the checker's sys.path, where pytest put the hidden suite.
    sys.path[:] = [p for p in sys.path if os.path.basename(os.path.normpath(p or ".")) != "tests_hidden"]
    sys.path[:0] = [p for p in extra_sys_path if p not in sys.path]
    if scratch:
        os.makedirs(scratch, exist_ok=True)
        os.chdir(scratch)
    from grader.impl import Modules

    modules = Modules(impl_spec)
    conn.send(("ready",))
    keep_alive = None  # the last reply's tensors: the checker maps their memory until it has cloned them
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the checker is done (it kills this process) or gone
        keep_alive = _answer(conn, modules, request)  # noqa: F841 - held until the next request
        if keep_alive[0] == "error" and keep_alive[4]:
            return  # this process cannot run CUDA any more: the checker starts a fresh worker


def limit_memory(megabytes: int) -> None:
    """Cap this process's private writable memory (RLIMIT_DATA), so a runaway allocation is the
    submission's MemoryError rather than the node's out-of-memory killer. CUDA's address-space
    reservations do not count, its host allocations do: the runner's default leaves room for them."""
    if megabytes > 0:
        import resource

        limit = megabytes * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _answer(conn, modules, request):
    kind, target, args, kwargs, rules = request
    try:
        result, claims = _execute(modules, kind, target, args, kwargs, rules)
        reply = ("ok", result, claims)
    except BaseException as error:  # anything the student's code raised, SystemExit included
        stub = not_implemented_cause(error)
        if stub is not None:  # also a stub kernel under Triton's interpreter, which wraps it
            return _send(conn, ("not_implemented", str(stub), _tail(traceback.format_exc())))
        message = str(error)[:2000] + _memory_cap_note(f"{type(error).__name__}: {error}")
        # The last field: this worker's CUDA context is gone, so it exits after the reply.
        reply = ("error", type(error).__name__, message, _tail(traceback.format_exc()), _cuda_broken())
    return _send(conn, reply)


def _send(conn, reply):
    try:
        conn.send(reply)
    except Exception as error:  # the result could not be sent (unpicklable object)
        reply = ("error", "UnsendableResult", f"{type(error).__name__}: {error}", "", _cuda_broken())
        conn.send(reply)
    return reply


def _execute(modules, kind, target, args, kwargs, rules):
    from grader.guards import count_triton_launches, forbid_ops, runtime_forbidden

    __tracebackhide__ = True  # noqa: F841 - in-process runs: pytest shows the student's frames only
    forbid, require_triton = rules
    result = None
    with count_triton_launches() as launches, forbid_ops(runtime_forbidden(forbid, require_triton)) as hits:
        try:
            if kind == "call":
                module_name, function_name = target
                result = getattr(modules.load(module_name), function_name)(*args, **kwargs)
            elif kind == "run":
                result = target(modules, *args, **kwargs)
            else:
                raise ValueError(f"unknown request kind {kind!r}")
            _synchronize()  # a kernel's fault (illegal address) surfaces here, as this call's error
        except BaseException:
            if not hits:
                raise
            # The forbidden op is the verdict, whatever the code did after the guard refused it.
    return result, {"launches": launches.count, "forbidden": list(hits)}


def _memory_cap_note(text: str) -> str:
    """Under the runner's cap an allocation failure may be the cap, not the machine: say so."""
    megabytes = int(os.environ.get(MEMORY_ENV) or 0)
    if megabytes and re.search(r"MemoryError|out of memory|can't allocate memory|bad_alloc", text):
        return (f" (when graded, the process running your code may use at most {megabytes} MiB of host "
                "memory, CUDA's own host allocations included)")
    return ""


def _synchronize() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _cuda_broken() -> bool:
    """After a CUDA fault (illegal address, launch failure) every later CUDA call in this process
    fails with the same error: only a new process gets a working context."""
    try:
        _synchronize()
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True
    return False


def _tail(text: str) -> str:
    return text if len(text) <= MAX_TRACEBACK else "...\n" + text[-MAX_TRACEBACK:]
