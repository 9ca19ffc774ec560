"""The checker admits only JSON messages back from the worker, never pickles or code, and tensors only
as raw bytes in memory it laid out itself."""

from __future__ import annotations

import json
import os
import pickle

import pytest
import torch

from grader.worker import channel
from grader.worker.channel import ChannelError, encode_value, read_reply
from grader.worker.shared_tensors import CheckerTransport, WorkerTransport, overlaps


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


@pytest.fixture
def transports():
    checker = CheckerTransport()
    yield checker, WorkerTransport(*checker.worker_fds())
    checker.close()


def round_trip(value, transports):
    """What the checker gets back when the worker returns `value`, through both real sides."""
    checker, worker = transports
    tensors = []
    encoded = encode_value(value, tensors)
    if tensors:
        wanted = read_reply(channel.dump_reply("need_buffers", wanted=worker.wanted(tensors))).wanted
        placements = pickle.loads(pickle.dumps(checker.allocate(wanted)))
        worker.fill(placements, tensors)
    return read_reply(channel.dump_reply("ok", value=encoded, launches=1, forbidden=[]), checker).value


def ok_with(value) -> bytes:
    return channel.dump_reply("ok", value=value, launches=0, forbidden=[])


def test_nested_values_and_tensors_come_back_as_plain_types(transports):
    value = [torch.ones(2), {"lse": torch.zeros(3), "n": 3, "name": "x"}, (1.5, None, True, torch.float16),
             torch.Size([2, 3]), torch.device("cpu"), float("nan")]
    back = round_trip(value, transports)
    assert type(back) is list and type(back[1]) is dict and type(back[2]) is tuple
    assert torch.equal(back[0], torch.ones(2)) and torch.equal(back[1]["lse"], torch.zeros(3))
    assert back[2] == (1.5, None, True, torch.float16) and back[3:5] == [torch.Size([2, 3]), torch.device("cpu")]
    assert back[5] != back[5]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool])
def test_tensor_layouts_and_dtypes_survive(transports, dtype):
    base = (torch.arange(60) % 7).to(dtype).reshape(3, 4, 5)
    for tensor in (base, base.transpose(0, 2), base[:, 1::2, 2:], base[1:2].expand(4, 4, 5), base[:0]):
        back = round_trip(tensor, transports)
        layout = tensor.contiguous().stride() if overlaps(tensor.shape, tensor.stride()) else tensor.stride()
        assert back.dtype == dtype and back.shape == tensor.shape and back.stride() == layout
        assert torch.equal(back, tensor)


def test_arguments_cross_with_their_layout_and_the_worker_gets_a_copy(transports):
    checker, worker = transports
    mine = torch.arange(12.0).reshape(3, 4).t()
    request = worker.load_request(checker.dump_request(channel.Call("call", ("m", "f"), (mine,), {}, (), False)))
    theirs = request.args[0]
    assert torch.equal(theirs, mine) and theirs.stride() == mine.stride()
    theirs.fill_(99.0)
    assert torch.equal(mine, torch.arange(12.0).reshape(3, 4).t())


def test_returned_tensors_belong_to_the_checker(transports):
    checker, worker = transports
    back = round_trip(torch.zeros(4), transports)
    worker.replies.write(0, torch.ones(4))   # the worker writing into the reply memory afterwards
    assert torch.equal(back, torch.zeros(4))


@pytest.mark.parametrize("payload", [
    pickle.dumps(("ok", CallsOnUnpickle(os.system, "touch {marker}"), {})),
    pickle.dumps(CallsOnUnpickle(exec, "open({marker!r}, 'w').close()")),
], ids=["os.system", "exec"])
def test_pickles_are_never_unpickled(payload, tmp_path):
    marker = str(tmp_path / "pwned")
    data = payload.replace(b"{marker}", marker.encode()).replace(b"{marker!r}", repr(marker).encode())
    with pytest.raises(ChannelError, match="unreadable reply"):
        read_reply(data)
    assert not os.path.exists(marker)


@pytest.mark.parametrize("data", [b"", b"\x80\x04garbage", b"\x00" * 64, b'{"kind": "ok", "val', b"[1, 2]",
                                  b'{"kind": 3}', b"[" * 100_000], ids=["empty", "garbage", "zeros", "truncated",
                                                                       "list", "kind", "deep"])
def test_corrupt_bytes_are_a_channel_error(data):
    with pytest.raises(ChannelError, match="unreadable reply"):
        read_reply(data)


