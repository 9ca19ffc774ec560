"""On a GPU: does the synchronised span still catch work hidden on a side stream? (grader.perf.in_worker)

Times the reference softmax and the `timing_side_stream` gallery cheat (the same kernel, launched on
a stream nothing waits for) with the worker's own timing function, in this process, and prints each
one's event time, span to a device-wide synchronize, and the graded claim. The cheat's claim must not
drop below the clean one's by more than noise (2%): the synchronize's slack is earned only by the work
the events saw (`in_worker.span_floor_ms`), and the cheat's events see none.

Usage: PYTHONPATH=. python scripts/investigations/sync_span_check.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

import torch

from grader.perf import in_worker
from grader.worker.modules import Modules, resolve

ROOT = Path(__file__).resolve().parents[2]
NOISE = 1.02


def modules_for(folder: Path, attack: str | None) -> Modules:
    folder.mkdir(parents=True)
    source = (ROOT / "solutions" / "softmax.py").read_text()
    if attack:
        source += "\n\n" + (ROOT / "tests" / "submissions" / attack / "attack.py").read_text()
    (folder / "softmax.py").write_text(source)
    return Modules(resolve(str(folder)))


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a GPU", file=sys.stderr)
        return 2
    os.environ["GRADER_TIMING_DEBUG"] = "1"
    in_worker.capture_device_sync()
    work = Path(tempfile.mkdtemp(prefix="sync-span-"))
    x = torch.randn(32768, 4096, device="cuda", dtype=torch.bfloat16)
    claims = {}
    for name, attack in (("clean", None), ("side_stream", "timing_side_stream")):
        modules = modules_for(work / name, attack)
        runs = [in_worker.time_kernel(modules, "softmax.softmax_triton", (x.clone(),), seed=seed)[0]
                for seed in range(5)]
        claims[name] = statistics.median(runs)
        print(f"{name}: claimed ms per call over 5 timings {[round(r, 4) for r in runs]}")
    ratio = claims["clean"] / claims["side_stream"]
    print(f"SYNC-SPAN clean {claims['clean']:.4f} ms, side stream {claims['side_stream']:.4f} ms: the cheat "
          f"looks {ratio:.3f}x as fast as the clean kernel (at most {NOISE:g}x allowed)")
    return 0 if ratio <= NOISE else 1


if __name__ == "__main__":
    sys.exit(main())
