"""Hidden tests stay out of student code's reach in a graded run (SECURITY.md, "Sandbox").

First link: no scenario that `impl.run` sends to the worker lives in a hidden test module, so the worker
never has to import one.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from grader.impl import InProcessImpl, resolve

REPO = Path(__file__).resolve().parent.parent


# --- no scenario lives in a hidden test module ------------------------------------------------------


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _scenario_module(folder: Path, name: str):
    folder.mkdir(parents=True)
    (folder / f"{name}.py").write_text("def scenario(modules):\n    return 7\n")
    return _load(folder / f"{name}.py", name)


def test_impl_run_refuses_a_function_of_a_hidden_test_module(tmp_path):
    hidden = _scenario_module(tmp_path / "tests_hidden", "hidden_scenarios_for_refusal")
    public = _scenario_module(tmp_path / "tests_public", "public_scenarios_for_refusal")
    impl = InProcessImpl(resolve("solutions"))
    try:
        with pytest.raises(TypeError, match="hidden test module"):
            impl.run(hidden.scenario)
        assert impl.run(public.scenario) == 7
    finally:
        sys.modules.pop(hidden.__name__, None)
        sys.modules.pop(public.__name__, None)


def _functions_run_in_the_worker(tree: ast.Module) -> set[str]:
    """Names passed as the first argument of `impl.run(...)` in a test file."""
    return {call.args[0].id for call in ast.walk(tree)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "run"
            and isinstance(call.func.value, ast.Name) and call.func.value.id == "impl"
            and call.args and isinstance(call.args[0], ast.Name)}


@pytest.mark.parametrize("path", sorted((REPO / "tests_hidden").glob("test_*.py")), ids=lambda p: p.name)
def test_no_hidden_test_module_defines_what_it_runs_in_the_worker(path):
    # Also covers GPU-only tests, which never reach impl.run's own refusal on a CPU machine.
    tree = ast.parse(path.read_text())
    defined_here = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert not _functions_run_in_the_worker(tree) & defined_here, "move them to grader/scenarios/"
