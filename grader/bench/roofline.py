"""The roofline chart of `grader bench`, written as plain SVG (no plotting library).

Axes are log-log: arithmetic intensity (FLOP per byte of compulsory HBM traffic) across, achieved
TFLOP/s up. The roof is the lecture's P = min(pi, beta * AI), with pi and beta MEASURED on this GPU
(cuBLAS bf16 8192^3 and a device-to-device copy), so a point's distance to the roof is what is left to
gain on this machine. The caption repeats the ridge-point reasoning.
"""

from __future__ import annotations

import math
import textwrap
from html import escape

WIDTH, HEIGHT = 820, 680
LEFT, RIGHT, TOP, PLOT_BOTTOM = 80, 190, 40, 460     # plot area; legend on the right, caption below
COLOURS = {"matmul": "#1f77b4", "softmax": "#d62728", "flash_attention": "#2ca02c", "training": "#9467bd"}


def ridge_point(peak_tflops: float, bandwidth_gbs: float) -> float:
    """FLOP per byte at which the bandwidth roof meets the compute roof: pi / beta."""
    return peak_tflops * 1e12 / (bandwidth_gbs * 1e9)


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbs: float) -> float:
    return min(peak_tflops, intensity * bandwidth_gbs / 1e3)


def caption(gpu: str, peak_tflops: float, bandwidth_gbs: float) -> str:
    ridge = ridge_point(peak_tflops, bandwidth_gbs)
    return (
        f"Roofline of {gpu}: compute roof π = {peak_tflops:,.0f} TFLOP/s (measured cuBLAS bf16 8192³), "
        f"bandwidth roof β = {bandwidth_gbs:,.0f} GB/s (measured device-to-device copy). "
        f"Attainable = min(π, β × AI). Ridge point AI* = π / β = {ridge:,.0f} FLOP/byte: a kernel "
        f"doing fewer FLOPs per byte it must move than this cannot be compute-bound however well it is "
        f"written, only bandwidth-bound. Softmax (about 1 FLOP/byte) lies two orders of magnitude left of "
        f"the ridge, so it is graded in GB/s against the copy; a square matmul (n/3 FLOP/byte in bf16) and "
        f"attention (about N/2 per head) lie right of it, where only the compute roof limits them, so they "
        f"are graded against cuBLAS and cuDNN. The gap between a point and the roof above it is what is "
        f"left to gain on this machine."
    )


def roofline_svg(points: list[dict], environment: dict) -> str:
    """SVG text: roofs from `environment` (matmul_tflops, copy_gbs, gpu_name), one dot per point.

    points: dicts with "kernel", "case", "intensity" (FLOP/byte) and "tflops" (achieved).
    """
    peak, bandwidth = float(environment["matmul_tflops"]), float(environment["copy_gbs"])
    gpu = environment.get("gpu_name") or "this GPU"
    ridge = ridge_point(peak, bandwidth)
    plotted = [p for p in points if p.get("tflops") and p.get("intensity")]
    x_low = min([0.1] + [p["intensity"] / 2 for p in plotted])
    x_high = max([1e4, ridge * 10] + [p["intensity"] * 2 for p in plotted])
    y_low = min([1.0, peak / 1e3] + [p["tflops"] / 2 for p in plotted])
    y_high = peak * 2
    scale = _Scale(x_low, x_high, y_low, y_high)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f"<title>Roofline: {escape(gpu)}</title>",
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        *_grid(scale),
        *_roof(scale, peak, bandwidth, ridge),
        *(_point(scale, p) for p in plotted),
        *_legend(plotted),
        *_caption_lines(caption(gpu, peak, bandwidth)),
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


class _Scale:
    """Log-log mapping from (FLOP/byte, TFLOP/s) to pixels of the plot area."""

    def __init__(self, x_low, x_high, y_low, y_high):
        self.x_low, self.x_high = math.log10(x_low), math.log10(x_high)
        self.y_low, self.y_high = math.log10(y_low), math.log10(y_high)

    def x(self, intensity: float) -> float:
        fraction = (math.log10(intensity) - self.x_low) / (self.x_high - self.x_low)
        return LEFT + fraction * (WIDTH - LEFT - RIGHT)

    def y(self, tflops: float) -> float:
        fraction = (math.log10(tflops) - self.y_low) / (self.y_high - self.y_low)
        return PLOT_BOTTOM - fraction * (PLOT_BOTTOM - TOP)


