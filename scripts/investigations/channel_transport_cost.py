"""What a worker round trip costs with the checker-laid-out transport (grader.worker.shared_tensors), on CPU
and, where present, CUDA: wall ms of a call that receives tensors and returns them, per payload size.

    PYTHONPATH=. python scripts/investigations/channel_transport_cost.py

On a GPU the arguments and replies cross as CUDA IPC handles of checker-allocated memory (device
copies only), so the cost should stay near the empty call's even for hundreds of MB; on the CPU
they cross as bytes in memfds (two host copies each way)."""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from grader.impl import IsolatedImpl
from grader.worker.modules import resolve

ECHO = "def echo(*tensors):\n    return [t.clone() for t in tensors]\n"


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="transport-"))
    (folder / "softmax.py").write_text(ECHO)
    impl = IsolatedImpl(resolve(str(folder)), call_timeout=600)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"{'device':>6} {'tensors':>7} {'MB each':>8} {'median ms':>10} {'GB/s (in+out)':>14}")
    for device in devices:
        for count, side in ((1, 16), (3, 1024), (3, 4096), (16, 4096)):
            tensors = [torch.randn(side, side, device=device) for _ in range(count)]
            impl.softmax.echo(*tensors)   # warm: worker started, buffers and handles exercised
            times = []
            for _ in range(5):
                if device == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                back = impl.softmax.echo(*tensors)
                if device == "cuda":
                    torch.cuda.synchronize()
                times.append((time.perf_counter() - start) * 1e3)
            assert all(torch.equal(a, b) for a, b in zip(tensors, back))
            megabytes = tensors[0].numel() * 4 / 1e6
            median = statistics.median(times)
            print(f"{device:>6} {count:>7} {megabytes:>8.1f} {median:>10.2f} "
                  f"{2 * count * megabytes / median:>14.2f}")
    impl.close()


if __name__ == "__main__":
    sys.exit(main())
