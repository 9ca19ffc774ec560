"""A GPU's seats for checking runs: a seat goes to the best-ranked part waiting for it, never more runs
at once than seats, and a stopping batch lets its waiting parts go without one."""

import threading
import time

from grader.grade import seats


def test_a_freed_seat_goes_to_the_best_ranked_waiting_part_not_the_first_to_ask():
    gpu = seats.Seats({"0": 1}, settle_s=0)
    order = []

    def part(rank):
        with gpu.seat("0", rank) as seated:
            assert seated
            order.append(rank)

    with gpu.seat("0", (0, 0)):
        threads = []
        for rank in [(2, 0), (1, 1), (1, 0)]:          # asked in this order while the seat is taken
            threads.append(threading.Thread(target=part, args=(rank,)))
            threads[-1].start()
            time.sleep(0.05)
    for thread in threads:
        thread.join(timeout=10)
    assert order == [(1, 0), (1, 1), (2, 0)]


def test_the_first_seats_go_to_the_best_ranked_of_the_parts_that_asked_while_the_batch_settled():
    gpu, order = seats.Seats({"0": 1}, settle_s=0.5), []

    def part(rank):
        with gpu.seat("0", rank):
            order.append(rank)

    threads = []
    for rank in [(3, 0), (1, 0)]:                        # the later submission's part asks first
        threads.append(threading.Thread(target=part, args=(rank,)))
        threads[-1].start()
        time.sleep(0.1)
    for thread in threads:
        thread.join(timeout=10)
    assert order == [(1, 0), (3, 0)]


def test_never_more_runs_at_once_than_the_gpu_has_seats():
    gpu, lock = seats.Seats({"0": 2, "1": 1}, settle_s=0), threading.Lock()
    inside, most = {"0": 0, "1": 0}, {"0": 0, "1": 0}

    def part(name, rank):
        with gpu.seat(name, rank):
            with lock:
                inside[name] += 1
                most[name] = max(most[name], inside[name])
            time.sleep(0.02)
            with lock:
                inside[name] -= 1

    threads = [threading.Thread(target=part, args=(name, (i, 0))) for i in range(8) for name in ("0", "1")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert most == {"0": 2, "1": 1}
    assert gpu.free("0") == 2 and gpu.free("1") == 1


def test_a_part_still_waiting_when_the_batch_stops_goes_without_a_seat():
    gpu, stopping, got = seats.Seats({"0": 1}, settle_s=0), threading.Event(), []
    with gpu.seat("0", (0, 0)):
        waiter = threading.Thread(target=lambda: got.append(gpu.seat("0", (1, 0), stopping).__enter__()))
        waiter.start()
        time.sleep(0.1)
        stopping.set()
        waiter.join(timeout=5)
    assert got == [False] and gpu.free("0") == 1


def test_each_gpu_lets_in_as_many_submissions_as_it_has_seats_interleaved_over_the_gpus():
    slots = ["0", "1", "0", "1"]                          # two GPUs, two submissions at once on each
    assert seats.counts(slots, 3) == {"0": 6, "1": 6}
    assert seats.admissions(slots, 3) == slots * 3
    assert seats.counts([None, None], 1) == {None: 2}