def _grid(scale: _Scale) -> list[str]:
    parts = [f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - LEFT - RIGHT}" height="{PLOT_BOTTOM - TOP}" '
             'fill="none" stroke="#444"/>']
    for power in range(math.ceil(scale.x_low), math.floor(scale.x_high) + 1):
        x = scale.x(10.0 ** power)
        parts.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{PLOT_BOTTOM}" stroke="#ddd"/>')
        parts.append(f'<text x="{x:.1f}" y="{PLOT_BOTTOM + 16}" text-anchor="middle">{_tick(power)}</text>')
    for power in range(math.ceil(scale.y_low), math.floor(scale.y_high) + 1):
        y = scale.y(10.0 ** power)
        parts.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick(power)}</text>')
    middle = (LEFT + WIDTH - RIGHT) / 2
    parts.append(f'<text x="{middle:.0f}" y="{PLOT_BOTTOM + 36}" text-anchor="middle">'
                 "arithmetic intensity (FLOP per byte of HBM traffic)</text>")
    parts.append(f'<text transform="translate(22 {(TOP + PLOT_BOTTOM) / 2:.0f}) rotate(-90)" '
                 'text-anchor="middle">achieved TFLOP/s</text>')
    return parts


def _tick(power: int) -> str:
    return f"{10.0 ** power:g}"


def _roof(scale: _Scale, peak: float, bandwidth: float, ridge: float) -> list[str]:
    x_left = 10.0 ** scale.x_low
    y_left = attainable_tflops(x_left, peak, bandwidth)
    start = (x_left, max(y_left, 10.0 ** scale.y_low))
    if y_left < 10.0 ** scale.y_low:       # the slope enters the plot through its bottom edge
        start = ((10.0 ** scale.y_low) * 1e3 / bandwidth, 10.0 ** scale.y_low)
    path = [start, (ridge, peak), (10.0 ** scale.x_high, peak)]
    points = " ".join(f"{scale.x(a):.1f},{scale.y(p):.1f}" for a, p in path)
    x_ridge = scale.x(ridge)
    return [
        f'<polyline points="{points}" fill="none" stroke="#000" stroke-width="2"/>',
        f'<line x1="{x_ridge:.1f}" y1="{TOP}" x2="{x_ridge:.1f}" y2="{PLOT_BOTTOM}" stroke="#888" '
        'stroke-dasharray="5,4"/>',
        f'<text x="{x_ridge + 4:.1f}" y="{TOP + 14}">ridge {ridge:,.0f} FLOP/B</text>',
        f'<text x="{scale.x(10.0 ** scale.x_high) - 4:.1f}" y="{scale.y(peak) - 6:.1f}" '
        f'text-anchor="end">π = {peak:,.0f} TFLOP/s</text>',
        f'<text x="{scale.x(ridge / 30):.1f}" y="{scale.y(attainable_tflops(ridge / 30, peak, bandwidth)) - 8:.1f}" '
        f'text-anchor="middle">β = {bandwidth:,.0f} GB/s</text>',
    ]


def _point(scale: _Scale, point: dict) -> str:
    colour = COLOURS.get(point["kernel"], "#555")
    label = f"{point['kernel']} {point['case']}: {point['tflops']:,.1f} TFLOP/s at {point['intensity']:,.1f} FLOP/B"
    return (f'<circle cx="{scale.x(point["intensity"]):.1f}" cy="{scale.y(point["tflops"]):.1f}" r="5" '
            f'fill="{colour}" fill-opacity="0.75" stroke="#222"><title>{escape(label)}</title></circle>')


def _legend(points: list[dict]) -> list[str]:
    kernels = sorted({p["kernel"] for p in points}, key=lambda k: list(COLOURS).index(k) if k in COLOURS else 99)
    parts, x = [], WIDTH - RIGHT + 16
    for index, kernel in enumerate(kernels):
        y = TOP + 10 + 20 * index
        parts.append(f'<circle cx="{x}" cy="{y}" r="5" fill="{COLOURS.get(kernel, "#555")}" stroke="#222"/>')
        parts.append(f'<text x="{x + 10}" y="{y + 4}">{escape(kernel)}</text>')
    return parts


def _caption_lines(text: str) -> list[str]:
    lines = textwrap.wrap(text, width=125)
    return [f'<text x="{LEFT - 60}" y="{PLOT_BOTTOM + 64 + 16 * index}" font-size="11">{escape(line)}</text>'
            for index, line in enumerate(lines)]
