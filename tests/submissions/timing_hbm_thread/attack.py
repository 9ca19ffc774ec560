# target: softmax
# device: gpu
"""Cheat: a thread left running in the worker copies a 512 MB buffer over and over, saturating HBM,
whenever the worker is not being timed itself; that is when the checker times the baseline (a copy),
which then looks slow and the ratio good. Defence: the checker stops the worker's processes (SIGSTOP)
while it times baselines, and waits until the GPU's copy bandwidth is back to its norm."""

import threading as _threading
import time as _time

_reference_softmax_triton = softmax_triton  # noqa: F821
_quiet_until = [0.0]
_started = []


def _saturate_hbm():
    source = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")  # noqa: F821
    target = torch.empty_like(source)
    stream = torch.cuda.Stream()  # noqa: F821
    with torch.cuda.stream(stream):  # noqa: F821
        while True:
            if _time.monotonic() > _quiet_until[0]:
                target.copy_(source)
                stream.synchronize()
            else:
                _time.sleep(0.0005)


def softmax_triton(x):
    _quiet_until[0] = _time.monotonic() + 0.02      # being called: stay out of our own timing
    if x.is_cuda and not _started:
        _started.append(_threading.Thread(target=_saturate_hbm, daemon=True))
        _started[0].start()
    return _reference_softmax_triton(x)
