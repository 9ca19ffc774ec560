"""The per-GPU lock (grader.perf.gpu_lock): real processes, real flock, no GPU needed."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time

import pytest

from grader import results
from grader.perf import gpu_lock

CONTEXT = multiprocessing.get_context("fork")


def _lock_in(folder):
    # each process opens its own file descriptions, as each checking run gets its own from the runner
    return gpu_lock.GpuLock(*gpu_lock.open_for_child(folder, "0"))


def _reader(folder, log, until):
    lock = _lock_in(folder)
    with open(log, "a") as out:
        while time.monotonic() < until:
            with lock.shared() as hold:
                start = time.monotonic()
                time.sleep(0.004)
                out.write(f"shared {start} {time.monotonic()} {int(hold.waited_out)}\n")
                out.flush()


def _writer(folder, log, until, asked):
    lock = _lock_in(folder)
    with open(log, "a") as out:
        while time.monotonic() < until:
            requested = time.monotonic()
            with lock.exclusive() as hold:
                start = time.monotonic()
                time.sleep(0.02)
                out.write(f"exclusive {start} {time.monotonic()} {int(hold.waited_out)} {start - requested}\n")
                out.flush()
            asked.value += 1
            time.sleep(0.01)


def _intervals(folder):
    rows = []
    for path in folder.glob("*.log"):
        for line in path.read_text().splitlines():
            kind, start, end, waited_out, *rest = line.split()
            rows.append((kind, float(start), float(end), waited_out == "1", float(rest[0]) if rest else 0.0))
    return rows


def test_exclusive_holds_never_overlap_any_other_hold_across_processes(tmp_path):
    until = time.monotonic() + 1.5
    asked = CONTEXT.Value("i", 0)
    processes = [CONTEXT.Process(target=_reader, args=(tmp_path, tmp_path / f"r{i}.log", until)) for i in range(3)]
    processes += [CONTEXT.Process(target=_writer, args=(tmp_path, tmp_path / f"w{i}.log", until, asked))
                  for i in range(2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(10)
    rows = _intervals(tmp_path)
    exclusive = [row for row in rows if row[0] == "exclusive"]
    shared = [row for row in rows if row[0] == "shared"]
    assert len(exclusive) >= 4 and len(shared) >= 20, (len(exclusive), len(shared))
    assert not any(row[3] for row in rows), "a wait ran out although every hold is short"
    for one in exclusive:
        for other in rows:
            if other is not one:
                assert one[2] <= other[1] or other[2] <= one[1], f"{one} overlaps {other}"
    # readers overlap each other (the GPU really is shared), or the lock would serialise everything
    shared.sort(key=lambda row: row[1])
    assert any(b[1] < a[2] for a, b in zip(shared, shared[1:])), "shared holders never overlapped"


def test_a_stream_of_shared_holders_does_not_starve_an_exclusive_waiter(tmp_path):
    until = time.monotonic() + 1.5
    asked = CONTEXT.Value("i", 0)
    readers = [CONTEXT.Process(target=_reader, args=(tmp_path, tmp_path / f"r{i}.log", until)) for i in range(4)]
    for process in readers:
        process.start()
    time.sleep(0.2)                        # readers are streaming before the writer comes
    writer = CONTEXT.Process(target=_writer, args=(tmp_path, tmp_path / "w.log", until, asked))
    writer.start()
    for process in [*readers, writer]:
        process.join(10)
    waits = [row[4] for row in _intervals(tmp_path) if row[0] == "exclusive"]
    assert len(waits) >= 10, f"the exclusive waiter got the lock only {len(waits)} times in 1.3 s"
    assert max(waits) < 0.5, f"an exclusive wait took {max(waits):.3f} s behind 4 ms shared holds"


def test_a_wait_past_its_limit_goes_on_without_the_lock_and_says_so(tmp_path):
    holder = _lock_in(tmp_path)
    other = _lock_in(tmp_path)
    with holder.exclusive() as held:
        assert not held.waited_out
        with other.shared(wait_s=0.1) as hold:
            assert hold.waited_out and hold.waited_s >= 0.1
        with other.exclusive(wait_s=0.1) as hold:
            assert hold.waited_out
    with other.exclusive(wait_s=0.1) as hold:   # released: free again
        assert not hold.waited_out


def test_shared_inside_this_process_exclusive_hold_does_not_wait_for_itself(tmp_path):
    lock = _lock_in(tmp_path)
    with lock.exclusive():
        started = time.monotonic()
        with lock.shared(wait_s=1.0) as hold:
            assert not hold.waited_out
        assert time.monotonic() - started < 0.5
        assert lock.held_exclusively
    assert not lock.held_exclusively


def test_exclusive_inside_a_shared_hold_is_refused_rather_than_deadlocking(tmp_path):
    lock = _lock_in(tmp_path)
    with lock.shared(), pytest.raises(RuntimeError, match="wait for itself"):
        with lock.exclusive(wait_s=0.1):
            pass


def test_a_killed_holder_releases_the_gpu(tmp_path):
    ready = CONTEXT.Event()

    def hold_forever():
        with _lock_in(tmp_path).exclusive():
            ready.set()
            time.sleep(60)

    process = CONTEXT.Process(target=hold_forever)
    process.start()
    assert ready.wait(10)
    other = _lock_in(tmp_path)
    with other.shared(wait_s=0.05) as hold:
        assert hold.waited_out
    process.kill()
    process.join(5)
    with other.shared(wait_s=2.0) as hold:
        assert not hold.waited_out


def test_checker_takes_the_fds_from_the_environment_and_keeps_them_from_children(tmp_path):
    fds = gpu_lock.open_for_child(tmp_path, "3")
    try:
        for fd in fds:
            os.set_inheritable(fd, True)           # as pass_fds leaves them in the checking run
        lock = gpu_lock.from_env({gpu_lock.FDS_ENV: gpu_lock.env_value(fds)})
        assert isinstance(lock, gpu_lock.GpuLock)
        assert not any(os.get_inheritable(fd) for fd in fds)
        child = subprocess.run([sys.executable, "-c", f"import os; os.fstat({fds[0]})"], capture_output=True,
                               close_fds=False)
        assert child.returncode != 0, "a child process inherited the GPU lock"
    finally:
        for fd in fds:
            os.close(fd)


def test_no_lock_configured_means_nothing_to_wait_for():
    lock = gpu_lock.from_env({})
    with lock.exclusive() as hold:
        assert hold.mode == "none" and not hold.waited_out
    assert isinstance(gpu_lock.from_env({gpu_lock.FDS_ENV: "999990,999991"}), gpu_lock._NoLock)


def test_the_lock_adds_up_what_it_cost_the_run(tmp_path):
    lock = _lock_in(tmp_path)
    with lock.exclusive():
        time.sleep(0.05)
    with lock.shared():
        pass
    assert 0.05 <= lock.totals.alone_s < 1.0 and lock.totals.waited_s < 1.0 and lock.totals.compiles == 0


def test_time_lent_to_a_compile_is_not_counted_as_held_alone(tmp_path):
    lock = _lock_in(tmp_path)
    with lock.exclusive(lend_for_compiles=True):
        time.sleep(0.05)
        with lock.set_aside():
            time.sleep(0.3)
        assert lock.alone_now
        time.sleep(0.05)
    assert 0.1 <= lock.totals.alone_s < 0.3 and lock.totals.lent_s >= 0.3
    assert lock.totals.takes_alone == 2 and lock.totals.compiles == 1


def test_keep_through_compiles_stops_a_hold_from_lending_until_its_block_ends(tmp_path):
    lock, other = _lock_in(tmp_path), _lock_in(tmp_path)
    with lock.exclusive(lend_for_compiles=True):
        with lock.keep_through_compiles():
            with lock.set_aside():
                with other.shared(wait_s=0.05) as hold:
                    assert hold.waited_out          # still held alone: nothing was lent
        with lock.set_aside():
            with other.shared(wait_s=1.0) as hold:
                assert not hold.waited_out          # lending again after the block
    assert lock.totals.compiles == 1


def test_waits_for_the_gpu_alone_are_told_apart_from_waits_to_share_it(tmp_path):
    lock, other = _lock_in(tmp_path), _lock_in(tmp_path)
    with other.exclusive():
        with lock.shared(wait_s=0.1):
            pass
        with lock.exclusive(wait_s=0.2):
            pass
    assert 0.3 <= lock.totals.waited_s < 1.0 and 0.2 <= lock.totals.waited_alone_s < 0.3
    assert lock.totals.takes_alone == 1 and lock.totals.alone_s == 0.0


def test_the_lock_keeps_its_runs_timeline_of_waits_holds_and_lends(tmp_path):
    lock, other = _lock_in(tmp_path), _lock_in(tmp_path)
    with other.exclusive():
        with lock.shared(wait_s=0.1):      # waited out: it ran without the lock, so no hold is noted
            pass
    with lock.exclusive(lend_for_compiles=True):
        time.sleep(0.02)
        with lock.set_aside():
            time.sleep(0.05)
    summary = lock.summary()
    intervals = [results.parse_interval(item) for item in summary["intervals"]]
    assert [kind for kind, _, _ in intervals] == ["wait_shared", "alone", "lent", "alone"]
    assert all(start <= end for _, start, end in intervals)
    ms = 0.0015                          # the timeline keeps milliseconds: each end is rounded
    assert intervals[0][2] - intervals[0][1] >= 0.1 - ms and intervals[2][2] - intervals[2][1] >= 0.05 - ms
    assert summary["totals"]["compiles"] == 1 and summary["totals"]["lent_s"] >= 0.05
    assert gpu_lock.from_env({}).summary() is None          # no shared GPU, no timeline


@pytest.mark.parametrize("hold", ["shared", "exclusive", "lent to a compile"])
def test_a_holds_gpu_work_is_drained_before_any_neighbour_can_take_the_gpu(tmp_path, hold):
    # CUDA queues kernels and returns: a release that did not wait for them let a fixture's or a
    # worker's kernels run on into a neighbour's timing rounds
    neighbour = _lock_in(tmp_path)
    seen = []

    def drain():
        with neighbour.exclusive(wait_s=0.0) as taken:
            seen.append(taken.waited_out)             # True: the GPU is still ours while it drains

    lock = gpu_lock.GpuLock(*gpu_lock.open_for_child(tmp_path, "0"), drain=drain)
    if hold == "lent to a compile":
        with lock.exclusive(lend_for_compiles=True):
            with lock.set_aside():
                assert seen == [True]
    else:
        with getattr(lock, hold)():
            pass
    assert seen and all(seen)


def test_a_failing_drain_still_lets_the_gpu_go(tmp_path):
    def drain():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    lock, neighbour = gpu_lock.GpuLock(*gpu_lock.open_for_child(tmp_path, "0"), drain=drain), _lock_in(tmp_path)
    with lock.exclusive():
        pass
    with neighbour.exclusive(wait_s=0.5) as taken:
        assert not taken.waited_out
