"""The grader's modules import each other without loops: who owns what stays readable."""

from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parent.parent / "grader"


def module_names() -> dict[str, Path]:
    names = {}
    for path in GRADER.rglob("*.py"):
        parts = path.relative_to(GRADER.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(path: Path, known) -> set[str]:
    """grader modules `path` imports anywhere (top level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("grader"):
            found |= {f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in known else node.module
                      for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("grader")}
    return {name for name in found if name in known and name != "grader"}


def test_grader_modules_import_no_loops():
    known = module_names()
    graph = {name: imports_of(path, known) - {name} for name, path in known.items()}
    loops = []
    for start in graph:
        stack = [[start]]
        while stack:
            path = stack.pop()
            for nxt in graph[path[-1]]:
                if nxt == start:
                    loops.append(" -> ".join(path + [start]))
                elif nxt not in path:
                    stack.append(path + [nxt])
    assert loops == []
