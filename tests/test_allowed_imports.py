"""Allowed imports: torch, triton, numpy, einops and the standard library, stated in the write-up and the
stubs. Anything else is refused alike locally and when graded, and costs only what cannot run without
it: annotations may name a refused package, a guarded import falls back, a use raises naming the list."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from broken_variants import suite_failures

from grader.worker.allowed_imports import ALLOWED_TEXT, ImportNotAllowed, refused_imports
from grader.worker.modules import Modules, resolve

REPO = Path(__file__).resolve().parents[1]

ANNOTATED = textwrap.dedent('''
    import torch
    from jaxtyping import Float
    import jaxtyping as jt

    try:
        import scipy.special
        HAVE_SCIPY = True
    except ImportError:
        HAVE_SCIPY = False


    def double(x: Float[torch.Tensor, "n"]) -> jt.Float[torch.Tensor, "n"] | None:
        return x * 2


    def checked(x):
        return jt.jaxtyped(typechecker=None)(lambda y: y)(x)
''')


@pytest.fixture
def annotated(tmp_path, monkeypatch):
    """A submission module that imports jaxtyping for its annotations and scipy behind a guard."""
    import sys

    def ours():
        return [name for name in sys.modules if name == "assignment" or name.startswith("assignment.")]

    for name in ours():
        monkeypatch.delitem(sys.modules, name)   # restored afterwards; this test's submission is its own
    (tmp_path / "softmax.py").write_text(ANNOTATED)
    yield Modules(resolve(str(tmp_path))).load("softmax")
    for name in ours():
        del sys.modules[name]


def test_a_package_named_only_in_annotations_costs_nothing(annotated):
    import torch

    assert torch.equal(annotated.double(torch.ones(3)), torch.full((3,), 2.0))


def test_a_guarded_import_of_a_refused_package_takes_the_fallback(annotated):
    assert annotated.HAVE_SCIPY is False


def test_using_a_refused_package_raises_naming_it_and_the_allowed_list(annotated):
    with pytest.raises(ImportNotAllowed) as refused:
        annotated.checked(1)
    assert "jaxtyping" in str(refused.value) and ALLOWED_TEXT in str(refused.value)


def test_the_harness_and_torch_import_what_they_need(annotated):
    import importlib

    assert importlib.import_module("sympy") is not None   # torch's own lazy imports are not judged


def test_refused_imports_are_found_in_the_source():
    assert refused_imports(ANNOTATED, ("assignment",)) == ["jaxtyping", "scipy"]
    assert refused_imports("import os\nimport einops\nfrom assignment.matmul import matmul\n", ("assignment",)) == []


def test_a_module_importing_jaxtyping_for_annotations_is_graded_in_full(tmp_path):
    # the reference accounting module, with jaxtyping annotations on one function, is still graded in full
    source = (REPO / "solutions" / "accounting.py").read_text()
    marker = "from fractions import Fraction\n"
    assert marker in source
    source = source.replace(marker, marker + "from jaxtyping import Float, Int  # annotations only\n"
                            "SizeLike = Int[int, \"\"] | Float[float, \"\"]\n", 1)
    (tmp_path / "accounting.py").write_text(source)
    outcomes = suite_failures("tests_public/test_accounting.py", tmp_path, tmp_path / "junit.xml")
    failed = {name: message[:300] for name, (outcome, message) in outcomes.items() if outcome == "failed"}
    assert outcomes and not failed, failed


def test_the_write_up_and_every_stub_state_the_allowed_imports():
    from grader.handout.writeup import collect_problems, render_markdown

    text = " ".join(render_markdown(REPO, collect_problems(REPO)).split())
    assert f"may import only {ALLOWED_TEXT}" in text
    for stub in sorted((REPO / "assignment").glob("*.py")):
        if stub.name != "__init__.py":
            assert "Imports: only torch, triton, numpy, einops and Python's standard library" in stub.read_text(), stub
