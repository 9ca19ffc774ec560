"""Hidden tests stay out of student code's reach in a graded run (SECURITY.md, "Sandbox").

The chain: no scenario that `impl.run` sends to the worker lives in a hidden test module (so the worker
never imports one, and never has tests_hidden on its path); a sandboxed run gets a disposable copy of the
hidden suite that the checker empties right after collection; the worker imports the student's modules
only on its first call, which comes after collection. The gallery's `read_hidden_tests` attack checks the
whole chain through the real runner; these tests pin each link.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from grader import disposable
from grader.grade.checker_tree import build_checker_tree
from grader.grade.settings import Settings
from grader.impl import InProcessImpl, IsolatedImpl
from grader.worker.modules import resolve

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
        with pytest.raises(TypeError, match="cannot run in the worker"):   # the grader's own only
            impl.run(public.scenario)
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


# --- the disposable copy ---------------------------------------------------------------------------


def _hidden_suite(folder: Path) -> Path:
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "test_x_hidden.py").write_text("SECRET = 1\n")
    (folder / "__pycache__" / "test_x_hidden.cpython.pyc").write_bytes(b"SECRET")
    for path in (folder / "test_x_hidden.py", folder / "__pycache__" / "test_x_hidden.cpython.pyc"):
        path.chmod(0o444)
    for path in (folder / "__pycache__", folder):
        path.chmod(0o555)       # read-only, like the warmed checker tree
    return folder


def test_copy_keeps_sources_and_bytecode_and_is_marked(tmp_path):
    copy = disposable.make_copy(_hidden_suite(tmp_path / "tests_hidden"), tmp_path / "scratch" / "copy")
    names = sorted(str(p.relative_to(copy)) for p in copy.rglob("*"))
    assert names == [disposable.MARKER, "__pycache__", "__pycache__/test_x_hidden.cpython.pyc", "test_x_hidden.py"]


def test_emptying_the_named_copy_deletes_everything_in_it(tmp_path):
    copy = disposable.make_copy(_hidden_suite(tmp_path / "tests_hidden"), tmp_path / "copy")
    assert disposable.empty_named_copy({disposable.ENV: str(copy)}) == copy
    assert copy.is_dir() and list(copy.iterdir()) == []      # the folder stays: it is a mount point


def test_an_unmarked_folder_is_refused_and_kept(tmp_path):
    original = _hidden_suite(tmp_path / "tests_hidden")
    with pytest.raises(disposable.NotDisposable, match="not a disposable copy"):
        disposable.empty_named_copy({disposable.ENV: str(original)})
    assert (original / "test_x_hidden.py").is_file()


def test_nothing_is_emptied_unless_the_runner_names_a_folder():
    assert disposable.empty_named_copy({}) is None


def test_the_resume_fingerprint_still_covers_the_hidden_tests(tmp_path):
    suite = tmp_path / "suite"
    (suite / "tests_public").mkdir(parents=True)
    (suite / "tests_hidden").mkdir()
    (suite / "tests_hidden" / "test_x_hidden.py").write_text("A = 1\n")
    settings = Settings(submissions=tmp_path, out=tmp_path / "out", tests_root=suite)
    first = build_checker_tree(settings, tmp_path / "one")
    (suite / "tests_hidden" / "test_x_hidden.py").write_text("A = 2\n")
    assert build_checker_tree(settings, tmp_path / "two") != first


# --- the order: collected, emptied, then student code -----------------------------------------------


POINTS = textwrap.dedent('''
    [problem]
    id = "softmax"
    title = "Fake softmax"
    order = 1
    [checks."softmax.fake.public"]
    points = 1
    [checks."softmax.fake.hidden"]
    points = 1
    suite = "hidden"
''')

# What the student's module saw of the hidden suite when it was imported (the worker's first call).
STUDENT = textwrap.dedent('''
    import os, sys

    _FOLDER = os.environ.get("GRADER_DISPOSABLE_TESTS", "")
    SEEN_AT_IMPORT = sorted(os.listdir(_FOLDER)) if _FOLDER else ["no folder named"]
    ON_PATH = [p for p in sys.path if p.rstrip("/").endswith("tests_hidden")]

    def seen():
        return SEEN_AT_IMPORT, ON_PATH

    def double(x):
        return 2 * x

    def dies(x):
        os._exit(1)
''')

PUBLIC = textwrap.dedent('''
    import pytest

    @pytest.mark.check("softmax.fake.public")
    def test_student_code_found_no_hidden_tests(impl):
        seen, on_path = impl.softmax.seen()
        assert seen == [] and on_path == [], f"student code saw {seen}, path {on_path}"

    @pytest.mark.check("softmax.fake.public")
    def test_a_respawned_worker_finds_none_either(impl):
        with pytest.raises(AssertionError, match="died"):
            impl.softmax.dies(0)
        seen, on_path = impl.softmax.seen()   # a fresh worker, spawned after pytest put tests_hidden on sys.path
        assert seen == [] and on_path == [], f"respawned: student code saw {seen}, path {on_path}"
''')

HIDDEN = textwrap.dedent('''
    import pytest

    @pytest.mark.check("softmax.fake.hidden")
    def test_hidden_runs_from_memory(impl):
        assert impl.softmax.double(21) == 42

    @pytest.mark.check("softmax.fake.hidden")
    def test_hidden_failure_still_reports(impl):
        assert impl.softmax.double(1) == 3, "hidden verdict without its source"
''')


def _run_fake_project(root: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRADER_POINTS_DIR": str(root / "points"),
           "GRADER_FORCE_CPU": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
           disposable.ENV: str(root / "tests_hidden")}
    for key in ("GRADER_IMPL", "GRADER_ISOLATE"):
        env.pop(key, None)
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", "-p", "no:cacheprovider", "-q",
               "--tb=short", "--rootdir", str(root), "--impl", str(root / "submission"),
               "tests_public", "tests_hidden", *extra]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def fake_project(tmp_path):
    (tmp_path / "points").mkdir()
    (tmp_path / "points" / "softmax.toml").write_text(POINTS)
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "softmax.py").write_text(STUDENT)
    (tmp_path / "tests_public").mkdir()
    (tmp_path / "tests_public" / "test_fake.py").write_text(PUBLIC)
    (tmp_path / "hidden_source").mkdir()
    (tmp_path / "hidden_source" / "test_fake_hidden.py").write_text(HIDDEN)
    disposable.make_copy(tmp_path / "hidden_source", tmp_path / "tests_hidden")
    return tmp_path


def test_isolated_run_empties_the_copy_after_collection_and_before_student_code(fake_project):
    done = _run_fake_project(fake_project, "--isolate")
    output = done.stdout + done.stderr
    assert "1 failed, 3 passed" in output and "FAILED tests_public" not in output, output[-3000:]
    assert "hidden verdict without its source" in output      # a hidden failure still says why
    assert list((fake_project / "tests_hidden").iterdir()) == []


def test_in_process_run_leaves_the_copy_alone(fake_project):
    done = _run_fake_project(fake_project, "-k", "hidden_runs_from_memory")
    assert "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert (fake_project / "tests_hidden" / "test_fake_hidden.py").is_file()


def test_the_worker_imports_no_student_module_before_its_first_call_to_it(tmp_path):
    marker = tmp_path / "imported"
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "softmax.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n\ndef ok(x):\n    return x\n")
    (tmp_path / "submission" / "matmul.py").write_text("def ok(x):\n    return x\n")
    impl = IsolatedImpl(resolve(str(tmp_path / "submission")), call_timeout=120)
    try:
        impl.start()
        assert torch.equal(impl.matmul.ok(torch.ones(1)), torch.ones(1))   # started, ready and answering
        assert not marker.exists(), "the worker imported softmax.py before any call to it"
        impl.softmax.ok(torch.ones(1))
        assert marker.exists()
    finally:
        impl.close()
