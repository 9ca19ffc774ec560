"""Result model and HTML reports: the stream is read defensively, scores and statuses reach the page,
student text is escaped, and the pages render in a real browser without errors on a phone-sized
window."""

import json
import shutil
import subprocess
import textwrap

import jinja2
import pytest

from grader.points import load_points
from grader.report import html, model
from grader.results import END_LINE, header_line, read_stream, record_line
from grader.results import TestRecord as Record

POINTS = """
[problem]
id = "softmax"
title = "Online softmax"
order = 1
[checks."softmax.rows"]
points = 4
description = "rows match torch.softmax"
[checks."softmax.masking"]
points = 2
suite = "hidden"
description = "masked rows give zeros"
[perf."softmax.perf.rows"]
points = 4
description = "row softmax bandwidth"
baseline = "device-to-device copy"
ladder = { pass = 0.5, good = 0.7, excellent = 0.85 }
"""
HOSTILE = "<script>alert('x')</script> max |err| 0.5 > allowed 0.01 at [3, 7] (M=257 bf16)"


@pytest.fixture
def points(tmp_path):
    (tmp_path / "softmax.toml").write_text(textwrap.dedent(POINTS))
    return load_points(tmp_path, calibration_file=tmp_path / "none.json")


def _stream(*records, end=True):
    lines = [header_line("/tmp/impl", "cuda", {"gpu": "NVIDIA H200"}, ["softmax.rows"])]
    lines += [record_line(r) for r in records]
    return "\n".join(lines + ([END_LINE] if end else [])) + "\n"


def _result(points, stream, status="graded", reason="", suites=("public", "hidden")):
    return model.build_result("alice", points, read_stream(stream), status, reason, "log line\n",
                              {"suite": "all", "sandbox": "bubblewrap", "grader_version": "0.1.0",
                               "files": {"softmax": "ab"}, "ignored": ["notes.txt (not an assignment "
                                                                        "module file)"],
                               "missing": ["matmul"], "late": False}, suites=suites)


def _rows(points, outcome="passed", ratio=0.9):
    return [Record("tests_public/test_softmax.py::test_rows[fp32]", "softmax.rows", "passed"),
            Record("tests_public/test_softmax.py::test_rows[bf16]", "softmax.rows", outcome, HOSTILE),
            Record("tests_hidden/test_softmax_hidden.py::test_perf", "softmax.perf.rows", "passed",
                       perf={"ratio": ratio})]


def test_scores_follow_the_points_file(points):
    result = _result(points, _stream(*_rows(points, "failed", ratio=0.72)))
    assert result["status"] == "graded"
    rows = next(c for c in result["problems"][0]["checks"] if c["id"] == "softmax.rows")
    perf = next(c for c in result["problems"][0]["checks"] if c["id"] == "softmax.perf.rows")
    # 0.72 lies 2/15 of the way from good (0.7, credit 0.8) to excellent (0.85, 1.0): 4 x 0.8267
    assert rows["earned"] == 2.0 and perf["level"] == "good" and perf["earned"] == pytest.approx(3.3067, abs=1e-4)
    assert result["problems"][0]["perf_earned"] == pytest.approx(3.3067, abs=1e-4)
    assert result["score"]["earned"] == pytest.approx(5.3067, abs=1e-4) and result["score"]["total"] == 10


def test_a_shared_gpus_lock_summary_is_kept_in_the_result_for_staff(points):
    from grader.results import gpu_lock_line

    summary = {"totals": {"waited_s": 2.0}, "intervals": ["wait_shared 1.000 3.000", "shared 3.000 4.000"]}
    stream = _stream(*_rows(points)).replace(END_LINE, gpu_lock_line(summary) + "\n" + END_LINE)
    assert _result(points, stream)["gpu_lock"] == summary
    assert "gpu_lock" not in _result(points, _stream(*_rows(points)))     # no shared GPU, no summary


