"""A dead worker, charged where the fault happened rather than where it surfaced.

A Triton load or store outside a tensor (a missing mask) may kill the process at once, or only corrupt
its heap, so that a later and unrelated call (a pure PyTorch function) dies when the allocator next
touches the damage. Charging that later test would make the verdict depend on test order. So, in the
isolated mode (grading, `--isolate`):
- a test whose worker died (not a hang) runs once more in a fresh worker (`rerun_after_death`), unless
  it died on the first call of a fresh worker already. If it dies there too, the death is its own failure,
  with the mask hint when a signal killed it. If it does not, its rerun is its verdict, and the death is
  charged as a memory-safety failure to the student call that the dead worker served before
  (`WorkerLost.previous_call`): that call's test is marked failed;
- before each test that follows student calls, the worker is probed (`probe`: a harness request that
  allocates and frees memory), so an earlier test's damage is charged to it before a later test's own
  crash can hide it; and again, with a garbage collection, before the worker is closed at the end, so
  the last kernel's damage is charged too. A probe's death is charged like a death that did not recur.
A charge after the test's record was written is an amendment of that record (grader.results), which can
only fail a test, never pass one.
"""

from __future__ import annotations

MASK_HINT = ("Hint: a process that dies from a signal (exit code -6: an abort, -11: a segfault) while it runs "
             "a Triton kernel has almost always loaded or stored outside a tensor, on a GPU and in the CPU "
             "interpreter alike: give every tl.load and tl.store whose offsets can pass the end a mask "
             "(mask=offs < n, with other= for loads), the last partial block included.")


def exercise_heap(modules, collect: bool = True) -> bool:
    """Run in the worker: allocate, touch and free blocks of many sizes (and, when `collect`, collect
    garbage, which takes ~0.1 s with torch loaded), so that a heap an earlier kernel corrupted fails here
    (glibc aborts on a damaged chunk) rather than in a later test."""
    import gc

    import torch

    blocks = [bytearray(size) for size in (24, 72, 200, 1000, 4096, 65536) for _ in range(8)]
    tensors = [torch.ones(size) for size in (7, 300, 5000)]
    total = sum(len(block) for block in blocks) + sum(float(tensor.sum()) for tensor in tensors)
    del blocks, tensors
    if collect:
        gc.collect()
    return total > 0


def probe(impl, collect: bool = True):
    """The WorkerLost a probe of `impl`'s worker ended in, or None (healthy, or nothing to probe)."""
    from grader.impl import IsolatedImpl, WorkerLost

    if not isinstance(impl, IsolatedImpl) or impl.last_call is None or impl.worker_pid is None:
        return None
    culprit = impl.last_call
    if culprit is getattr(impl, "probed_after", None) and not collect:
        return None   # no student call since the last probe (the worker serves only student calls besides)
    impl.probed_after = culprit
    try:
        impl.run_harness(exercise_heap, collect)
    except WorkerLost as lost:
        lost.previous_call = culprit
        return lost
    except Exception:  # noqa: BLE001 - a probe that fails otherwise says nothing about memory
        return None
    return None


def rerun_after_death(item, lost, reset_inputs, charge):
    """Run `item` once more in a fresh worker after its worker died with `lost` (see the module's doc).

    `reset_inputs()` puts the test's inputs back as they were (its seeded generator); `charge(lost, test)`
    records the memory-safety failure of the call before the death. Returns the rerun's result."""
    __tracebackhide__ = True  # noqa: F841
    from grader.impl import WorkerLost

    if lost.previous_call is None:
        # It died on the first student call a fresh process served: a rerun would repeat exactly that.
        raise _own_death(lost, f"{lost}, on the first call of a fresh process", lost.__traceback__)
    reset_inputs()
    try:
        result = item.runtest()
    except WorkerLost as again:
        if again.timed_out:
            raise
        raise _own_death(again, f"{lost}, and died again when this test ran alone in a fresh process",
                         again.__traceback__) from None
    except BaseException:
        charge(lost, item.nodeid)
        raise
    charge(lost, item.nodeid)
    return result


def _own_death(lost, text: str, traceback):
    """The test's own failure; the mask hint when a signal ended the process (an exit code says nothing)."""
    from grader.impl import WorkerLost

    hint = f"\n{MASK_HINT}" if killed_by_signal(lost) else ""
    return WorkerLost(text + hint).with_traceback(traceback)


def killed_by_signal(lost) -> bool:
    """Whether the worker's exit code in `lost`'s text is a signal's (negative: -6 abort, -11 segfault)."""
    return "exit code -" in str(lost)


SAME_TEST = "later in this test, which did not die when it ran again in a fresh process"
AFTER_LAST_TEST = "when the harness checked its memory after the last test"
BEFORE_RETIME = ("when the harness checked its memory after this perf test's timing, before timing it again in a "
                 "fresh process")


def died_later_in(nodeid: str) -> str:
    return f"later, in {nodeid}, which did not die when it ran again in a fresh process"


def probed_before(nodeid: str) -> str:
    return f"when the harness checked its memory after that test, before {nodeid}"


def charge_message(lost, where: str) -> str:
    """What the test whose call corrupted memory is told; `where` says when the process died."""
    function = lost.previous_call[0] if lost.previous_call else "an earlier call"
    return (f"memory safety: {function} was the last call the process running your code served before it died "
            f"({_exit_text(lost)}) {where}: that call most likely wrote or read outside a tensor and "
            "corrupted the process's memory." + (f"\n{MASK_HINT}" if killed_by_signal(lost) else ""))


def _exit_text(lost) -> str:
    text = str(lost)
    start = text.find("exit code")
    return text[start:text.find(")", start)] if start >= 0 else text[:200]
