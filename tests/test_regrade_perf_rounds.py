"""scripts/measure/regrade_perf_rounds.py: a batch's recorded perf rounds, re-graded under the current rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def regrade(load_script):
    return load_script("measure/regrade_perf_rounds")


def _result(folder: Path, student: str, ratio: float, rounds: list[tuple[float, float, float]]) -> None:
    """One perf test graded `ratio`, whose rounds are (claim, worker events, worker span), each against a
    1 ms baseline."""
    recorded = [{"claimed_ms": claim, "baseline_ms": {"base": 1.0}, "worker_events_ms": events,
                 "worker_synced_ms": synced} for claim, events, synced in rounds]
    test = {"name": "test_speed",
            "perf": {"ratio": ratio, "measured": {"baseline_ms": {"base": 1.0}, "rounds": recorded}}}
    (folder / student).mkdir(parents=True)
    (folder / student / "result.json").write_text(json.dumps({"problems": [{"checks": [{"tests": [test]}]}]}))


def test_rounds_noise_slowed_are_regraded_and_the_rest_left_alone(tmp_path, regrade, capsys):
    # graded by the median of each round's own claim, the rule before the quickest round
    _result(tmp_path, "slowed", 0.4, [(2.5, 1.0, 2.75), (2.5, 1.0, 2.75), (1.0, 1.0, 1.1)])
    _result(tmp_path, "events_slowed", 0.4, [(2.5, 2.5, 1.1), (2.5, 2.5, 1.1), (1.0, 1.0, 1.1)])
    _result(tmp_path, "steady", 1.0, [(1.0, 1.0, 1.0), (1.0, 1.0, 1.05), (1.0, 1.0, 1.0)])
    assert regrade.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "slowed test_speed: 0.4000 -> 1.0000" in out
    assert "events_slowed test_speed: 0.4000 -> 1.0000" in out
    assert "steady" not in out.replace(str(tmp_path), "")
    assert "2 of 3 perf tests moved" in out



def test_claims_are_made_again_from_the_worker_s_account_by_the_current_claim_rule(tmp_path, regrade, capsys):
    # a side-stream kernel's rounds as an H100 recorded them under the old claim, span / 1.1: its events
    # saw almost nothing, so today's claim is its whole span
    _result(tmp_path, "side_stream", 1.1, [(1.0 / 1.1, 0.002, 1.0)] * 3)
    _result(tmp_path, "honest", 1.0, [(1.0, 1.0, 1.05)] * 3)
    assert regrade.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "side_stream test_speed: 1.1000 -> 1.0002" in out
    assert "honest" not in out.replace(str(tmp_path), "")


def test_a_folder_without_results_is_named(tmp_path, regrade, capsys):
    assert regrade.main([str(tmp_path)]) == 2
    assert f"{tmp_path}: no */result.json here" in capsys.readouterr().err