def test_unreported_checks_score_zero_with_the_runs_reason(points):
    stream = _stream(*_rows(points)[:1], end=False)[:-1] + '\n{"type": "test", "nodeid": "tests_pu'
    result = _result(points, stream, status="timeout", reason="stopped after the 60 s budget")
    masking = next(c for c in result["problems"][0]["checks"] if c["id"] == "softmax.masking")
    assert masking["earned"] == 0 and masking["tests"][0]["outcome"] == "did_not_report"
    assert masking["tests"][0]["message"] == "stopped after the 60 s budget"
    assert any("incomplete" in note for note in result["notes"])
    rows = next(c for c in result["problems"][0]["checks"] if c["id"] == "softmax.rows")
    assert [t["outcome"] for t in rows["tests"]] == ["passed", "did_not_report"]   # the cut-off test
    assert result["score"]["earned"] == 2.0 and result["missing_exact"] is False


def test_collected_tests_in_the_header_make_missing_tests_exact(points):
    header = json.loads(_stream(end=False).splitlines()[0])
    header["collected_tests"] = [["tests_public/test_softmax.py::test_rows[fp32]", "softmax.rows"],
                                 ["tests_public/test_softmax.py::test_rows[bf16]", "softmax.rows"],
                                 ["tests_hidden/test_softmax_hidden.py::test_masking", "softmax.masking"]]
    stream = json.dumps(header) + "\n" + record_line(_rows(points)[0]) + "\n"
    result = _result(points, stream, status="crashed", reason="killed by signal SIGKILL")
    checks = {c["id"]: c for c in result["problems"][0]["checks"]}
    assert [t["nodeid"] for t in checks["softmax.rows"]["tests"]] == [
        "tests_public/test_softmax.py::test_rows[fp32]", "tests_public/test_softmax.py::test_rows[bf16]"]
    assert checks["softmax.rows"]["earned"] == 2.0 and checks["softmax.masking"]["earned"] == 0
    assert checks["softmax.masking"]["tests"][0]["message"] == "killed by signal SIGKILL"
    assert result["missing_exact"] is True


def test_records_for_unknown_checks_or_reported_twice_are_not_trusted(points):
    forged = Record("tests_hidden/x.py::test_forged", "softmax.bogus", "passed")
    twice = _rows(points)[0]
    result = _result(points, _stream(twice, forged, twice))
    rows = next(c for c in result["problems"][0]["checks"] if c["id"] == "softmax.rows")
    assert [t["outcome"] for t in rows["tests"]] == ["failed"]
    assert any("unknown check" in note for note in result["notes"])
    assert any("reported twice" in note for note in result["notes"])


def test_graded_run_without_a_header_is_a_crash(points):
    result = _result(points, "")
    assert result["status"] == "crashed" and result["score"]["earned"] == 0


def test_percent_never_rounds_to_full_or_empty():
    assert model.percent_text(99.6, 100) == "99%" and model.percent_text(100, 100) == "100%"
    assert model.percent_text(0.2, 100) == "1%" and model.percent_text(0, 100) == "0%"
    assert model.percent_text(0, 0) == "n/a"


def test_student_report_escapes_student_text_and_shows_failures_and_perf(points):
    page = html.render_student(_result(points, _stream(*_rows(points, "failed"))))
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "max |err| 0.5 &gt; allowed 0.01" in page
    assert "test_rows[bf16]" in page and "0.90x" in page and "excellent" in page
    assert "notes.txt (not an assignment module file)" in page and "matmul.py" in page
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "<script" not in page


def test_templates_refuse_missing_fields(points):
    result = _result(points, _stream(*_rows(points)))
    del result["suite"]
    with pytest.raises(jinja2.UndefinedError):
        html.render_student(result)


def test_class_page_summarises_statuses_failures_and_perf(points):
    good = _result(points, _stream(*_rows(points)))
    bad = dict(_result(points, _stream(*_rows(points, "failed", ratio=0.4))), id="bob")
    gone = model.not_gradable_result("carol<b>", "no assignment module files found", {"late": None}, 10.0)
    page = html.render_index([good, bad, gone], points)
    assert "not gradable: 1" in page and "graded: 2" in page
    assert "tests_public/test_softmax.py::test_rows[bf16]" in page
    assert "softmax.perf.rows" in page and "0.40x / 0.65x / 0.90x" in page
    assert "carol&lt;b&gt;" in page and 'href="carol%3Cb%3E/report.html"' in page


def test_histogram_puts_each_student_in_one_bin():
    results = [{"score": {"earned": e, "possible": 10.0}} for e in (0, 1, 5, 10, 10)]
    bars = html.histogram(results, bins=10)
    assert [b.count for b in bars] == [1, 1, 0, 0, 0, 1, 0, 0, 0, 2]
    assert max(b.height for b in bars) == 100


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (apt-get install -y chromium; "
                    "make install does it on Debian): cannot render the reports in a browser")
