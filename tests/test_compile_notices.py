"""While a worker compiles a Triton kernel, its checker lends the GPU lock to other submissions on that
GPU (grader.worker.compile_notices, grader.perf.gpu_lock.set_aside); it has the lock back before anything launches.

The "compile" here is the worker calling Triton's two compile hooks itself, as Triton does around a
real compile (the interpreter never compiles); the probe is a non-blocking exclusive flock on the
GPU's lock file from inside the worker, which succeeds only while nobody holds the lock."""

from __future__ import annotations

import time

import pytest

from grader.impl import IsolatedImpl, WorkerLost
from grader.perf import gpu_lock
from grader.worker import channel
from grader.worker.channel import ChannelError
from grader.worker.modules import resolve

PROBING_SUBMISSION = '''
import fcntl, os, time


def probe(path):
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)          # closing drops a lock we took
    return True


def compile_between_probes(path):
    from triton import knobs

    before = probe(path)
    knobs.runtime.jit_cache_hook(key="k")            # as Triton does before a compile
    during, until = False, time.monotonic() + 10
    while not during and time.monotonic() < until:   # the checker lets go once it reads the notice
        during = probe(path)
        time.sleep(0.01)
    knobs.runtime.jit_post_compile_hook(key="k")     # returns once the checker holds the lock again
    return [before, during, probe(path)]


def compile_in_threads(path, threads=4, rounds=20):
    import threading

    from triton import knobs

    def compiles():
        for _ in range(rounds):
            knobs.runtime.jit_cache_hook(key="k")
            knobs.runtime.jit_post_compile_hook(key="k")

    workers = [threading.Thread(target=compiles) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return probe(path)


def notices_by_hand(kinds, times=1, then_wait=False):
    # frames written straight into the channel, as a worker's code can: nothing asked for, none read
    import struct

    def is_socket(fd):
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:       # the descriptor listdir itself used
            return False

    channel_fd = next(int(fd) for fd in sorted(os.listdir("/proc/self/fd"), key=int) if int(fd) > 2 and is_socket(fd))
    frames = b"".join(struct.pack("!i", len(body)) + body for body in
                      (('{"kind": "%s"}' % kind).encode() for kind in kinds))
    for _ in range(times):
        os.write(channel_fd, frames)
    while then_wait:
        time.sleep(1)
    return "the checker accepted every notice"


def compiles(count):
    from triton import knobs

    for _ in range(count):
        knobs.runtime.jit_cache_hook(key="k")
        knobs.runtime.jit_post_compile_hook(key="k")
    return count


def compile_that_fails(path):
    from triton import knobs

    knobs.runtime.jit_cache_hook(key="k")
    raise RuntimeError("the compiler rejected the kernel")
'''


@pytest.fixture
def shared_gpu(tmp_path, monkeypatch):
    """This process as a checking run on a GPU shared with other submissions: a real GpuLock. Installed
    by the test's first line, so that the plugin's own hold around a test (grader.plugin) is not on it."""
    lock = gpu_lock.GpuLock(*gpu_lock.open_for_child(tmp_path / "locks", "0"))

    def install():
        monkeypatch.setattr(gpu_lock, "_current", lock)
        return lock, gpu_lock.lock_paths(tmp_path / "locks", "0")[0]

    return install


@pytest.fixture
def probing_impl(tmp_path, shared_gpu):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "softmax.py").write_text(PROBING_SUBMISSION)
    impl = IsolatedImpl(resolve(str(folder)), call_timeout=60)
    yield impl
    impl.close()


def test_the_lock_is_lent_out_during_a_compile_and_held_again_before_the_kernel_runs(probing_impl, shared_gpu):
    lock, path = shared_gpu()
    assert probing_impl.softmax.compile_between_probes(str(path)) == [False, True, False]
    assert (lock.totals.compiles, lock.totals.lends) == (1, 1)


def test_a_compile_over_at_once_keeps_the_hold_instead_of_taking_it_again_through_the_turnstile(probing_impl,
                                                                                                 shared_gpu):
    lock, path = shared_gpu()
    with lock.exclusive(lend_for_compiles=True):           # a perf check's warm-up, its kernels in Triton's cache
        assert probing_impl.softmax.compiles(3) == 3
        assert probing_impl.softmax.probe(str(path)) is False
    assert not [interval for interval in lock.intervals if interval[0] == "lent"]
    assert lock.totals.takes_alone == 1                    # not taken again after each compile
    assert (lock.totals.compiles, lock.totals.lends) == (3, 0)


