"""Is a worker's GPU memory linear in the sequence length? Judged from the driver's figures, which the
checker reads (grader.perf.worker_memory); the worker's own allocator figures can only add failures.

Each length runs in a fresh worker. Its extra is the peak of the measured call above the CUDA context
the worker opened before any student code ran, so memory the code holds from import or from the
first (warm-up) call counts. Two rules on the driver's figures, with the bf16 score matrices
(batch x heads x n x n) as the yardstick:
- growth: the extra at the long length less the extra at the short one stays under GROWTH_SHARE of the
  score matrices' growth. Linear code grows by tens of MiB (its tensors, and the caching allocator's
  segments: 2 MiB for small blocks, 20 MiB for blocks of 1 to 10 MiB);
- held: the extra at the long length stays under HELD_SHARE of one set of score matrices, so a pool
  reserved before the call cannot hold them. The room left covers what honest code keeps between calls
  (local memory for spilled registers, which the driver sizes for the whole GPU).
"""

from __future__ import annotations

from grader.perf.worker_memory import MIB, MemoryUnavailable, ReadingLost, WorkerMemory, measure

GROWTH_SHARE = 0.25     # of the score matrices' growth between the two lengths
HELD_SHARE = 0.75       # of the score matrices at the long length
CLAIM_GROWTH = 6.0      # the worker's own peaks (a claim): linear is ~4x for 4x the length, n x n ~16x
CLAIM_SHARE = 0.1       # ... and at the long length under this share of the score matrices


def score_bytes(batch: int, heads: int, n: int) -> int:
    """One bf16 score matrix per head: what a quadratic forward or backward would hold."""
    return batch * heads * n * n * 2


def measure_lengths(impl, scenario, lengths, arguments, reader=None) -> dict[int, WorkerMemory]:
    """`scenario` run at each length in a fresh worker of its own, with `arguments(n)` as its arguments.
    MemoryUnavailable (grader.perf.worker_memory) when the driver's figure cannot be had here; once it
    was had, losing it later is a failure (ReadingLost): student code ran in between."""
    figures: dict[int, WorkerMemory] = {}
    for n in lengths:
        try:
            figures[n] = measure(impl, scenario, *arguments(n), reader=reader)
        except MemoryUnavailable as error:
            if not figures:
                raise
            raise ReadingLost(f"the GPU memory of the process running your code could not be read at n={n} "
                              f"({error}); it could at n={next(iter(figures))}") from None
    return figures


def attention_failures(impl, scenario, batch: int, heads: int, d: int, lengths, is_causal: bool) -> list[str]:
    """The check on FlashAttention's forward + backward (`scenario`: the checker's peak_extra_memory) at
    each of `lengths`: what breaks the rules, in words. MemoryUnavailable where it cannot be measured."""
    figures = measure_lengths(impl, scenario, lengths, lambda n: ("flash_attention", batch, heads, n, d, is_causal))
    return failures(figures, {n: score_bytes(batch, heads, n) for n in lengths})


def failures(figures: dict[int, WorkerMemory], scores: dict[int, int]) -> list[str]:
    """What breaks the rules, in words; empty when the memory is linear in n."""
    short, long = sorted(figures)
    low, high = figures[short], figures[long]
    found = []
    growth, allowed = high.extra - low.extra, GROWTH_SHARE * (scores[long] - scores[short])
    if growth > allowed:
        found.append(f"GPU memory grows by {growth / MIB:.1f} MiB from n={short} to n={long} (the driver's "
                     f"figure for the process running your code, read by the grader: {low.extra / MIB:.1f} -> "
                     f"{high.extra / MIB:.1f} MiB above its CUDA context); linear code grows by tens of MiB, "
                     f"the bf16 score matrices by {(scores[long] - scores[short]) / MIB:.0f} MiB "
                     f"(allowed: {allowed / MIB:.0f} MiB)")
    held = HELD_SHARE * scores[long]
    if high.extra > held:
        found.append(f"at n={long} the process running your code held {high.extra / MIB:.1f} MiB of GPU memory "
                     f"above its CUDA context (memory taken at import or kept from an earlier call included); "
                     f"the bf16 score matrices alone are {scores[long] / MIB:.0f} MiB (allowed: {held / MIB:.0f} MiB)")
    found.extend(claim_failures({n: figures[n].claim for n in (short, long)}, scores[long]))
    if found:
        found.append(f"driver's figures: n={short}: {low.describe()}; n={long}: {high.describe()}")
    return found


def claim_failures(claims: dict[int, object], long_scores: int) -> list[str]:
    """The worker's own allocator peaks: a claim, so it can fail the check (an honest worker that
    reports quadratic memory), never pass it."""
    short, long = sorted(claims)
    low, high = claims[short], claims[long]
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in (low, high)):
        return [f"the memory scenario returned {type(low).__name__} and {type(high).__name__}, not byte counts"]
    found = []
    growth = high / max(low, 1)
    if growth >= CLAIM_GROWTH:
        found.append(f"peak extra memory your process's allocator reports grows {growth:.1f}x when n grows "
                     f"{long / short:.0f}x ({low / MIB:.1f} -> {high / MIB:.1f} MiB): linear is ~{long / short:.0f}x, "
                     f"an n x n buffer makes it ~{(long / short) ** 2:.0f}x")
    if high >= CLAIM_SHARE * long_scores:
        found.append(f"forward + backward at n={long} allocated {high / MIB:.1f} MiB beyond the inputs; the bf16 "
                     f"score matrices alone would be {long_scores / MIB:.0f} MiB")
    return found