@pytest.mark.parametrize("page", ["student", "index"])
def test_report_renders_in_headless_chromium_without_errors(points, tmp_path, page):
    result = _result(points, _stream(*_rows(points, "failed")))
    text = html.render_student(result) if page == "student" else html.render_index([result], points)
    path = tmp_path / f"{page}.html"
    path.write_text(text)
    shot = tmp_path / f"{page}.png"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'ud'}",
         "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", "--window-size=400,900",
         f"file://{path}"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.exists() and shot.stat().st_size > 5000
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []


def test_result_json_round_trips(points):
    result = _result(points, _stream(*_rows(points)))
    assert json.loads(json.dumps(result)) == result


def test_hidden_failures_show_a_fixed_verdict_without_the_tests_names_values_or_source(points):
    leaky = ("tests_hidden/test_softmax_hidden.py:12: in test_masking\n    assert_close(out, SECRET_CASE)\n"
             "E   AssertionError: masked row 3 not zero: max |err| 0.25 > allowed 0 (rows=7 fp16)")
    stream = _stream(Record("tests_hidden/test_softmax_hidden.py::test_masking", "softmax.masking", "failed", leaky))
    result = _result(points, stream)
    page = html.render_student(result)
    assert model.HIDDEN_VERDICTS["failed"] in page and "1 hidden test" in page
    for secret in ("SECRET_CASE", "log line", "max |err| 0.25", "rows=7", "test_masking"):
        assert secret not in page, secret
    from grader.course import gradescope_json
    outputs = " ".join(t["output"] for t in gradescope_json.final(result)["tests"])
    assert model.HIDDEN_VERDICTS["failed"] in outputs
    assert "SECRET_CASE" not in outputs and "max |err| 0.25" not in outputs and "test_masking" not in outputs


def test_a_hidden_message_quoting_what_the_code_returned_becomes_its_kinds_verdict():
    returned = "E   AssertionError: flops() returned 'tests_hidden/test_x.py::test_secret', expected 54,000,000,000"
    assert model.student_message(returned, "hidden") == model.HIDDEN_VERDICTS["failed"]
    assert model.student_message("your code raised Secret_test_name: hello", "hidden") == \
        model.HIDDEN_VERDICTS["raised"]
    died = "WorkerLost: the process running your code died (exit code 17)"
    assert model.student_message(died, "hidden") == model.HIDDEN_VERDICTS["crash"]
    assert model.student_message(returned, "public") == returned


def test_the_class_page_and_the_bench_say_where_the_grading_time_went(tmp_path):
    from grader.bench.grading import bench_summary
    from grader.report.time_summary import time_rows

    results = [{"id": f"s{i}", "status": "graded", "score": {"earned": 1, "possible": 2, "total": 2}, "problems": [],
                "timing": {"tests_s": 10.0, "child_s": 12.0, "total_s": 13.0, "correctness_s": 6.0, "perf_s": 4.0,
                           "compile_s": 3.0 + i, "compiles": 20 + i, "lock_wait_s": 2.0, "perf_alone_s": 1.5,
                           "seat_wait_s": 0.5}} for i in range(2)]
    rows = {row.field: row for row in time_rows(results)}
    assert rows["compile_s"].mean_s == 3.5 and rows["compile_s"].total_s == 7.0 and rows["perf_alone_s"].total_s == 3.0
    text = bench_summary(results, elapsed=60.0, gpus=1)
    assert "where the time went" in text and "perf_alone_s" in text and "20.5 per submission" in text
    page = html.render_index(results, load_points())
    assert "Where the grading time went" in page and "3.5 s" in page


MATMUL_POINTS = """
[problem]
id = "matmul"
title = "Tiled matmul"
order = 2
[checks."matmul.values"]
points = 6
description = "matmul matches torch"
"""


@pytest.fixture
def two_problems(tmp_path):
    (tmp_path / "softmax.toml").write_text(textwrap.dedent(POINTS))
    (tmp_path / "matmul.toml").write_text(textwrap.dedent(MATMUL_POINTS))
    return load_points(tmp_path, calibration_file=tmp_path / "none.json")


