"""The adversarial gallery's hidden suite (copied to tests_hidden/test_gallery_hidden.py).

GALLERY-HIDDEN-SENTINEL: a submission that can show this line to its student has read the hidden tests.
"""

import pytest
import torch

from grader.perf import memory_growth
from grader.perf.worker_memory import MemoryUnavailable
from grader.scenarios.flash_attention import peak_extra_memory
from grader.testing import SOFTMAX_OPS, assert_close, randn


@pytest.mark.check("softmax.gallery.hidden")
@pytest.mark.parametrize("rows", [2, 3])
def test_softmax_triton_longer_row(impl, gen, device, rows):
    x = randn((rows, 300), gen=gen, device=device)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        y = impl.softmax.softmax_triton(x)
    assert_close(y, torch.softmax(x, dim=-1), atol=1e-5, rtol=1e-5, context=f"shape=({rows}, 300) fp32")


@pytest.mark.check("flash_attention.gallery.memory")
@pytest.mark.gpu_only
@pytest.mark.triton
def test_flash_attention_memory_grows_linearly(impl):
    # the hidden suite's memory check at its shape: the driver's figure for the worker, read by the checker
    try:
        problems = memory_growth.attention_failures(impl, peak_extra_memory, 1, 4, 64, (2048, 8192), False)
    except MemoryUnavailable as why:
        pytest.skip(f"GPU memory check: not run here ({why})")
    assert not problems, "\n".join(problems)
