"""The stub generator: solution regions become NotImplementedError, everything else is kept."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from grader.errors import HandoutError
from grader.handout.stubs import HEADER, REPO_ROOT, expected_stubs, make_stub, stale_files, write_stubs

WHERE = "solutions/demo.py"


def stub_of(source: str) -> str:
    return make_stub(textwrap.dedent(source), WHERE)


def body_of(stub: str, name: str) -> str:
    """The source of function `name` in `stub`, without its decorators."""
    for node in ast.walk(ast.parse(stub)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_source_segment(stub, node)
    raise AssertionError(f"{name} not in stub")


def make_repo(tmp_path: Path, modules: dict[str, str]) -> Path:
    (tmp_path / "solutions").mkdir()
    for name, text in modules.items():
        (tmp_path / "solutions" / f"{name}.py").write_text(textwrap.dedent(text))
    return tmp_path


ADD = '''
    import math


    def helper(x):
        return x + 1


    def add(x, y):
        """Add x and y, then the helper.

        Returns a number.
        """
        # BEGIN SOLUTION
        total = x + y
        return helper(total)
        # END SOLUTION
'''


# --- what a stub keeps and replaces ------------------------------------------------------------------


def test_region_becomes_not_implemented_named_after_function():
    stub = stub_of(ADD)
    assert 'raise NotImplementedError("add: not implemented yet")' in stub
    assert "total = x + y" not in stub and "return helper(total)" not in stub


def test_region_replaced_keeps_docstring_signature_and_helpers():
    stub = stub_of(ADD)
    function = next(n for n in ast.parse(stub).body if isinstance(n, ast.FunctionDef) and n.name == "add")
    assert ast.get_docstring(function) == "Add x and y, then the helper.\n\nReturns a number."
    assert [a.arg for a in function.args.args] == ["x", "y"]
    assert "def helper(x):\n    return x + 1" in stub
    assert "import math" in stub


def test_stub_starts_with_header_and_has_no_markers():
    stub = stub_of(ADD)
    assert stub.startswith(HEADER)
    assert "BEGIN SOLUTION" not in stub and "END SOLUTION" not in stub


def test_raise_sits_at_marker_indentation_in_nested_block():
    stub = stub_of('''
        class Model:
            def step(self, flag):
                """One step."""
                if flag:
                    # BEGIN SOLUTION
                    return 1
                    # END SOLUTION
                return 2
    ''')
    assert '\n            raise NotImplementedError("Model.step: not implemented yet")\n' in stub
    assert "return 2" in body_of(stub, "step")


def test_triton_kernel_whose_body_is_a_region_keeps_decorator_and_signature():
    stub = stub_of('''
        import triton
        import triton.language as tl


        @triton.jit
        def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            """Copy n elements."""
            # BEGIN SOLUTION
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)
            # END SOLUTION
    ''')
    assert "@triton.jit\ndef copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):" in stub
    assert 'raise NotImplementedError("copy_kernel: not implemented yet")' in stub
    assert "tl.store" not in stub


def test_several_regions_each_named_after_their_function():
    stub = stub_of('''
        def first():
            # BEGIN SOLUTION
            return 1
            # END SOLUTION


        def second():
            # BEGIN SOLUTION
            return 2
            # END SOLUTION
    ''')
    assert 'raise NotImplementedError("first: not implemented yet")' in body_of(stub, "first")
    assert 'raise NotImplementedError("second: not implemented yet")' in body_of(stub, "second")


def test_imports_from_solutions_point_at_assignment():
    stub = stub_of('''
        from solutions.softmax import online_softmax
        import solutions.matmul as mm
        from solutions_extra import keep   # a different package: untouched
    ''')
    assert "from assignment.softmax import online_softmax" in stub
    assert "import assignment.matmul as mm" in stub
    assert "from solutions_extra import keep" in stub


def test_module_without_regions_is_copied_with_header():
    source = "def ready():\n    return 42\n"
    assert make_stub(source, WHERE) == HEADER + source


# --- malformed markers name the file and line ---------------------------------------------------------


@pytest.mark.parametrize("source, line, words", [
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n", 2, "never closed"),
    ("def f():\n    return 1\n    # END SOLUTION\n", 3, "without a"),
    ("def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    return 1\n    # END SOLUTION\n", 3, "nested"),
    ("def f():\n    # BEGIN SOLUTION\n    return 1\n# END SOLUTION\n", 4, "indented differently"),
    ("def f():\n    # BEGIN SOLUTIONS\n    return 1\n", 2, "malformed marker"),
], ids=["missing_end", "end_without_begin", "nested_begin", "end_indent", "misspelt"])
def test_malformed_markers_raise_with_file_and_line(source, line, words):
    with pytest.raises(HandoutError, match=rf"^solutions/demo\.py:{line}: .*{words}"):
        make_stub(source, WHERE)


def test_module_level_region_is_dropped_whole():
    source = textwrap.dedent('''
        import math

        # BEGIN SOLUTION
        TUNED_BLOCK = 128


        def _trick(x):
            return x + TUNED_BLOCK
        # END SOLUTION


        def f(x):
            """Contract of f."""
            # BEGIN SOLUTION
            return _trick(x)
            # END SOLUTION
    ''')
    stub = make_stub(source, WHERE)
    assert "TUNED_BLOCK" not in stub and "_trick" not in stub
    assert "import math" in stub and '"""Contract of f."""' in stub
    assert 'raise NotImplementedError("f: not implemented yet")' in stub


def test_module_level_region_cutting_a_definition_is_rejected():
    source = "# BEGIN SOLUTION\ndef f():\n    x = 1\n# END SOLUTION\n    return x\n"
    with pytest.raises(HandoutError):
        make_stub(source, WHERE)


def test_region_spanning_two_functions_is_rejected():
    source = "def f():\n    # BEGIN SOLUTION\n    return 1\ndef g():\n    # END SOLUTION\n    return 2\n"
    with pytest.raises(HandoutError, match=r"^solutions/demo\.py:2: .*starts in f\(\) but ends in g"):
        make_stub(source, WHERE)


def test_region_leaving_a_syntax_error_is_rejected():
    source = textwrap.dedent('''
        def f(x):
            if x:
            # BEGIN SOLUTION
                y = 1
            # END SOLUTION
            else:
                y = 2
            return y
    ''')
    with pytest.raises(HandoutError, match=r"^solutions/demo\.py:4: .*syntax error"):
        make_stub(source, WHERE)


def test_region_covering_a_class_method_def_is_rejected():
    source = "class A:\n    # BEGIN SOLUTION\n    def f(self):\n        return 1\n    # END SOLUTION\n"
    with pytest.raises(HandoutError, match=r"^solutions/demo\.py:2: .*not inside a function"):
        make_stub(source, WHERE)


def test_reference_that_does_not_parse_is_reported():
    with pytest.raises(HandoutError, match=r"^solutions/demo\.py:1: .*does not parse"):
        make_stub("def f(:\n    pass\n", WHERE)


# --- write_stubs and --check on a scratch repo --------------------------------------------------------


def test_write_then_check_round_trip(tmp_path, capsys):
    root = make_repo(tmp_path, {"demo": ADD, "__init__": '"""staff docstring"""\n'})
    assert write_stubs(check_only=True, root=root) == 1
    assert write_stubs(root=root) == 0
    assert sorted(p.name for p in (root / "assignment").iterdir()) == ["__init__.py", "demo.py"]
    assert "staff docstring" not in (root / "assignment" / "__init__.py").read_text()
    assert write_stubs(check_only=True, root=root) == 0


def test_edit_inside_a_region_only_changes_nothing(tmp_path):
    root = make_repo(tmp_path, {"demo": ADD})
    write_stubs(root=root)
    (root / "solutions" / "demo.py").write_text(textwrap.dedent(ADD).replace("x + y", "y + x"))
    assert write_stubs(check_only=True, root=root) == 0


def test_check_names_the_file_that_drifted(tmp_path, capsys):
    root = make_repo(tmp_path, {"demo": ADD})
    write_stubs(root=root)
    (root / "solutions" / "demo.py").write_text(textwrap.dedent(ADD).replace("Returns a number.", "Returns x+y+1."))
    capsys.readouterr()
    assert write_stubs(check_only=True, root=root) == 1
    assert "assignment/demo.py" in capsys.readouterr().out


def test_write_removes_generated_leftover_but_keeps_foreign_files(tmp_path):
    root = make_repo(tmp_path, {"demo": ADD})
    write_stubs(root=root)
    (root / "assignment" / "gone.py").write_text(HEADER + "x = 1\n")
    (root / "assignment" / "notes.py").write_text("# mine\n")
    assert stale_files(root, expected_stubs(root)) == ["gone.py"]
    write_stubs(root=root)
    assert not (root / "assignment" / "gone.py").exists()
    assert (root / "assignment" / "notes.py").exists()


# --- the repository itself ----------------------------------------------------------------------------


def test_repo_solutions_markers_are_well_formed():
    expected_stubs(REPO_ROOT)          # raises HandoutError naming file and line otherwise


def test_repo_assignment_is_up_to_date_with_solutions():
    """Fails when someone edits solutions/ without running `grader handout stubs`."""
    stale = stale_files(REPO_ROOT, expected_stubs(REPO_ROOT))
    assert not stale, f"assignment/ is stale, run `python -m grader handout stubs`: {stale}"


def test_repo_stubs_import_cleanly(tmp_path):
    from grader.handout.verify import stubs_import_cleanly

    (tmp_path / "assignment").mkdir()
    for name, text in expected_stubs(REPO_ROOT).items():
        (tmp_path / "assignment" / name).write_text(text)
    assert stubs_import_cleanly(tmp_path) == []


# Names and numbers that are the reference's design, not the assignment's contract.
REFERENCE_DESIGN = ["_safe_base", "LOG2E", "HOPPER_CONFIGS", "keep_configs_for_problem", "_launch_fwd",
                    "_launch_bwd", "_attn_bwd_dkdv", "_softmax_online_kernel", "ONE_PASS_MAX_COLS",
                    "667 vs 691", "exp(m - base)", "cdiv(M, meta", "Steps:"]


@pytest.mark.parametrize("name", REFERENCE_DESIGN)
def test_repo_stubs_do_not_give_the_design_away(name):
    stubs = expected_stubs()
    leaks = [module for module, text in stubs.items() if name in text]
    assert not leaks, f"{name!r} is in the stubs of {leaks}: move it inside a solution region"


def test_a_methods_stub_names_its_class_and_init_too():
    stub = stub_of('''
        class FlashAttentionTriton:
            def __init__(self):
                # BEGIN SOLUTION
                self.x = 1
                # END SOLUTION

            @staticmethod
            def forward(ctx, q):
                # BEGIN SOLUTION
                return q
                # END SOLUTION


        def forward(q):
            # BEGIN SOLUTION
            return q
            # END SOLUTION
    ''')
    assert 'raise NotImplementedError("FlashAttentionTriton.__init__: not implemented yet")' in stub
    assert 'raise NotImplementedError("FlashAttentionTriton.forward: not implemented yet")' in stub
    assert 'raise NotImplementedError("forward: not implemented yet")' in stub


GATED = '''
    def _check_inputs(q):
        """Raise ValueError for bad q."""
        # BEGIN SOLUTION
        if q < 0:
            raise ValueError(q)
        # END SOLUTION


    def _given_helper(q):
        return q


    def forward(q):
        """The forward."""
        _check_inputs(q)
        # BEGIN SOLUTION
        return _given_helper(q)
        # END SOLUTION


    def backward(q):
        """The backward."""
        # BEGIN SOLUTION
        _check_inputs(q)
        return q
        # END SOLUTION
'''


def test_a_private_helper_that_given_code_calls_says_to_write_it_first_and_who_calls_it():
    stub = stub_of(GATED)
    message = " ".join(line.strip().strip('"') for line in body_of(stub, "_check_inputs").splitlines()[2:])
    assert "_check_inputs: not implemented yet. Write it first: forward calls it, so its tests stop here" in message
    assert 'raise NotImplementedError("forward: not implemented yet")' in stub    # backward's call was in a region
    assert max(len(line) for line in stub.splitlines()) <= 120
