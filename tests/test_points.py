"""Points files: the real table loads; malformed ones are refused naming file and key; calibrated
ladders override the defaults per GPU model, falling back to the nearest calibrated model."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from grader.errors import PointsFileError
from grader.points import POINTS_DIR, Ladder, calibrated_gpu, load_points

GOOD = textwrap.dedent('''
    [problem]
    id = "softmax"
    title = "Softmax"
    order = 2

    [checks."softmax.rows"]
    points = 3
    description = "rows"

    [perf."softmax.perf.rows"]
    points = 4
    ladder = { pass = 0.5, good = 0.7, excellent = 0.85 }
''')


def write_points(folder: Path, text: str, name: str = "softmax") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(textwrap.dedent(text))
    return folder


def load(folder: Path, calibration: dict | None = None, gpu_name: str | None = None):
    calibration_file = folder / "calibration.json"
    if calibration is not None:
        calibration_file.write_text(json.dumps(calibration))
    return load_points(folder, calibration_file, gpu_name=gpu_name)


def test_the_real_points_table_loads_with_unique_prefixed_ids():
    table = load_points(POINTS_DIR)
    assert table.problems and table.total > 0
    for problem in table.problems:
        assert all(check.id.startswith(problem.id + ".") for check in problem.checks)
    ids = [check.id for problem in table.problems for check in problem.checks]
    assert len(ids) == len(set(ids))


def test_good_file_loads_with_defaults(tmp_path):
    table = load(write_points(tmp_path, GOOD))
    check, perf = table.problem("softmax").checks
    assert (check.id, check.points, check.suite, check.perf) == ("softmax.rows", 3.0, "public", False)
    assert (perf.suite, perf.perf, perf.ladder) == ("hidden", True, Ladder(0.5, 0.7, 0.85, "default"))
    assert table.total == 7


def test_problems_are_ordered_by_order_then_id(tmp_path):
    write_points(tmp_path, GOOD)
    write_points(tmp_path, '[problem]\nid = "matmul"\ntitle = "M"\norder = 1\n', name="matmul")
    assert [p.id for p in load(tmp_path).problems] == ["matmul", "softmax"]


@pytest.mark.parametrize("text, key", [
    (GOOD.replace('checks."softmax.rows"', 'checks."matmul.rows"'), "must start with 'softmax.'"),
    (GOOD.replace("points = 3\n", ""), "checks.'softmax.rows'.points"),
    (GOOD.replace("points = 3", 'points = "3"'), "checks.'softmax.rows'.points has the wrong type"),
    (GOOD.replace("points = 3", "points = -1"), "checks.'softmax.rows'.points must be >= 0"),
    (GOOD.replace('description = "rows"', 'suite = "secret"'), "checks.'softmax.rows'.suite must be one of"),
    (GOOD.replace("good = 0.7", "good = 0.4"), "perf.'softmax.perf.rows'.ladder must rise"),
    (GOOD.replace("good = 0.7, ", ""), "perf.'softmax.perf.rows'.ladder needs"),
    (GOOD.replace("ladder = { pass = 0.5, good = 0.7, excellent = 0.85 }", ""),
     "perf.'softmax.perf.rows'.ladder"),
    (GOOD.replace('id = "softmax"', 'id = "soft"'), "problem.id is 'soft' but the file is named 'softmax'"),
    (GOOD.replace('title = "Softmax"\n', ""), "missing key 'problem.title'"),
    (GOOD.replace("[problem]", "[problm]"), "missing key 'problem'"),
    (GOOD + "\n[broken\n", "softmax.toml"),
], ids=["id-prefix", "missing-points", "points-type", "negative-points", "bad-suite", "ladder-not-rising",
        "ladder-level-missing", "ladder-missing", "id-vs-filename", "missing-title", "missing-problem",
        "bad-toml"])
def test_malformed_file_is_refused_naming_file_and_key(tmp_path, text, key):
    write_points(tmp_path, text)
    with pytest.raises(PointsFileError) as error:
        load(tmp_path)
    assert str(tmp_path / "softmax.toml") in str(error.value)
    assert key in str(error.value)


def test_same_id_as_check_and_perf_is_refused(tmp_path):
    write_points(tmp_path, GOOD.replace('perf."softmax.perf.rows"', 'perf."softmax.rows"'))
    with pytest.raises(PointsFileError, match="softmax.rows"):
        load(tmp_path)


def test_bad_calibration_json_is_refused_naming_the_file(tmp_path):
    write_points(tmp_path, GOOD)
    (tmp_path / "calibration.json").write_text("{not json")
    with pytest.raises(PointsFileError, match="calibration.json: not valid JSON"):
        load(tmp_path)


CALIBRATION = {
    "NVIDIA H200": {"softmax.perf.rows": {"pass": 0.6, "good": 0.75, "excellent": 0.9,
                                          "reference_ratio": 0.95}},
    "NVIDIA A100-SXM4-80GB": {"softmax.perf.rows": {"pass": 0.3, "good": 0.4, "excellent": 0.5}},
}


def perf_ladder(table):
    return table.checks["softmax.perf.rows"].ladder


def test_calibrated_ladder_overrides_the_default(tmp_path):
    table = load(write_points(tmp_path, GOOD), CALIBRATION, gpu_name="NVIDIA H200")
    assert perf_ladder(table) == Ladder(0.6, 0.75, 0.9, "NVIDIA H200")


def test_nearest_calibrated_model_is_used_for_an_uncalibrated_gpu(tmp_path):
    assert calibrated_gpu(CALIBRATION, "NVIDIA H200 NVL") == "NVIDIA H200"
    table = load(write_points(tmp_path, GOOD), CALIBRATION, gpu_name="NVIDIA H200 NVL")
    assert perf_ladder(table).source == "NVIDIA H200"


def test_default_ladder_when_nothing_is_calibrated(tmp_path):
    assert calibrated_gpu({}, "NVIDIA H200") is None
    table = load(write_points(tmp_path, GOOD), {}, gpu_name="NVIDIA H200")
    assert perf_ladder(table).source == "default"


def test_default_ladder_for_a_check_the_calibration_lacks(tmp_path):
    calibration = {"NVIDIA H200": {"softmax.perf.other": {"pass": 1, "good": 2, "excellent": 3}}}
    table = load(write_points(tmp_path, GOOD), calibration, gpu_name="NVIDIA H200")
    assert perf_ladder(table) == Ladder(0.5, 0.7, 0.85, "default")


def test_calibrated_ladder_must_rise_too(tmp_path):
    calibration = {"NVIDIA H200": {"softmax.perf.rows": {"pass": 0.9, "good": 0.5, "excellent": 1.0}}}
    with pytest.raises(PointsFileError, match="must rise"):
        load(write_points(tmp_path, GOOD), calibration, gpu_name="NVIDIA H200")


@pytest.mark.parametrize("ratio, level", [(0.49, "below"), (0.5, "pass"), (0.69, "pass"), (0.7, "good"),
                                          (0.85, "excellent"), (3.0, "excellent")])
def test_ladder_levels_start_at_their_ratio(ratio, level):
    assert Ladder(0.5, 0.7, 0.85).level(ratio) == level


def test_a_kernel_exact_on_core_shapes_earns_at_least_half_its_correctness_points():
    # a kernel without boundary masks, exact on core shapes, must not score 0 of 26 Triton points
    table = load_points(POINTS_DIR)
    kernels: dict[tuple[str, str], dict[str, float]] = {}
    for problem in table.problems:
        for check in problem.checks:
            if check.kernel and check.tier in ("core", "robustness"):
                tiers = kernels.setdefault((problem.id, check.kernel), {"core": 0.0, "robustness": 0.0})
                tiers[check.tier] += check.points
    assert ("flash_attention", "triton_forward") in kernels
    for (problem, kernel), tiers in kernels.items():
        assert tiers["core"] >= tiers["robustness"], f"{problem} {kernel}: core {tiers['core']} < half of {tiers}"


def test_an_unknown_tier_is_refused(tmp_path):
    with pytest.raises(PointsFileError, match="tier must be one of"):
        load(write_points(tmp_path, GOOD.replace("points = 3\n", 'points = 3\ntier = "easy"\n')))