def test_the_student_report_leads_with_missing_files_then_crashes_then_the_checks(two_problems):
    missing = "matmul.py is missing from the submission"
    died = ("tests_public/test_softmax.py:9: out = impl.softmax.rows(x)\n"
            "the process running your code died (exit code -6)")
    records = [Record(f"tests_public/test_matmul.py::test_values[{i}]", "matmul.values", "not_implemented", missing)
               for i in range(24)]
    records += [Record(f"tests_public/test_softmax.py::test_rows[{i}]", "softmax.rows", "failed", died) for i in (1, 2)]
    result = _result(two_problems, _stream(*records))
    result["missing_reasons"] = {"matmul": "did you mean matmul.py? found Matmul.py"}
    page = html.render_student(result)
    fix = page.index("What to fix first")
    missing_at = page.index("matmul.py is missing from the submission (did you mean matmul.py? found Matmul.py)")
    crash = page.index("the process running your code died (exit code -6)")
    assert fix < missing_at < crash < page.index("<h2>Summary</h2>")
    assert page.count("matmul.py is missing from the submission") == 1     # 24 repeats folded into one line
    assert "(24 tests)" in page and "(2 tests)" in page


def test_repeated_failure_messages_are_folded_with_their_tests_named(points):
    records = [Record(f"tests_public/test_softmax.py::test_rows[{i}]", "softmax.rows", "failed", "same mistake")
               for i in range(6)]
    views = model.problem_views(_result(points, _stream(*records)))
    (folded,) = next(c for c in views[0].checks if c.id == "softmax.rows").failing
    assert len(folded.names) == 6
    assert folded.label == "test_rows[0], test_rows[1], test_rows[2], test_rows[3] and 2 more"


def test_the_environment_table_has_labelled_formatted_rows_and_no_empty_ones(points):
    result = _result(points, _stream())
    result["device"] = "cuda (NVIDIA H200)"
    result["environment"] = {"device": "cuda (NVIDIA H200)", "clocks_before": {"sm_mhz": 1980, "mem_mhz": 3201},
                             "clocks_after": None, "copy_gbs": 3950.1, "gpu_uuid": "GPU-1234", "cudnn": None,
                             "other_gpu_processes": [], "gpu_count": 1, "torch": "2.13.0",
                             "calibration": {"model": "NVIDIA H200", "exact": True, "warning": None}}
    rows = dict(model.environment_rows(result))
    assert [label for label, _ in model.environment_rows(result)].count("device") == 1
    assert rows["clocks before the checks"] == "SM 1980 MHz, memory 3201 MHz"
    assert rows["copy bandwidth"] == "3950.1 GB/s" and rows["PyTorch"] == "2.13.0"
    assert rows["perf ladders"] == "calibrated on NVIDIA H200"
    assert not any(value in ("None", "[]", "{}", "") for value in rows.values())
    left_out = {"clocks after the checks", "cuDNN", "other processes on the GPU", "GPUs visible", "gpu uuid"}
    assert not left_out & set(rows)
    page = html.render_student(result)
    assert "None" not in page.split("<h2>Environment</h2>")[1]


HOSTILE_OUTPUT = ("ok\r\n\x1b]0;pwned title\x07\x1b[2J\x1b[1;1Hall checks passed\rPASSED \x9b31m"
                  "\u202eevil\u202c\x00\x7f\tend\n")


def test_control_characters_in_student_output_reach_log_txt_escaped(points, tmp_path):
    """Escape sequences in a student's prints must not drive the terminal of a TA who runs `cat log.txt`."""
    from grader.report.student_files import write_submission_outputs

    result = model.build_result("alice", points, read_stream(_stream()), "graded", "", HOSTILE_OUTPUT,
                                {"late": False}, suites=("public",))
    write_submission_outputs(tmp_path / "alice", result, HOSTILE_OUTPUT)
    for text in ((tmp_path / "alice" / "log.txt").read_text(), json.loads(
            (tmp_path / "alice" / "result.json").read_text())["log_tail"]):
        assert not any(ord(c) < 32 and c not in "\n\t" or 0x7f <= ord(c) <= 0x9f or c in "\u202e\u202c"
                       for c in text), repr(text)
        assert "\\x1b]0;pwned title\\x07" in text and "passed\\x0dPASSED \\x9b31m" in text
        assert text.startswith("ok\n") and "\\u202eevil" in text and "\tend\n" in text
