"""Which checks can run where: read from the suites' markers, so the write-up's table cannot drift.

A check runs on a CPU unless every test carrying it is marked `gpu_only` (or is a perf test); it needs
Triton when every test carrying it is marked `triton` (Triton's interpreter runs those on a CPU).
The scan is static (`ast`): the write-up is built without importing the tests.
"""

from __future__ import annotations

import ast
from pathlib import Path


def _markers(node: ast.AST) -> tuple[set[str], set[str]]:
    """(check ids, other marker names) on a test function's decorators."""
    checks, names = set(), set()
    for decorator in getattr(node, "decorator_list", []):
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call else decorator
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) \
                and target.value.attr == "mark":
            if target.attr in ("check", "perf") and call and call.args and isinstance(call.args[0], ast.Constant):
                checks.add(call.args[0].value)
            names.add(target.attr)
    return checks, names


def check_needs(root: Path) -> dict[str, set[str]]:
    """{check id: needs}, where needs holds "gpu" and/or "triton" when every test of the check needs it."""
    needs: dict[str, set[str]] = {}
    for suite in ("tests_public", "tests_hidden"):
        for path in sorted((root / suite).glob("test_*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.name.startswith("test_"):
                    continue
                checks, names = _markers(node)
                this = {"gpu"} if names & {"gpu_only", "perf"} else set()
                if "triton" in names or "gpu" in this:
                    this.add("triton")
                for check in checks:
                    needs[check] = needs[check] & this if check in needs else set(this)
    return needs


def points_by_place(root: Path, points) -> dict[str, dict[str, float]]:
    """Points measurable per place and suite: {"cpu_no_triton" | "cpu_interpreter" | "gpu": {"public":,
    "hidden":, "perf":}}. A check partly marked `triton` counts as runnable without Triton (some of its
    tests run there)."""
    needs = check_needs(root)
    places = {"cpu_no_triton": set(), "cpu_interpreter": {"triton"}, "gpu": {"gpu", "triton"}}
    table = {}
    for place, has in places.items():
        row = {"public": 0.0, "hidden": 0.0, "perf": 0.0}
        for check in points.checks.values():
            need = {"gpu", "triton"} if check.perf else needs.get(check.id, set())   # timing needs the GPU
            if need - has:
                continue
            row["perf" if check.perf else check.suite] += check.points
        table[place] = row
    return table
