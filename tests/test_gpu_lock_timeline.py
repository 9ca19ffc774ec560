"""scripts/investigations/gpu_lock_timeline.py: the lock timelines of runs that shared a GPU, laid side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def timeline(load_script):
    return load_script("investigations/gpu_lock_timeline")


def _write(folder: Path, student: str, intervals: list[str]) -> None:
    (folder / student).mkdir(parents=True)
    (folder / student / "result.json").write_text(json.dumps({"id": student, "gpu_lock": {
        "totals": {}, "intervals": intervals}}))


def test_each_wait_to_share_is_put_down_to_a_neighbour_alone_a_neighbour_queueing_or_neither(tmp_path, timeline):
    _write(tmp_path, "a", ["alone 0.000 2.000", "shared 3.000 5.000"])
    _write(tmp_path, "b", ["wait_shared 0.000 2.000", "shared 2.000 3.000", "wait_alone 3.000 5.000",
                           "alone 5.000 6.000"])
    _write(tmp_path, "c", ["wait_shared 3.500 5.000", "wait_shared 5.500 6.000"])
    (tmp_path / "d").mkdir()                       # a result without a timeline is left out
    (tmp_path / "d" / "result.json").write_text(json.dumps({"id": "d"}))
    report = timeline.analyse(timeline.load_timelines(tmp_path))
    assert set(report["runs"]) == {"a", "b", "c"} and report["span_s"] == pytest.approx(6.0)
    b, c = report["runs"]["b"], report["runs"]["c"]
    assert b["wait_shared while a neighbour was alone"] == pytest.approx(2.0)
    assert c["wait_shared while a neighbour waited to be alone"] == pytest.approx(1.5)   # b at the turnstile
    assert c["wait_shared while a neighbour was alone"] == pytest.approx(0.5)
    assert b["alone"] == pytest.approx(1.0) and b["wait_alone"] == pytest.approx(2.0)
    assert report["batch"] == {"someone alone": pytest.approx(3.0), "shared, nobody alone": pytest.approx(3.0),
                               "nobody holding": pytest.approx(0.0)}
