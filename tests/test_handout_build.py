"""The handout builder and its proofs: layout, filtered points, write-up, no leaks, stubs 0, installs.

The handout is built once per module (a few seconds). The proofs that run suites are the slow part:
the stubs proof runs both suites (stubs fail fast), the solutions proof only the quick problems
(`QUICK_SOLUTION_MODULES`; `make handout` runs it on everything), and the install proof builds one venv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from grader import layout
from grader.errors import HandoutError
from grader.handout import is_cache, verify
from grader.handout.build import build_handout, grader_closure, make_tarball, public_points_toml
from grader.handout.stubs import REPO_ROOT, expected_stubs
from grader.handout.writeup import collect_problems, markdown_to_html, module_functions
from grader.points import load_points

QUICK_SOLUTION_MODULES = ["accounting"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist") / "handout"
    assert build_handout(str(out), verify=False) == 0
    return out


@pytest.fixture(scope="module")
def repo_points():
    return load_points(REPO_ROOT / "grader" / "points", REPO_ROOT / "grader" / "calibration.json")


def files_under(folder: Path) -> set[str]:
    """The files a build put in `folder`: not the bytecode caches that importing them writes afterwards."""
    relative = (p.relative_to(folder) for p in folder.rglob("*") if p.is_file())
    return {str(path) for path in relative if not is_cache(path)}


# --- layout ---------------------------------------------------------------------------------------------


def test_handout_holds_what_students_need(built):
    for name in ("Makefile", "pyproject.toml", "README.md", "WRITEUP.md", "WRITEUP.html",
                 "assignment/__init__.py", "grader/__init__.py", "grader/plugin.py", "grader/points.py"):
        assert (built / name).is_file(), name
    public_tests = {p.name for p in (REPO_ROOT / "tests_public").glob("test_*.py")}
    assert public_tests <= {p.name for p in (built / "tests_public").glob("*.py")}


def test_handout_has_no_staff_folders_or_modules(built):
    assert not (built / "solutions").exists() and not (built / "tests_hidden").exists()
    assert not (built / "tests").exists() and not (built / "grader" / "handout").exists()
    shipped = [p.relative_to(built / "grader") for p in (built / "grader").rglob("*.py")]
    assert shipped and not [p for p in shipped if not layout.AUDIENCES[layout.audience_of(p)].shipped]


def test_handout_ships_the_student_bench_with_every_perf_check(built, repo_points):
    assert "bench:" in (built / "Makefile").read_text()
    assert (built / "grader" / "bench" / "student.py").is_file()
    shipped = load_points(built / "grader" / "bench" / "perf_points", built / "grader" / "bench" / "calibration.json")
    perf = {c.id: c.points for c in repo_points.checks.values() if c.perf}
    assert {c.id: c.points for c in shipped.checks.values()} == perf


def test_make_bench_on_a_cpu_says_what_it_cannot_measure(built):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "grader.bench"], cwd=built, capture_output=True, text=True,
                          env={**env, "CUDA_VISIBLE_DEVICES": ""}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "No CUDA GPU here" in done.stdout and "16 x 16 tiles" in done.stdout
    points = load_points(built / "grader" / "bench" / "perf_points", built / "grader" / "bench" / "calibration.json")
    for check in points.checks.values():
        assert check.id in done.stdout and f"{check.ladder.passing:.2f} / {check.ladder.good:.2f}" in done.stdout


def test_handout_assignment_is_exactly_the_generated_stubs(built):
    stubs = expected_stubs(REPO_ROOT)
    assert {p.name for p in (built / "assignment").iterdir()} == set(stubs)
    for name, text in stubs.items():
        assert (built / "assignment" / name).read_text() == text, name


def test_grader_closure_follows_the_plugin_imports():
    modules = grader_closure(REPO_ROOT)
    assert {"grader", "grader.plugin", "grader.points", "grader.scoring", "grader.results"} <= set(modules)
    assert not [m for m in modules if not layout.is_shipped_module(m)]


def test_grader_closure_refuses_a_public_test_importing_staff_code(tmp_path):
    root = tmp_path
    shutil.copytree(REPO_ROOT / "grader", root / "grader", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "tests_public").mkdir()
    (root / "tests_public" / "test_x.py").write_text("from grader.handout import stubs\n")
    with pytest.raises(HandoutError, match="not shipped"):
        grader_closure(root)


def test_tarball_unpacks_to_one_folder_with_the_same_files(built):
    with tarfile.open(built.parent / "handout.tar.gz") as archive:
        names = [m.name for m in archive.getmembers() if m.isfile()]
        assert all(m.uid == 0 for m in archive.getmembers())
    assert {n.split("/", 1)[0] for n in names} == {"handout"}
    assert {n.split("/", 1)[1] for n in names} == files_under(built)


def test_the_tarballs_files_carry_the_build_time_so_zipfile_takes_them_untouched(built, tmp_path):
    with tarfile.open(built.parent / "handout.tar.gz") as archive:
        times = {m.mtime for m in archive.getmembers()}
        archive.extractall(tmp_path, filter="data")
    assert len(times) == 1 and abs(times.pop() - time.time()) < 3600     # one time, the build's
    with zipfile.ZipFile(tmp_path / "repacked.zip", "w") as repacked:      # refuses dates before 1980
        for path in sorted((tmp_path / "handout").rglob("*.py")):
            repacked.write(path, path.relative_to(tmp_path))


def test_source_date_epoch_makes_the_tarball_reproducible(built, tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    copies = []
    for name in ("one", "two"):
        shutil.copytree(built, tmp_path / name / "handout")
        copies.append(make_tarball(tmp_path / name / "handout").read_bytes())
    assert copies[0] == copies[1]
    with tarfile.open(tmp_path / "one" / "handout.tar.gz") as archive:
        assert {m.mtime for m in archive.getmembers()} == {1700000000}


def test_student_pyproject_packages_grader_and_assignment_with_the_repo_dependencies(built):
    from grader.points import tomllib

    student = tomllib.loads((built / "pyproject.toml").read_text())
    repo = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert student["project"]["dependencies"] == repo["project"]["dependencies"]
    assert student["tool"]["setuptools"]["packages"]["find"]["include"] == ["grader*", "assignment*"]
    assert "-p grader.plugin" in student["tool"]["pytest"]["ini_options"]["addopts"]


def test_build_refuses_to_delete_a_folder_that_is_not_a_handout(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(HandoutError, match="does not look like a handout"):
        build_handout(str(tmp_path), verify=False)
    assert (tmp_path / "precious.txt").exists()


# --- points students get ----------------------------------------------------------------------------------


def test_shipped_points_files_hold_only_public_checks(built, repo_points):
    shipped = load_points(built / "grader" / "points", built / "grader" / "calibration.json")
    assert all(check.suite == "public" for check in shipped.checks.values())
    public = {cid for cid, check in repo_points.checks.items() if check.suite == "public"}
    assert set(shipped.checks) == public
    for cid in public:
        assert shipped.checks[cid].points == repo_points.checks[cid].points


def test_shipped_points_files_keep_hidden_and_perf_totals(built, repo_points):
    for problem in repo_points.problems:
        text = (built / "grader" / "points" / f"{problem.id}.toml").read_text()
        hidden = sum(c.points for c in problem.checks if c.suite == "hidden" and not c.perf)
        perf = sum(c.points for c in problem.checks if c.suite == "hidden" and c.perf)
        assert re.search(rf"^hidden_points = {hidden:g}$", text, re.MULTILINE), problem.id
        assert re.search(rf"^perf_points = {perf:g}$", text, re.MULTILINE), problem.id


def test_public_points_toml_round_trips_odd_strings(tmp_path, repo_points):
    from grader.points import Check, Ladder, Problem

    problem = Problem("demo", 'Quotes " and \\ backslashes', 2, (
        Check("demo.a", "demo", 1.5, "public", 'say "hi" \\ there'),
        Check("demo.secret", "demo", 2, "hidden", "not shipped"),
        Check("demo.perf.fast", "demo", 3, "public", "timed", perf=True, baseline="copy",
              ladder=Ladder(0.5, 0.7, 0.9)),
    ))
    (tmp_path / "demo.toml").write_text(public_points_toml(problem))
    loaded = load_points(tmp_path, tmp_path / "none.json").problem("demo")
    assert loaded.title == problem.title
    assert [c.id for c in loaded.checks] == ["demo.a", "demo.perf.fast"]
    assert loaded.checks[0].description == 'say "hi" \\ there' and loaded.checks[0].points == 1.5
    assert loaded.checks[1].ladder.good == 0.7


# --- the write-up -----------------------------------------------------------------------------------------


def test_writeup_has_a_section_with_points_for_every_problem(built, repo_points):
    writeup = (built / "WRITEUP.md").read_text()
    for number, problem in enumerate(repo_points.problems, start=1):
        assert f"## {number}. {problem.title}" in writeup
        public = sum(c.points for c in problem.checks if c.suite == "public")
        assert re.search(rf"\| {number}\. {re.escape(problem.title)} \| {public:g} \|", writeup), problem.id
    assert f"**{repo_points.total:g}**" in writeup


def test_writeup_shows_signatures_and_docstrings_from_the_solutions(built):
    writeup = (built / "WRITEUP.md").read_text()
    for problem in collect_problems(REPO_ROOT):
        for function in problem.to_implement:
            assert function.signature in writeup, function.name
            first_line = function.docstring.splitlines()[0] if function.docstring else ""
            assert first_line in writeup, function.name


def test_writeup_lists_public_checks_and_perf_ladders_but_no_hidden_check(built, repo_points):
    writeup = (built / "WRITEUP.md").read_text()
    for check in repo_points.checks.values():
        if check.suite == "public" or check.perf:
            assert f"`{check.id}`" in writeup, check.id
        else:
            assert check.id not in writeup, check.id
        if check.perf:
            assert f"| {check.ladder.passing} | {check.ladder.good} | {check.ladder.excellent} |" in writeup


def test_writeup_html_is_one_standalone_page(built):
    page = (built / "WRITEUP.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert not re.search(r"<(script|link)\b", page)
    assert page.count("<h2") >= len(collect_problems(REPO_ROOT))


def test_module_functions_marks_region_holders_and_keeps_multiline_signatures():
    source = textwrap.dedent('''
        """Module doc."""


        def given(x):
            """Ready."""
            return x


        @triton.jit
        def kernel(a_ptr,
                   N: tl.constexpr):
            """Kernel doc."""
            # BEGIN SOLUTION
            pass
            # END SOLUTION


        class Scaler:
            """Scales."""

            def scale(self, loss):
                """Multiply."""
                # BEGIN SOLUTION
                return loss
                # END SOLUTION
    ''')
    doc, functions = module_functions(source)
    assert doc == "Module doc."
    by_name = {f.name: f for f in functions}
    assert not by_name["given"].to_implement
    assert by_name["kernel"].to_implement and by_name["kernel"].is_kernel
    assert by_name["kernel"].signature == "def kernel(a_ptr,\n           N: tl.constexpr):"
    assert by_name["Scaler"].to_implement and [m.name for m in by_name["Scaler"].members] == ["scale"]


def test_markdown_converter_renders_blocks_and_escapes_text():
    page = markdown_to_html(textwrap.dedent('''
        ## Title with `code`

        A paragraph with **bold**, *em* and a <tag> & [link](https://example.org).

        | a | b |
        | --- | --- |
        | 1 | `x|y` |

        - one
        - two
          - two.a
        - three

        ```python
        if a < b:
            pass
        ```
    '''))
    assert '<h2 id="title-with-code">Title with <code>code</code></h2>' in page
    assert "<strong>bold</strong>" in page and "<em>em</em>" in page
    assert "&lt;tag&gt; &amp;" in page and '<a href="https://example.org">link</a>' in page
    assert "<th>a</th>" in page and "<td>1</td>" in page
    assert "<ul><li>one</li><li>two<ul><li>two.a</li></ul></li><li>three</li></ul>" in page
    assert '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>' in page


# --- the proofs -------------------------------------------------------------------------------------------


def test_nothing_from_solutions_or_hidden_tests_leaks(built):
    assert verify.nothing_leaks(REPO_ROOT, built) == []


def test_what_students_read_is_self_contained(built):
    assert verify.self_contained(built) == []
    assert (built / "docs" / "numerics.md").is_file()      # cited by the suites' comparison helpers


def test_a_shipped_file_citing_a_staff_document_is_caught(built, tmp_path):
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    (copy / "docs" / "numerics.md").unlink()
    with open(copy / "README.md", "a") as readme:
        readme.write("\nThe rule is in DESIGN.md.\n")
    found = verify.self_contained(copy)
    assert any("README.md cites DESIGN.md" in f for f in found), found
    assert any("docs/numerics.md, which is not in the handout" in f for f in found), found


def test_no_shipped_text_names_a_staff_only_path(built):
    assert verify.staff_paths_named(REPO_ROOT, built) == []
    api = (built / "docs" / "harness-api.md").read_text()      # the student version of the contract
    assert "## Fixtures" in api and "broken_variants" not in api and "<!-- staff" not in api


def test_a_cache_folder_the_staff_tree_has_is_not_a_staff_only_path(built, tmp_path):
    # running the tests without PYTHONDONTWRITEBYTECODE leaves assignment/__pycache__ in the staff tree
    root = tmp_path / "repo"
    (root / "assignment" / "__pycache__").mkdir(parents=True)
    (root / "solutions").mkdir()
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    (copy / "notes.md").write_text("make clean removes assignment/__pycache__; solutions/ is staff's\n")
    found = verify.staff_paths_named(root, copy)
    assert len(found) == 1 and "solutions/" in found[0], found


def test_a_shipped_text_naming_a_staff_only_path_is_caught(built, tmp_path):
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    with open(copy / "docs" / "numerics.md", "a") as doc:
        doc.write("\nSee tests_hidden/test_softmax_hidden.py and `solutions/` for more.\n")
    found = verify.staff_paths_named(REPO_ROOT, copy)
    assert any("numerics.md" in f and "tests_hidden/" in f for f in found), found
    assert any("numerics.md" in f and "solutions/" in f for f in found), found


def test_nothing_students_read_uses_authoring_shorthand(built, tmp_path):
    assert verify.authoring_shorthand(built) == []
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    with open(copy / "WRITEUP.md", "a") as writeup:
        writeup.write("\nThe worked example (S3 §7.8) is what one seed says.\n")
    assert len(verify.authoring_shorthand(copy)) == 2


def test_the_student_makefile_installs_quietly_from_pips_own_index(built):
    assert verify.default_package_index(built) == []
    recipe = (built / "Makefile").read_text().split("\ninstall:", 1)[1].split("\n\n", 1)[0]
    assert "$(PIP) install" in recipe and "--quiet" in (built / "Makefile").read_text()


def test_make_test_runs_the_suite_through_the_runner_that_survives_a_crash_and_ships_it(built):
    # grader.local_run finishes the suite in a worker when the student's kernel kills pytest
    recipe = (built / "Makefile").read_text().split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "-m grader.local_run tests_public" in recipe
    assert (built / "grader" / "local_run.py").is_file() and (built / "grader" / "memory_safety.py").is_file()


def test_the_writeup_names_the_helpers_that_gate_a_problem_first(built):
    writeup = (built / "WRITEUP.md").read_text()
    section = writeup.split("### What you implement: `assignment/flash_attention.py`", 1)[1]
    assert section.index("**Write `_check_inputs` first: `flash_attention_forward_pytorch` and "
                         "`flash_attention_forward` call it") < section.index("def _check_inputs(") \
        < section.index("def flash_attention_forward_pytorch(")
    section = writeup.split("### What you implement: `assignment/mixed_precision.py`", 1)[1]
    assert section.index("def _check_step_arguments(") < section.index("class DynamicLossScaler")


def test_make_submission_in_the_handout_packs_helpers_and_grading_stages_them(built, tmp_path):
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    (copy / "assignment" / "utils.py").write_text("def f():\n    return 1\n")
    (copy / "assignment" / "old").mkdir()
    (copy / "assignment" / "old" / "softmax.py").write_text("X = 1\n")
    (copy / "assignment" / "old" / "attn.py").write_text("X = 1\n")
    done = subprocess.run(["make", "-s", "submission", f"PYTHON={sys.executable}"], cwd=copy, capture_output=True,
                          text=True, timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "assignment/utils.py   (helper module)" in done.stdout
    assert "assignment/old/softmax.py: duplicate of softmax.py" in done.stdout
    assert "assignment/old/attn.py: not graded: in a subfolder" in done.stdout
    from grader.grade.submission import Source, stage

    staged = stage(Source("alice", copy / "submission.tar.gz"), tmp_path / "graded")
    assert len(staged.files) == 5 and list(staged.helpers) == ["utils"]


def test_leak_scan_catches_a_planted_solution_line_and_hidden_test_name(built, tmp_path):
    secrets = verify.solution_secrets(REPO_ROOT)
    hidden = verify.hidden_secrets(REPO_ROOT)
    if not secrets or not hidden:
        pytest.skip("no solution regions or hidden tests yet")
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    secret_line = next(iter(secrets))
    hidden_name = next(name for name in hidden if name.startswith("test_"))
    with open(copy / "README.md", "a") as readme:
        readme.write(f"\n    {secret_line}\n\nsee {hidden_name} for details\n")
    found = verify.nothing_leaks(REPO_ROOT, copy)
    assert any("README.md" in f and "repeats solutions/" in f for f in found), found
    assert any("README.md" in f and hidden_name in f for f in found), found


def test_every_stub_in_the_handout_imports_cleanly(built):
    assert verify.stubs_import_cleanly(built) == []


def test_import_proof_catches_a_stub_that_does_not_import(built, tmp_path):
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    (copy / "assignment" / "broken.py").write_text("import no_such_module_anywhere\n")
    assert any("assignment.broken" in f for f in verify.stubs_import_cleanly(copy))


def test_stubs_score_zero_and_every_graded_test_is_not_implemented(built, tmp_path):
    failures = verify.stubs_score_zero(REPO_ROOT, built, tmp_path)
    assert not failures, "\n".join(failures)


def test_handout_grader_alone_passes_the_solutions_on_the_public_suite(built, tmp_path):
    failures = verify.solutions_pass_inside_handout(REPO_ROOT, built, tmp_path)
    assert not failures, "\n".join(failures)


def test_solutions_pass_every_test_of_the_quick_problems(tmp_path):
    modules = [m for m in QUICK_SOLUTION_MODULES if (REPO_ROOT / "solutions" / f"{m}.py").exists()]
    if not modules:
        pytest.skip("no quick solutions modules yet")
    failures = verify.solutions_score_full(REPO_ROOT, modules, tmp_path)
    assert not failures, "\n".join(failures)


def test_the_solutions_proofs_line_says_its_points_are_those_that_run_here(repo_points):
    from grader.results import TestRecord
    from grader.scoring import score_checks

    records = [TestRecord(f"t::{c.id}", c.id, "not_run_here" if c.perf else "passed")
               for c in repo_points.checks.values() if c.problem == "softmax"]
    softmax = next(p for p in score_checks(repo_points, records) if p.problem_id == "softmax")
    line = verify.solutions_line("softmax", softmax)
    assert re.fullmatch(rf"solutions softmax: ({softmax.possible:g}) / \1 of the points that run on this machine; "
                        rf"[\d.]+ more in GPU-only checks, not run here \({softmax.total:g} in all\)", line), line


def test_unpacked_handout_installs_in_a_fresh_venv_and_make_test_prints_points(built, tmp_path):
    failures, output = verify.handout_installs_and_tests(built.parent / "handout.tar.gz", tmp_path)
    assert not failures, "\n".join(failures)
    assert re.search(r"^TOTAL\s+\d+\.\d\d / ", output, re.MULTILINE), output[-2000:]
    assert re.search(r"^Not measured here: [\d.]+ points of hidden tests and [\d.]+ points of GPU", output,
                     re.MULTILINE), output[-2000:]


def test_where_checks_run_reads_gpu_and_triton_markers(tmp_path):
    from grader.handout.where_checks_run import check_needs

    (tmp_path / "tests_public").mkdir()
    (tmp_path / "tests_hidden").mkdir()
    (tmp_path / "tests_public" / "test_a.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.mark.check("a.cpu")
        def test_cpu(): pass

        @pytest.mark.triton
        @pytest.mark.check("a.kernel")
        def test_kernel(): pass

        @pytest.mark.check("a.mixed")
        def test_mixed_cpu(): pass
    '''))
    (tmp_path / "tests_hidden" / "test_a_hidden.py").write_text(textwrap.dedent('''
        import pytest

        @pytest.mark.gpu_only
        @pytest.mark.check("a.gpu")
        def test_gpu(): pass

        @pytest.mark.gpu_only
        @pytest.mark.check("a.mixed")
        def test_mixed_gpu(): pass
    '''))
    assert check_needs(tmp_path) == {"a.cpu": set(), "a.kernel": {"triton"}, "a.gpu": {"gpu", "triton"},
                                     "a.mixed": set()}


def test_writeup_states_what_runs_where_with_the_denominators(built, repo_points):
    from grader.handout.where_checks_run import points_by_place

    writeup = (built / "WRITEUP.md").read_text()
    places = points_by_place(REPO_ROOT, repo_points)
    cpu, gpu = places["cpu_interpreter"], places["gpu"]
    assert "## What runs where" in writeup
    row = f"| CPU with Triton (its interpreter runs your kernels) | {cpu['public']:g} | ({cpu['hidden']:g}) |"
    assert row in writeup
    assert f"out of\n  {cpu['public'] + cpu['hidden']:g}" in writeup    # the staff's CPU denominator, explained
    assert gpu["public"] + gpu["hidden"] + gpu["perf"] == repo_points.total


@pytest.mark.parametrize("mode", ["in_process", "isolated"])
def test_in_the_handout_helpers_count_subfolders_fail_and_a_selection_is_totalled_alone(built, tmp_path, mode):
    copy = tmp_path / "handout"
    shutil.copytree(built, copy)
    reference = "\n".join(line for line in (REPO_ROOT / "solutions" / "accounting.py").read_text().splitlines()
                          if line.strip() not in ("# BEGIN SOLUTION", "# END SOLUTION"))
    reference = reference.replace("return _exact(6 * n_params * n_tokens)",
                                  "from .utils import FLOPS_PER_PARAM_TOKEN\n"
                                  "    return _exact(FLOPS_PER_PARAM_TOKEN * n_params * n_tokens)")
    reference += ("\n\n_reference_matmul_flops = matmul_flops\n\n\ndef matmul_flops(m, k, n):\n"
                  "    from .kernels import counts  # a subfolder: not graded\n"
                  "    return _reference_matmul_flops(m, k, n)\n")
    (copy / "assignment" / "accounting.py").write_text(reference)
    (copy / "assignment" / "utils.py").write_text("FLOPS_PER_PARAM_TOKEN = 6\n")
    (copy / "assignment" / "kernels").mkdir()
    (copy / "assignment" / "kernels" / "__init__.py").write_text("")
    (copy / "assignment" / "kernels" / "counts.py").write_text("X = 1\n")
    command = [sys.executable, "-m", "pytest", "-p", "grader.plugin", "tests_public/test_accounting.py", "-q",
               "--checks", "-k", "6nd or 2mkn", *(["--isolate"] if mode == "isolated" else [])]
    done = subprocess.run(command, cwd=copy, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GRADER_IMPL")})
    output = done.stdout + done.stderr
    assert "1 failed, 1 passed" in output, output[-3000:]
    assert "No module named 'assignment.kernels': it is not part of the submission" in output, output[-3000:]
    total = next(line for line in output.splitlines() if line.startswith("TOTAL"))
    flops = load_points(copy / "grader" / "points").checks["accounting.flops.lecture"]
    assert total.split()[1:4] == [f"{flops.points / 2:.2f}", "/", f"{flops.points:g}"], total
    assert re.search(r"^\s+accounting\.flops\.lecture\s+[\d.]+ / [\d.]+\s+1 of 2 tests not passed$", output,
                     re.MULTILINE), output[-3000:]
    assert "Helper modules graded with your code: utils.py" in output
    assert "assignment/kernels/counts.py: not graded: in a subfolder" in output
