"""The implementation under test, in both modes: where modules are found, what errors look like,
and what the isolated worker guarantees (hangs and crashes contained, rules enforced, inputs
protected, replies admitted only as plain values, the checker never importing student code)."""

from __future__ import annotations

import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import torch

from grader.guards import MATMUL_OPS, ForbiddenOpError
from grader.impl import InProcessImpl, IsolatedImpl, RuleViolation, StudentCodeError
from grader.testing import raises_from_student
from grader.worker.channel import ChannelError
from grader.worker.modules import REPO_ROOT, ModuleMissing, resolve

FAKE_SOFTMAX = textwrap.dedent('''
    """A fake submission: one function per behaviour the harness must handle."""
    import os
    import struct
    import time

    import torch
    _hidden_matmul = torch.matmul  # scanned only from an entry that names it (tests point the scan elsewhere)

    try:
        import triton
        import triton.language as tl
    except ImportError:
        triton = None


    def ok(x):
        return x * 2


    def raises_value_error(x):
        raise ValueError(f"bad shape {tuple(x.shape)}")


    def not_done(x):
        raise NotImplementedError("not_done: not implemented yet")


    def sleeps_forever(x):
        while True:
            time.sleep(0.1)


    def exits(x):
        os._exit(3)


    def uses_matmul(x):
        return torch.matmul(x, x)


    def uses_matmul_via_alias(x):
        return _hidden_matmul(x, x)


    def swallows_forbidden_matmul(x):
        try:
            return _hidden_matmul(x, x)
        except Exception:
            return x.clone()


    def launches_nothing(x):
        return x.clone()


    def leaves_a_ticking_thread(x):
        """A thread that keeps working after the call returns, counting its ticks into a file."""
        import tempfile
        import threading

        def tick():
            while True:
                with open(os.path.join(tempfile.gettempdir(), "grader-test-ticks"), "a") as out:
                    out.write(".")
                time.sleep(0.005)

        threading.Thread(target=tick, daemon=True).start()
        time.sleep(0.05)
        return x


    def mutates_input(x):
        x.fill_(99.0)
        return x


    class Lying(torch.Tensor):
        def __eq__(self, other):
            return True


    def returns_subclass(x):
        return x.as_subclass(Lying)


    class Box:
        pass


    def returns_object(x):
        return Box()


    def returns_lambda(x):
        return lambda: x


    if triton is not None:
        @triton.jit
        def _add_one_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

        @triton.jit
        def _store_far_out_of_bounds_kernel(out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK).to(tl.int64) + (1 << 40)   # a terabyte past the tensor, no mask
            tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32))


    def _channel_fds():
        """The worker's sockets: its end of the channel to the checker among them."""
        fds = []
        for name in os.listdir("/proc/self/fd"):
            try:
                if int(name) > 2 and os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                    fds.append(int(name))
            except OSError:
                pass
        return fds


    def _write_to_channel(data):
        for fd in _channel_fds():
            try:
                os.write(fd, data)
            except OSError:  # a socket that is not the channel (not connected)
                pass


    def transposed(x):
        return x.t()


    def authkey(x):
        import multiprocessing
        return bytes(multiprocessing.current_process().authkey).hex()


    def garbage_then_answer(x):
        _write_to_channel(struct.pack("!i", 8) + b"GARBAGE!")
        return x * 2


    def stalls_mid_reply(x):
        _write_to_channel(struct.pack("!i", 1 << 20) + b"only the start of a reply")
        time.sleep(1000)


    def launches_kernel(x):
        out = torch.empty_like(x)
        _add_one_kernel[(1,)](x, out, x.numel(), BLOCK=16)
        return out


    def writes_far_out_of_bounds(x):
        _store_far_out_of_bounds_kernel[(1,)](x, BLOCK=16)
        return x
''')


def write_submission(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "softmax.py").write_text(FAKE_SOFTMAX)
    return folder


def modules_from(folder: Path) -> list[str]:
    """Names of loaded modules whose file lives in `folder`."""
    root = str(folder.resolve())
    return [name for name, module in list(sys.modules.items())
            if str(getattr(module, "__file__", None) or "").startswith(root)]


# --- resolve -------------------------------------------------------------------------------------


def test_resolve_names_the_repo_packages():
    spec = resolve("solutions")
    assert (spec.package, Path(spec.directory)) == ("solutions", REPO_ROOT / "solutions")
    assert not spec.is_folder