@pytest.mark.parametrize("message", [
    {"kind": "ok", "value": {"object": "os.system"}, "launches": 0, "forbidden": []},
    {"kind": "ok", "value": [1, 2], "launches": 0, "forbidden": []},
    {"kind": "ok", "value": 1, "launches": -1, "forbidden": []},
    {"kind": "ok", "value": {"dtype": "not_a_dtype"}, "launches": 0, "forbidden": []},
    {"kind": "ok", "value": {"device": "cuda; rm -rf /"}, "launches": 0, "forbidden": []},
    {"kind": "ok", "value": {"dict": [[1, 2]]}, "launches": 0, "forbidden": []},
    {"kind": "failed", "type_name": "X", "message": {"not": "text"}, "traceback": "", "cuda_broken": False},
    {"kind": "failed", "type_name": "X", "message": "m", "traceback": "", "cuda_broken": "yes"},
    {"kind": "need_buffers", "wanted": [["cpu", "float32", -5]]},
    {"kind": "pickle", "data": "gASV"},
], ids=["unknown-tag", "untagged-list", "negative-count", "dtype", "device", "int-key", "message-object",
        "flag", "negative-buffer", "unknown-kind"])
def test_malformed_messages_are_refused(message):
    with pytest.raises(ChannelError, match="malformed|does not accept"):
        read_reply(json.dumps(message).encode())


def test_errors_come_back_as_text():
    reply = read_reply(channel.dump_reply("failed", type_name="ValueError", message="bad shape",
                                          traceback="Traceback ...", cuda_broken=False))
    assert reply == channel.Failed("ValueError", "bad shape", "Traceback ...", False)


@pytest.mark.parametrize("tensor", [[5, [2], [1]], [0, [100], [1]], [0, [2, 2], [4, 1]]],
                         ids=["unallocated-buffer", "too-long", "strides-past-the-end"])
def test_tensor_references_outside_the_checkers_buffers_are_refused(transports, tensor):
    checker, _ = transports
    checker.allocate([("cpu", torch.float32, 4)])
    with pytest.raises(ChannelError, match="did not allocate|does not fit"):
        read_reply(ok_with({"tensor": tensor}), checker)


@pytest.mark.parametrize("tensor", [[0, [60000, 50000], [0, 0]], [0, [4, 4], [0, 1]], [0, [2, 2], [1, 1]],
                                    [0, [3, 2], [1, 1]]], ids=["zero-strides-huge", "zero-stride", "overlapping",
                                                               "interleaved"])
def test_reply_tensors_with_zero_or_overlapping_strides_are_refused(transports, tensor):
    """4 bytes seen as 60000 x 50000 elements: the checker's first NaN check would fill 12 GB."""
    checker, _ = transports
    checker.allocate([("cpu", torch.float32, 4)])
    with pytest.raises(ChannelError, match="overlapping strides"):
        read_reply(ok_with({"tensor": tensor}), checker)


def test_an_expanded_tensor_the_student_returns_arrives_as_its_values(transports):
    back = round_trip(torch.arange(3.0).reshape(3, 1).expand(3, 4000), transports)
    assert back.shape == (3, 4000) and back.is_contiguous()
    assert torch.equal(back, torch.arange(3.0).reshape(3, 1).expand(3, 4000))


def test_reply_memory_shrunk_by_the_worker_is_a_channel_error(transports):
    checker, worker = transports
    checker.allocate([("cpu", torch.float32, 4)])
    os.ftruncate(worker.replies.fd, 0)
    with pytest.raises(ChannelError, match="outside the reply memory"):
        read_reply(ok_with({"tensor": [0, [4], [1]]}), checker)


def test_encoder_refuses_tensor_subclasses_and_objects():
    with pytest.raises(ChannelError, match="LyingTensor, a tensor subclass"):
        encode_value([torch.zeros(2).as_subclass(LyingTensor)], [])
    with pytest.raises(ChannelError, match="Parameter"):
        encode_value(torch.nn.Parameter(torch.zeros(2)), [])
    for value in (object(), CallsOnUnpickle(print), lambda: 1, {1, 2}, b"bytes", 1 + 2j):
        with pytest.raises(ChannelError, match="only tensors, numbers, strings"):
            encode_value(value, [])
    with pytest.raises(ChannelError, match="non-string keys"):
        encode_value({0: 1}, [])


def test_deep_nesting_is_refused_both_ways():
    value, encoded = 0, 0
    for _ in range(20):
        value, encoded = [value], {"list": [encoded]}
    with pytest.raises(ChannelError, match="nested too deeply"):
        encode_value(value, [])
    with pytest.raises(ChannelError, match="nested too deeply"):
        read_reply(ok_with(encoded))


def test_spawning_side_imports_no_torch():
    """The plugin spawns the worker before the checker imports torch, so both imports overlap."""
    import subprocess
    import sys

    code = ("import sys; from grader import impl; from grader.worker import channel, shared_tensors; "
            "shared_tensors.CheckerTransport(); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