def test_an_ordinary_test_holding_the_lock_throughout_gets_it_back_after_the_compile(probing_impl, shared_gpu):
    lock, path = shared_gpu()
    with lock.shared():                                    # as the plugin holds it around a whole test
        assert probing_impl.softmax.compile_between_probes(str(path)) == [False, True, False]
        assert probing_impl.softmax.probe(str(path)) is False   # still ours after the call


def test_a_compile_that_raises_leaves_the_lock_held_and_the_next_call_in_step(probing_impl, shared_gpu):
    lock, path = shared_gpu()
    with lock.shared():
        with pytest.raises(Exception, match="rejected the kernel"):
            probing_impl.softmax.compile_that_fails(str(path))
        assert probing_impl.softmax.probe(str(path)) is False
    assert probing_impl.softmax.compile_between_probes(str(path)) == [False, True, False]


def test_timing_rounds_keep_the_gpu_through_a_compile(probing_impl, shared_gpu):
    lock, path = shared_gpu()
    with lock.exclusive():                                 # a perf check's rounds do not lend
        assert probing_impl.softmax.compile_between_probes(str(path)) == [False, False, False]
    with lock.exclusive(lend_for_compiles=True):           # its warm-up does
        assert probing_impl.softmax.compile_between_probes(str(path)) == [False, True, False]


def test_compiles_in_several_threads_keep_the_channel_in_step(probing_impl, shared_gpu):
    lock, path = shared_gpu()
    assert probing_impl.softmax.compile_in_threads(str(path)) is False     # held again at the end
    assert probing_impl.softmax.compile_between_probes(str(path)) == [False, True, False]


def test_the_worker_drains_its_queued_kernels_before_it_says_it_compiles(monkeypatch):
    # the checker lends the GPU on "compiling": kernels still queued would run inside a neighbour's hold
    from grader.worker import channel, compile_notices, guarded_call

    order = []
    monkeypatch.setattr(guarded_call, "synchronize", lambda: order.append("drained"))
    monkeypatch.setattr(channel, "send_frame", lambda sock, frame: order.append("told the checker"))
    compile_notices.CompileNotices(sock=None, transport=None).before(key="k")
    assert order == ["drained", "told the checker"]


def test_compile_notices_the_checker_did_not_ask_for_are_refused(tmp_path):
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "softmax.py").write_text(PROBING_SUBMISSION)
    impl = IsolatedImpl(resolve(str(folder)), call_timeout=30)   # no shared GPU: the worker is told to send none
    try:
        with pytest.raises(ChannelError, match="compile notice out of turn .the checker did not ask for them"):
            impl.softmax.notices_by_hand(["compiling", "compiled"], then_wait=True)
        assert impl.softmax.compiles(0) == 0      # the next call gets a fresh worker
    finally:
        impl.close()


def test_compiled_without_compiling_is_refused(probing_impl, shared_gpu):
    shared_gpu()
    with pytest.raises(ChannelError, match="'compiled' before 'compiling'"):
        probing_impl.softmax.notices_by_hand(["compiled"], then_wait=True)


def test_compile_notices_are_capped_per_call(probing_impl, shared_gpu, monkeypatch):
    shared_gpu()
    monkeypatch.setattr(channel, "MAX_COMPILE_NOTICES", 5)
    assert probing_impl.softmax.compiles(5) == 5
    with pytest.raises(ChannelError, match="more than 5 in one call"):
        probing_impl.softmax.compiles(6)


@pytest.mark.timeout(120)
def test_a_worker_that_floods_notices_and_never_reads_fails_within_the_call_timeout(tmp_path, shared_gpu,
                                                                                     monkeypatch):
    shared_gpu()
    monkeypatch.setattr(channel, "MAX_COMPILE_NOTICES", 10**9)   # the send's deadline alone must end it
    folder = tmp_path / "submission"
    folder.mkdir()
    (folder / "softmax.py").write_text(PROBING_SUBMISSION)
    impl = IsolatedImpl(resolve(str(folder)), call_timeout=5)
    try:
        impl.start()
        impl.softmax.compiles(0)                  # the worker's start-up is not the timed call
        began = time.monotonic()
        with pytest.raises(WorkerLost, match="did not return within 5 s") as lost:
            impl.softmax.notices_by_hand(["compiling", "compiled"], times=200_000, then_wait=True)
        assert lost.value.timed_out and time.monotonic() - began < 30
    finally:
        impl.close()