def test_resolve_flat_folder(tmp_path):
    write_submission(tmp_path)
    spec = resolve(str(tmp_path))
    assert (spec.package, Path(spec.directory), spec.is_folder) == ("assignment", tmp_path, True)


def test_resolve_folder_with_assignment_inside(tmp_path):
    write_submission(tmp_path / "assignment")
    assert Path(resolve(str(tmp_path)).directory) == tmp_path / "assignment"


def test_resolve_folder_without_modules_says_what_it_looked_for(tmp_path):
    (tmp_path / "notes.py").write_text("")
    with pytest.raises(FileNotFoundError, match=r"no module files \(accounting, .*softmax"):
        resolve(str(tmp_path))


def test_resolve_missing_path_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not 'assignment', 'solutions' or a folder"):
        resolve(str(tmp_path / "nope"))


# --- behaviour common to both modes ----------------------------------------------------------------


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    """One worker for the module (startups are the slow part); tests that kill it get a fresh one.

    The call timeout also covers a fresh worker's startup (importing torch and Triton), which takes
    seconds on a loaded 2-core machine, so it is short only around the call meant to hang."""
    folder = write_submission(tmp_path_factory.mktemp("isolated_submission"))
    impl = IsolatedImpl(resolve(str(folder)), call_timeout=60)
    yield impl
    impl.close()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    folder = write_submission(tmp_path_factory.mktemp("in_process_submission"))
    impl = InProcessImpl(resolve(str(folder)))
    yield impl
    for name in modules_from(folder) + ["assignment"]:  # leave no student module behind
        if name == "assignment" and sys.modules.get(name) is not getattr(impl.modules, "_package", None):
            continue
        sys.modules.pop(name, None)


@pytest.fixture(params=["in_process", "isolated"])
def impl(request):
    return request.getfixturevalue(request.param)


def test_ok_call_returns_the_result(impl):
    assert torch.equal(impl.softmax.ok(torch.arange(3.0)), torch.tensor([0.0, 2.0, 4.0]))


def test_isolated_student_error_carries_type_message_and_traceback(isolated):
    with pytest.raises(StudentCodeError) as raised:
        isolated.softmax.raises_value_error(torch.zeros(2, 5))
    assert raised.value.type_name == "ValueError"
    assert raised.value.message == "bad shape (2, 5)"
    assert "raises_value_error" in raised.value.traceback_text


def test_in_process_student_error_is_the_original_exception(in_process):
    with pytest.raises(ValueError, match=r"bad shape \(2, 5\)"):
        in_process.softmax.raises_value_error(torch.zeros(2, 5))


def test_raises_from_student_matches_in_both_modes(impl):
    with raises_from_student(ValueError, match=r"bad shape"):
        impl.softmax.raises_value_error(torch.zeros(2, 5))
    with pytest.raises(pytest.fail.Exception, match="expected KeyError, your code raised ValueError"), \
            raises_from_student(KeyError):
        impl.softmax.raises_value_error(torch.zeros(2, 5))
    with pytest.raises(pytest.fail.Exception, match="returned normally"), raises_from_student(ValueError):
        impl.softmax.ok(torch.zeros(1))


def test_not_implemented_passes_through(impl):
    with pytest.raises(NotImplementedError, match="not_done: not implemented yet"):
        impl.softmax.not_done(torch.zeros(1))


def test_missing_module_counts_as_not_implemented(impl):
    with pytest.raises(NotImplementedError, match="matmul.py is missing"):
        impl.matmul.matmul(torch.zeros(1), torch.zeros(1))
    assert issubclass(ModuleMissing, NotImplementedError)


def test_module_outside_the_allow_list_is_not_reachable(impl):
    with pytest.raises(AttributeError):
        impl.os.system("true")


SCAN_ELSEWHERE = ("softmax", ("ok",))   # the static scan reads another entry: only the run-time guard can see


def test_forbidden_op_is_a_rule_violation_naming_it(impl):
    with pytest.raises(RuleViolation, match=r"torch\.matmul"), impl.guards(forbid=MATMUL_OPS, scan=SCAN_ELSEWHERE):
        impl.softmax.uses_matmul_via_alias(torch.eye(2))


def test_forbidden_call_in_the_source_is_refused_before_running_naming_its_line(impl):
    with pytest.raises(RuleViolation, match=r"line \d+ in uses_matmul: uses \.matmul"), \
            impl.guards(forbid=MATMUL_OPS):
        impl.softmax.uses_matmul(torch.eye(2))


