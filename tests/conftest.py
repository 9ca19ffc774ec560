"""Fixtures the harness's own tests share."""

import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def clock(monkeypatch):
    """A fake clock for timing tests, with the worker's do_bench and synchronize patched to use it."""
    from perf_fakes import fake_clock

    return fake_clock(monkeypatch)


@pytest.fixture
def grader_pytester(pytester, monkeypatch):
    """pytester set up as a student's or the grader's run: the grader plugin on the CPU, this checkout
    importable, points read from `points/` in the test's folder, no implementation chosen by the
    environment. Run the suites with the `run_suites` fixture."""
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    monkeypatch.setenv("GRADER_POINTS_DIR", str(pytester.path / "points"))
    monkeypatch.setenv("GRADER_FORCE_CPU", "1")
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    for name in ("GRADER_IMPL", "GRADER_ISOLATE"):
        monkeypatch.delenv(name, raising=False)
    return pytester


@pytest.fixture
def run_suites(grader_pytester):
    """pytest with the grader plugin, in a subprocess (the plugin sets process-wide device state)."""

    def run(*args: str, timeout: float = 180):
        return grader_pytester.runpytest_subprocess("-p", "grader.plugin", "-p", "no:cacheprovider", *args,
                                                    timeout=timeout)

    return run


@pytest.fixture
def host_tmp():
    """A folder in the host's /tmp itself, whatever TMPDIR or --basetemp say: the folder an
    unsandboxed run's private /tmp hides (grader.grade.containment)."""
    folder = Path(tempfile.mkdtemp(prefix="grader-test-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def load_script():
    """load_script("measure/name") -> scripts/measure/name.py imported as a module, for tests of the staff scripts."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name.rpartition("/")[2], REPO_ROOT / "scripts" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture(scope="session")
def suite_test():
    """suite_test("tests_hidden/test_x_hidden.py", "test_name") -> that test function of a suite module,
    loaded under a private name (the suites are not packages), to call with a fake or a chosen impl."""

    def load(suite_file: str, name: str):
        path = REPO_ROOT / suite_file
        spec = importlib.util.spec_from_file_location(f"{path.stem}_for_harness_tests", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return getattr(module, name)

    return load
