"""The checker admits only plain values and exact tensors back from the worker, never code."""

from __future__ import annotations

import builtins
import os
import pickle
import subprocess
from collections import OrderedDict

import pytest
import torch
import torch.multiprocessing  # noqa: F401 - registers the shared-memory tensor reductions
from multiprocessing.reduction import ForkingPickler

from grader.channel import ChannelError, load_reply, validate


class LyingTensor(torch.Tensor):
    """A tensor subclass could override comparisons to claim it equals anything."""

    def __eq__(self, other):
        return True


class CallsOnUnpickle:
    """Unpickling this runs `func(*args)`: what a hostile worker would send."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def as_reply(value) -> bytes:
    """Bytes exactly as the worker's Connection.send writes them."""
    return bytes(ForkingPickler.dumps(value))


def test_real_reply_with_shared_memory_tensor_loads():
    sent = ("ok", torch.arange(6.0).reshape(2, 3), {"launches": 1, "forbidden": []})
    status, tensor, claims = load_reply(as_reply(sent))
    assert status == "ok" and claims == {"launches": 1, "forbidden": []}
    assert torch.equal(tensor, sent[1])


def test_dtypes_and_sizes_load():
    assert load_reply(as_reply((torch.bfloat16, torch.Size([2, 3])))) == (torch.bfloat16, torch.Size([2, 3]))


@pytest.mark.parametrize("func", [os.system, builtins.eval, builtins.exec, subprocess.getoutput],
                         ids=["os.system", "builtins.eval", "builtins.exec", "subprocess.getoutput"])
def test_load_reply_refuses_code_execution(func, tmp_path):
    marker = tmp_path / "pwned"
    command = f"touch {marker}" if func in (os.system, subprocess.getoutput) else \
        f"open({str(marker)!r}, 'w').close()"
    with pytest.raises(ChannelError, match="does not accept"):
        load_reply(pickle.dumps(("ok", CallsOnUnpickle(func, command), {})))
    assert not marker.exists()


def test_load_reply_refuses_a_tensor_subclass_class():
    data = as_reply(("ok", torch.zeros(3).as_subclass(LyingTensor), {}))
    with pytest.raises(ChannelError, match="_rebuild_from_type_v2|LyingTensor"):
        load_reply(data)


def test_load_reply_refuses_a_parameter():
    with pytest.raises(ChannelError, match="Parameter"):
        load_reply(as_reply(torch.nn.Parameter(torch.zeros(2))))


@pytest.mark.parametrize("data", [b"", b"\x80\x04garbage", b"\x00" * 64, pickle.dumps(("ok", 1, {}))[:-3]],
                         ids=["empty", "garbage", "zeros", "truncated"])
def test_load_reply_turns_corrupt_bytes_into_channel_error(data):
    with pytest.raises(ChannelError, match="unreadable reply"):
        load_reply(data)


def test_validate_accepts_nested_tuples_lists_and_dicts_of_tensors():
    value = ("ok", [torch.ones(2), {"lse": torch.zeros(3), "n": 3, "name": "x"}], (1.5, None, True,
                                                                                   torch.float16))
    copied = validate(value)
    assert type(copied) is tuple and type(copied[1]) is list and type(copied[1][1]) is dict
    assert torch.equal(copied[1][0], torch.ones(2))
    assert copied[2] == (1.5, None, True, torch.float16)


def test_validate_returns_clones_the_sender_cannot_touch():
    original = torch.zeros(4)
    copied = validate({"o": original})["o"]
    copied += 1
    assert torch.equal(original, torch.zeros(4))
    original -= 5  # and the other way round: the worker writing into its shared buffer later
    assert torch.equal(copied, torch.ones(4))


def test_validate_detaches_gradients():
    assert not validate(torch.ones(2, requires_grad=True)).requires_grad


def test_validate_refuses_tensor_subclasses():
    with pytest.raises(ChannelError, match="LyingTensor, a tensor subclass"):
        validate(("ok", [torch.zeros(2).as_subclass(LyingTensor)]))
    with pytest.raises(ChannelError, match="Parameter"):
        validate(torch.nn.Parameter(torch.zeros(2)))


def test_validate_refuses_non_string_dict_keys():
    with pytest.raises(ChannelError, match="non-string keys"):
        validate({0: torch.zeros(1)})


@pytest.mark.parametrize("value", [object(), OrderedDict(a=1), CallsOnUnpickle(print), lambda: 1,
                                   {1, 2}, b"bytes", 1 + 2j],
                         ids=["object", "OrderedDict", "custom", "lambda", "set", "bytes", "complex"])
def test_validate_refuses_objects(value):
    with pytest.raises(ChannelError, match="only tensors, numbers, strings"):
        validate(("ok", value))


def test_validate_refuses_subclasses_of_plain_types():
    class Always(float):
        def __eq__(self, other):
            return True

    class LyingStr(str):
        pass

    for value in (Always(1.0), LyingStr("passed")):
        with pytest.raises(ChannelError):
            validate(value)


def test_validate_refuses_deep_nesting():
    value = torch.zeros(1)
    for _ in range(20):
        value = [value]
    with pytest.raises(ChannelError, match="nested too deeply"):
        validate(value)