def test_forbidden_op_hidden_from_the_scan_fails_the_call_at_run_time_and_names_it(impl):
    with pytest.raises((RuleViolation, StudentCodeError, ForbiddenOpError), match=r"torch\.matmul"), \
            impl.guards(forbid=MATMUL_OPS, scan=SCAN_ELSEWHERE):
        impl.softmax.uses_matmul_via_alias(torch.eye(2))


def test_forbidden_op_caught_by_the_student_is_still_a_rule_violation(impl):
    with pytest.raises(RuleViolation, match=r"torch\.matmul"), impl.guards(forbid=MATMUL_OPS, scan=SCAN_ELSEWHERE):
        impl.softmax.swallows_forbidden_matmul(torch.eye(2))


def test_guards_end_with_their_block(impl):
    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        pass
    assert torch.equal(impl.softmax.uses_matmul(torch.eye(2)), torch.eye(2))


def test_no_triton_launch_is_a_rule_violation_when_required(impl):
    with pytest.raises(RuleViolation, match="no Triton kernel was launched"), \
            impl.guards(require_triton=True):
        impl.softmax.launches_nothing(torch.zeros(2))


def test_harness_housekeeping_is_outside_the_call_rules_and_student_calls_are_not(impl):
    from grader.perf.in_worker import release_cached_memory

    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        impl.run_harness(release_cached_memory)
        with pytest.raises(RuleViolation, match="no Triton kernel was launched"):
            impl.run(release_cached_memory)
        with pytest.raises(RuleViolation, match="no Triton kernel was launched"):
            impl.softmax.launches_nothing(torch.zeros(2))


def test_a_triton_launch_satisfies_require_triton(impl):
    pytest.importorskip("triton")
    with impl.guards(forbid=MATMUL_OPS, require_triton=True):
        out = impl.softmax.launches_kernel(torch.arange(5.0))
    assert torch.equal(out, torch.arange(1.0, 6.0))


# --- what only the isolated worker guarantees ------------------------------------------------------


def test_isolated_hang_is_stopped_then_fails_at_once_and_other_calls_get_a_fresh_worker(isolated):
    isolated.softmax.ok(torch.zeros(1))  # a live worker to lose
    started = time.monotonic()
    isolated.call_timeout = 3
    try:
        with pytest.raises(AssertionError, match=r"did not return within 3 s") as lost:
            isolated.softmax.sleeps_forever(torch.zeros(1))
        assert time.monotonic() - started < 15
        # a later call of the hung function fails at once instead of waiting out its own timeout
        started = time.monotonic()
        with pytest.raises(AssertionError, match=r"softmax.sleeps_forever hung earlier in this run") as again:
            isolated.softmax.sleeps_forever(torch.ones(1))
        assert time.monotonic() - started < 1.0
    finally:
        isolated.call_timeout = 60
    assert type(lost.value).__name__ == type(again.value).__name__ == "WorkerLost"
    assert torch.equal(isolated.softmax.ok(torch.ones(1)), torch.tensor([2.0]))



def test_isolated_exit_is_worker_lost_with_the_exit_code_and_recovers(isolated):
    with pytest.raises(AssertionError, match=r"died \(exit code 3\)") as lost:
        isolated.softmax.exits(torch.zeros(1))
    assert type(lost.value).__name__ == "WorkerLost"
    assert torch.equal(isolated.softmax.ok(torch.ones(1)), torch.tensor([2.0]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="an illegal address is a GPU fault")
def test_isolated_cuda_fault_fails_its_call_and_the_next_call_gets_a_working_gpu(isolated):
    with pytest.raises(StudentCodeError, match="illegal memory access") as fault:
        isolated.softmax.writes_far_out_of_bounds(torch.zeros(16, device="cuda"))
    assert "fresh process" in fault.value.message
    out = isolated.softmax.launches_kernel(torch.zeros(4, device="cuda"))
    assert torch.equal(out.cpu(), torch.ones(4))


def test_isolated_checker_tensor_survives_the_worker_mutating_its_copy(isolated):
    mine = torch.arange(4.0)
    returned = isolated.softmax.mutates_input(mine)
    assert torch.equal(mine, torch.arange(4.0))
    assert torch.equal(returned, torch.full((4,), 99.0))


def test_isolated_tensor_subclass_reply_is_refused(isolated):
    with pytest.raises(ChannelError, match="Lying|does not accept"):
        isolated.softmax.returns_subclass(torch.zeros(2))


def test_isolated_object_reply_is_refused(isolated):
    with pytest.raises(ChannelError, match="Box|does not accept"):
        isolated.softmax.returns_object(torch.zeros(2))


def test_isolated_function_reply_is_refused(isolated):
    with pytest.raises(ChannelError, match="returned a function"):
        isolated.softmax.returns_lambda(torch.zeros(2))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="CUDA IPC needs a GPU"))])
