"""The worker: the only process that imports and runs the student's code.

The checker starts it as a plain subprocess (`launch_argv`) holding three descriptors: its end of a
socket pair, and the two memory files tensors cross in (grader.worker.shared_tensors). It inherits no key
and no listener of the checker's. It serves requests over the socket: call a module function, or
run a harness function next to the student modules (`run`), each under the guards the checker asked
for (grader.worker.guarded_call). Replies are JSON messages (grader.worker.channel); nothing the worker says is
trusted beyond what the checker can verify.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import traceback
from pathlib import Path

from grader.errors import not_implemented_cause

MAX_TRACEBACK = 4000
MEMORY_ENV = "GRADER_WORKER_MEMORY_MB"   # set by the runner; unset (a student's make test): no cap
_LAUNCHER = "import sys; sys.path.insert(0, sys.argv[1]); from grader.worker.process import serve; serve(*sys.argv[2:])"


def launch_argv(channel_fd: int, arguments_fd: int, replies_fd: int) -> list[str]:
    """The worker's command line: the grader's own folder first, so it is this grader that runs."""
    grader_root = str(Path(__file__).resolve().parents[2])
    return [sys.executable, "-c", _LAUNCHER, grader_root, str(channel_fd), str(arguments_fd), str(replies_fd)]


def serve(channel_fd, arguments_fd, replies_fd) -> None:
    """Entry point of the worker process."""
    limit_memory(int(os.environ.get(MEMORY_ENV) or 0))
    from grader import devices
    from grader.worker import channel

    sock = socket.socket(fileno=int(channel_fd))
    import pickle

    setup = pickle.loads(channel.recv_frame(sock))   # from the checker: trusted
    devices.configure()
    import torch  # noqa: F401 - imported before "ready": start-up is not the student's time

    from grader.perf import in_worker

    in_worker.capture_device_sync()  # torch's own synchronize, kept before student code can rebind it
    from grader.worker.entry_points import EntryPoints

    entry_points = EntryPoints()     # what impl.run may run, recorded before student code can swap it
    if setup.cuda_context:           # the checker reads the driver's figure for the context alone at "ready"
        open_cuda_context()

    from grader.worker.compile_notices import CompileNotices
    from grader.worker.modules import Modules
    from grader.worker.shared_tensors import WorkerTransport

    sys.path[:0] = [p for p in setup.extra_sys_path if p not in sys.path]
    _drop_grader_root()
    if setup.scratch:
        os.makedirs(setup.scratch, exist_ok=True)
        os.chdir(setup.scratch)
    modules = Modules(setup.spec)
    transport = WorkerTransport(int(arguments_fd), int(replies_fd))
    notices = CompileNotices(sock, transport)
    if setup.compile_notices:
        notices.install()
    channel.send_frame(sock, channel.dump_reply("ready"))
    while True:
        try:
            request = transport.load_request(channel.recv_frame(sock))
        except (EOFError, OSError):
            return  # the checker is done (it kills this process) or gone
        notices.new_request()
        if _answer(sock, transport, modules, request, entry_points):
            return  # this process cannot run CUDA any more: the checker starts a fresh worker


def open_cuda_context() -> None:
    """This process's CUDA context, opened now (a no-op without CUDA). The worker opens it before any
    student code runs when the checker asks (grader.perf.worker_memory's baseline)."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()   # the runtime creates the device's primary context on this first call


def _drop_grader_root() -> None:
    """Take the folder holding `grader/` off the import path, and the working folder (the launcher's
    ""): they hold the test suites, which the worker must not import. `grader` is imported already, and
    finds its own modules through its __path__; the student's package is found by its own path."""
    root = Path(__file__).resolve().parents[2]
    sys.path[:] = [entry for entry in sys.path if entry and Path(entry).resolve() != root]


def limit_memory(megabytes: int) -> None:
    """Cap this process's private writable memory (RLIMIT_DATA), so a runaway allocation is the
    submission's MemoryError rather than the node's out-of-memory killer. CUDA's address-space
    reservations do not count, its host allocations do: the runner's default leaves room for them."""
    if megabytes > 0:
        import resource

        limit = megabytes * 2**20
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _answer(sock, transport, modules, request, entry_points=None) -> bool:
    """Run one request and send its reply; True when this worker's CUDA context is broken."""
    from grader.worker import channel
    from grader.worker.guarded_call import execute

    try:
        result, claims = execute(modules, request.kind, request.target, request.args, request.kwargs,
                                 (request.forbid, request.require_triton), entry_points)
    except BaseException as error:  # noqa: BLE001 - anything the student's code raised, SystemExit included
        stub = not_implemented_cause(error)
        if stub is not None:  # also a stub kernel under Triton's interpreter, which wraps it
            channel.send_frame(sock, channel.dump_reply("not_done", message=str(stub),
                                                        traceback=_tail(traceback.format_exc())))
            return False
        broken = _cuda_broken()
        message = str(error)[:2000] + _memory_cap_note(f"{type(error).__name__}: {error}")
        channel.send_frame(sock, channel.dump_reply("failed", type_name=type(error).__name__, message=message,
                                                    traceback=_tail(traceback.format_exc()),
                                                    cuda_broken=broken))
        return broken
    _deliver(sock, transport, result, claims)
    return False


def _deliver(sock, transport, result, claims) -> None:
    """The result's tensors into buffers the checker allocates on request, then the value as JSON."""
    from grader.worker import channel

    tensors: list = []
    try:
        value = channel.encode_value(result, tensors)
    except channel.ChannelError as error:
        channel.send_frame(sock, channel.dump_reply("refused", message=str(error)))
        return
    if tensors:
        channel.send_frame(sock, channel.dump_reply("need_buffers", wanted=transport.wanted(tensors)))
        answer = transport.load_request(channel.recv_frame(sock))
        transport.fill(answer.placements, tensors)
    channel.send_frame(sock, channel.dump_reply("ok", value=value, launches=int(claims["launches"]),
                                                forbidden=[str(name) for name in claims["forbidden"]]))


def _memory_cap_note(text: str) -> str:
    """Under the runner's cap an allocation failure may be the cap, not the machine: say so."""
    megabytes = int(os.environ.get(MEMORY_ENV) or 0)
    if megabytes and re.search(r"MemoryError|out of memory|can't allocate memory|bad_alloc", text):
        return (f" (when graded, the process running your code may use at most {megabytes} MiB of host "
                "memory, CUDA's own host allocations included)")
    return ""


def _cuda_broken() -> bool:
    """After a CUDA fault (illegal address, launch failure) every later CUDA call in this process
    fails with the same error: only a new process gets a working context."""
    from grader.worker.guarded_call import synchronize

    try:
        synchronize()
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True
    return False


def _tail(text: str) -> str:
    return text if len(text) <= MAX_TRACEBACK else "...\n" + text[-MAX_TRACEBACK:]
