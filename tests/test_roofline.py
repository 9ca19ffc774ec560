"""The roofline chart: the lecture's arithmetic, and an SVG that places each kernel where it belongs."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from grader.bench.roofline import attainable_tflops, caption, ridge_point, roofline_svg

SVG = "{http://www.w3.org/2000/svg}"
H200_MEASURED = {"gpu_name": "NVIDIA H200", "matmul_tflops": 790.0, "copy_gbs": 4300.0}
POINTS = [
    {"kernel": "matmul", "case": "bf16 8192^3", "intensity": 8192 / 3, "tflops": 640.0},
    {"kernel": "softmax", "case": "bf16 32768x4096 <rows>", "intensity": 1.25, "tflops": 4.6},
    {"kernel": "flash_attention", "case": "fwd d128", "intensity": 2048.0, "tflops": 450.0},
]


def test_ridge_point_is_peak_over_bandwidth_as_in_the_lecture():
    assert ridge_point(989.0, 3350.0) == pytest.approx(295.2, abs=0.1)     # H100: 989 TFLOP/s, 3.35 TB/s
    assert ridge_point(790.0, 4300.0) == pytest.approx(183.7, abs=0.1)     # measured H200 (perf-anchors 4)


def test_attainable_is_bandwidth_times_intensity_left_of_the_ridge_and_peak_right_of_it():
    assert attainable_tflops(10.0, 100.0, 1000.0) == pytest.approx(10.0)     # toy GPU of the notes: I=10
    assert attainable_tflops(1000.0, 100.0, 1000.0) == pytest.approx(100.0)


def parse(svg_text):
    return ET.fromstring(svg_text)


def test_svg_is_well_formed_with_one_dot_per_measured_kernel():
    root = parse(roofline_svg(POINTS + [{"kernel": "training", "case": "x", "intensity": 5.0, "tflops": None}],
                              H200_MEASURED))
    dots = [c for c in root.iter(f"{SVG}circle") if c.find(f"{SVG}title") is not None]
    assert len(dots) == 3        # the point without a measurement is left out


def test_softmax_sits_left_of_the_ridge_and_matmul_right_of_it():
    root = parse(roofline_svg(POINTS, H200_MEASURED))
    x_of = {c.find(f"{SVG}title").text.split(" ")[0]: float(c.get("cx"))
            for c in root.iter(f"{SVG}circle") if c.find(f"{SVG}title") is not None}
    ridge_line = next(line for line in root.iter(f"{SVG}line") if line.get("stroke-dasharray"))
    x_ridge = float(ridge_line.get("x1"))
    assert x_of["softmax"] < x_ridge < x_of["matmul"]


def test_points_never_sit_above_the_roof():
    root = parse(roofline_svg(POINTS, H200_MEASURED))
    roof = next(root.iter(f"{SVG}polyline"))
    corners = [tuple(map(float, pair.split(","))) for pair in roof.get("points").split()]
    peak_y = corners[1][1]
    for circle in root.iter(f"{SVG}circle"):
        if circle.find(f"{SVG}title") is not None:
            assert float(circle.get("cy")) >= peak_y     # larger y is lower on the page


def test_caption_gives_the_ridge_reasoning_with_the_measured_roofs():
    text = caption("NVIDIA H200", 790.0, 4300.0)
    assert "184 FLOP/byte" in text and "790 TFLOP/s" in text and "4,300 GB/s" in text
    assert "bandwidth-bound" in text and "compute roof" in text
    svg = roofline_svg(POINTS, H200_MEASURED)
    assert "Ridge point" in svg


def test_case_names_are_escaped():
    svg = roofline_svg(POINTS, H200_MEASURED)
    assert "&lt;rows&gt;" in svg and "<rows>" not in svg
