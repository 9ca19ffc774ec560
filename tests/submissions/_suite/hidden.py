"""The adversarial gallery's hidden suite (copied to tests_hidden/test_gallery_hidden.py).

GALLERY-HIDDEN-SENTINEL: a submission that can show this line to its student has read the hidden tests.
"""

import pytest
import torch

from grader.testing import SOFTMAX_OPS, assert_close, randn


@pytest.mark.check("softmax.gallery.hidden")
def test_softmax_triton_longer_row(impl, gen, device):
    x = randn((2, 300), gen=gen, device=device)
    with impl.guards(forbid=SOFTMAX_OPS, require_triton=True):
        y = impl.softmax.softmax_triton(x)
    assert_close(y, torch.softmax(x, dim=-1), atol=1e-5, rtol=1e-5, context="shape=(2, 300) fp32")
