"""Helper modules beside the five module files: the local run in-process, `--isolate` and a graded run
agree on which files count (grader.submission_files), and the static scan follows a helper like the
five modules."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from grader import submission_files
from grader.grade.submission import Source, stage
from grader.guards import SOFTMAX_OPS
from grader.impl import RuleViolation, StudentCodeError, make_impl

SOFTMAX = textwrap.dedent('''
    import torch

    from .utils import doubled
    from assignment import shared


    def ok(x):
        return doubled(x) + shared.ONE


    def uses_subfolder(x):
        from .kernels import attn
        return attn.twice(x)


    def uses_helper_softmax(x):
        return shared.helper_softmax(x)
''')
UTILS = "def doubled(x):\n    return x * 2\n"
SHARED = "import torch\nONE = 1.0\n\n\ndef helper_softmax(x):\n    return torch.softmax(x, dim=-1)\n"


@pytest.fixture
def code_folder(tmp_path):
    """A student's assignment/ with two helpers beside softmax.py and one helper in a subfolder."""
    folder = tmp_path / "handout" / "assignment"
    (folder / "kernels").mkdir(parents=True)
    (folder / "__init__.py").write_text('"""Your implementation."""\n')
    (folder / "softmax.py").write_text(SOFTMAX)
    (folder / "utils.py").write_text(UTILS)
    (folder / "shared.py").write_text(SHARED)
    (folder / "kernels" / "__init__.py").write_text("")
    (folder / "kernels" / "attn.py").write_text("def twice(x):\n    return x * 2\n")
    yield folder
    for name in [n for n in sys.modules if n == "assignment" or n.startswith("assignment.")]:
        del sys.modules[name]


def _graded_folder(code_folder, tmp_path):
    """What intake stages of the archive `make submission` writes from this folder."""
    archive = tmp_path / "alice.tar.gz"
    submission_files.pack(code_folder, archive)
    staged = stage(Source("alice", archive), tmp_path / "graded")
    return staged, tmp_path / "graded"


def test_the_rule_counts_helpers_beside_the_modules_and_nothing_below_them(code_folder):
    counted = submission_files.count_folder(code_folder)
    assert list(counted.modules) == ["softmax"] and sorted(counted.helpers) == ["shared", "utils"]
    assert dict(counted.left_out)["kernels/attn.py"].startswith("not graded: in a subfolder")


def test_make_submission_packs_what_intake_stages(code_folder, tmp_path):
    staged, _ = _graded_folder(code_folder, tmp_path)
    assert list(staged.files) == ["softmax"] and sorted(staged.helpers) == ["shared", "utils"]
    assert staged.found["utils"] == "assignment/utils.py"


@pytest.mark.parametrize("mode", ["in_process", "isolated", "graded"])
def test_a_helper_works_and_a_subfolder_fails_alike_locally_isolated_and_graded(code_folder, tmp_path, mode):
    where = str(code_folder)
    if mode == "graded":
        where = str(_graded_folder(code_folder, tmp_path)[1])
    impl = make_impl(where, isolated=mode != "in_process")
    try:
        assert torch.equal(impl.softmax.ok(torch.ones(2)), torch.full((2,), 3.0))
        with pytest.raises((ModuleNotFoundError, StudentCodeError)) as raised:
            impl.softmax.uses_subfolder(torch.ones(2))
        assert "No module named 'assignment.kernels': it is not part of the submission" in str(raised.value)
    finally:
        impl.close()


def test_the_static_scan_follows_a_helper_module(code_folder):
    impl = make_impl(str(code_folder), isolated=False)
    with pytest.raises(RuleViolation, match=r"shared\.py helper_softmax: uses \.softmax"), \
            impl.guards(forbid=SOFTMAX_OPS):
        impl.softmax.uses_helper_softmax(torch.ones(2))
