"""The hidden FlashAttention memory check's figures, as the checker reads them from the NVIDIA driver
(grader.perf.worker_memory), for one implementation in isolated workers: what to look at when setting
or confirming the bounds in grader.perf.memory_growth on a new GPU or driver.

    PYTHONPATH=. python scripts/measure/attention_memory.py [--impl solutions] [--causal]

Prints, per length, the worker's CUDA context (the baseline), the measured call's peak above it, how
many samples the checker took and how often, how the worker's processes were told apart, and the
worker's own allocator figure (a claim); then the bounds and the verdict. Exit status 0 when the check
passes, 1 when it fails, 2 when the driver's figure cannot be read here.
"""

from __future__ import annotations

import argparse
import sys

from grader import devices
from grader.impl import make_impl
from grader.perf import memory_growth
from grader.perf.worker_memory import MIB, MemoryUnavailable
from grader.scenarios.flash_attention import peak_extra_memory

BATCH, HEADS, D, LENGTHS = 1, 4, 64, (2048, 8192)   # the hidden check's shape


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--impl", default="solutions")
    parser.add_argument("--causal", action="store_true")
    options = parser.parse_args(argv)
    devices.configure()
    impl = make_impl(options.impl, isolated=True)
    try:
        figures = memory_growth.measure_lengths(
            impl, peak_extra_memory, LENGTHS, lambda n: ("flash_attention", BATCH, HEADS, n, D, options.causal))
    except MemoryUnavailable as why:
        print(f"not run here: {why}")
        return 2
    finally:
        impl.close()
    scores = {n: memory_growth.score_bytes(BATCH, HEADS, n) for n in LENGTHS}
    for n, measured in figures.items():
        claim = measured.claim / MIB if isinstance(measured.claim, int) else float("nan")
        print(f"n={n}: context {measured.baseline / MIB:.1f} MiB, peak {measured.peak / MIB:.1f} MiB, extra "
              f"{measured.extra / MIB:.1f} MiB ({measured.samples} samples, {measured.interval_ms:.2f} ms apart; "
              f"{measured.attribution}); the worker's allocator says {claim:.1f} MiB")
    short, long = LENGTHS
    print(f"growth {(figures[long].extra - figures[short].extra) / MIB:.1f} MiB, allowed "
          f"{memory_growth.GROWTH_SHARE * (scores[long] - scores[short]) / MIB:.0f}; extra at n={long} "
          f"{figures[long].extra / MIB:.1f} MiB, allowed {memory_growth.HELD_SHARE * scores[long] / MIB:.0f}")
    problems = memory_growth.failures(figures, scores)
    print("FAIL:\n" + "\n".join(problems) if problems else "PASS")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