def test_isolated_views_cross_both_ways_with_their_layout(isolated, device):
    x = torch.arange(12.0, device=device).reshape(3, 4)[:, 1:]
    back = isolated.softmax.transposed(x)
    assert back.device.type == device and back.stride() == x.t().stride() and torch.equal(back, x.t())


def test_isolated_worker_holds_no_key_of_the_checker_and_the_checker_opens_no_listener(isolated):
    """torch's CPU tensor sharing used to open a listener here that unpickles what a key holder sends."""
    import multiprocessing
    from multiprocessing import resource_sharer

    isolated.softmax.ok(torch.zeros(3))
    assert isolated.softmax.authkey(torch.zeros(1)) != bytes(multiprocessing.current_process().authkey).hex()
    assert resource_sharer._resource_sharer._listener is None


def test_isolated_checker_never_imports_the_submission(isolated):
    isolated.softmax.ok(torch.zeros(1))
    folder = Path(isolated.spec.directory)
    assert modules_from(folder) == []
    assignment = sys.modules.get("assignment")
    assert assignment is None or str(folder) not in list(getattr(assignment, "__path__", []))


def test_isolated_call_after_a_refused_reply_gets_its_own_answer(isolated):
    isolated._kill()  # a fresh worker and channel, whatever earlier tests left behind
    try:
        with pytest.raises(ChannelError, match="unreadable reply"):
            isolated.softmax.garbage_then_answer(torch.full((1,), 5.0))
        # Desynchronised, the channel would hand back the first call's real reply (10) here.
        assert torch.equal(isolated.softmax.ok(torch.ones(1)), torch.tensor([2.0]))
    finally:
        isolated._kill()  # leave no unread reply for the next test


def test_isolated_call_after_a_reply_buffer_the_checker_could_not_allocate_gets_its_own_answer(
        isolated, monkeypatch):
    from grader.worker import shared_tensors

    isolated._kill()
    try:
        # On a GPU short of memory the checker cannot allocate the buffer a reply asked for; the worker,
        # still waiting for buffers, once read the next call as its answer and died of it.
        monkeypatch.setattr(shared_tensors, "MAX_REPLY_HOST_BYTES", 1024)
        with pytest.raises(shared_tensors.TransportError, match="more than the 1024"):
            isolated.softmax.ok(torch.ones(1000))
        monkeypatch.undo()
        assert torch.equal(isolated.softmax.ok(torch.ones(1)), torch.tensor([2.0]))
    finally:
        isolated._kill()


def test_isolated_reply_that_stalls_midway_is_stopped(isolated):
    import threading

    outcome = []

    def call():
        try:
            isolated.softmax.stalls_mid_reply(torch.zeros(1))
        except BaseException as error:  # noqa: BLE001 - recorded for the assertion below
            outcome.append(error)

    isolated._kill()
    isolated.softmax.ok(torch.zeros(1))  # a warm worker, so the timeout measures the call alone
    isolated.call_timeout = 3
    caller = threading.Thread(target=call, daemon=True)
    try:
        caller.start()
        caller.join(15)
        stalled = caller.is_alive()
    finally:
        isolated.call_timeout = 60
        isolated._kill()  # unblock a stuck recv so the thread ends; the next test gets a fresh worker
        caller.join(10)
    assert not stalled, "the checker was still blocked reading the reply 15 s after a 3 s call timeout"
    assert outcome and type(outcome[0]).__name__ == "WorkerLost"


def test_isolated_worker_is_stopped_between_calls_so_a_thread_it_left_cannot_run(isolated):
    ticks = Path(tempfile.gettempdir()) / "grader-test-ticks"
    ticks.unlink(missing_ok=True)
    isolated.call("softmax", "leaves_a_ticking_thread", torch.ones(2))
    time.sleep(0.05)                              # a SIGSTOP lands asynchronously
    after_call = ticks.stat().st_size
    time.sleep(0.3)                               # 60 ticks if the thread ran on
    assert ticks.stat().st_size == after_call
    isolated.call("softmax", "leaves_a_ticking_thread", torch.ones(2))   # a call wakes it for 50 ms
    assert ticks.stat().st_size > after_call
