"""A value the student's code returned that the checker cannot even judge is the student's failure.

Judging raises instead of asserting when the value is of the wrong kind: a str indexed like a dict, one
tensor unpacked like a pair, a 4000-digit int given to `math.isfinite`. That is a failed test with a
message naming the returned value's type, never a harness error (which withholds the whole grade and
is regraded forever). A bug in the test's own maths, which touches no returned value, stays a harness
error."""

from __future__ import annotations

import textwrap

import pytest

from grader import results

POINTS = textwrap.dedent('''
    [problem]
    id = "softmax"
    title = "Fake softmax"
    order = 1

    [checks."softmax.fake.values"]
    points = 4
    [checks."softmax.fake.harness"]
    points = 2
''')

SUBMISSION = textwrap.dedent('''
    def as_text(x):
        return "a dict was expected"

    def one_tensor(x):
        return x * 2

    def huge(x):
        return 10 ** 4000

    def as_nested_text(x):
        return ("a", "tuple of str")

    def fine(x):
        return x * 2
''')

SUITE = textwrap.dedent('''
    import math

    import pytest
    import torch

    from grader.diagnose import check_value

    @pytest.mark.check("softmax.fake.values")
    def test_a_str_where_a_dict_is_expected(impl):
        result = impl.softmax.as_text(torch.ones(3))
        assert torch.equal(result["out"], torch.ones(3))

    @pytest.mark.check("softmax.fake.values")
    def test_one_tensor_where_a_pair_is_expected(impl):
        o, lse = impl.softmax.one_tensor(torch.ones(3))

    @pytest.mark.check("softmax.fake.values")
    def test_a_huge_int_given_to_isfinite(impl):
        n = impl.softmax.huge(torch.ones(1))
        assert math.isfinite(n) and n > 0

    @pytest.mark.check("softmax.fake.values")
    def test_a_part_of_the_returned_value_given_to_torch(impl):
        out, lse = impl.softmax.as_nested_text(torch.ones(1))
        assert torch.isnan(lse).any()

    @pytest.mark.check("softmax.fake.values")
    def test_a_huge_int_given_to_check_value(impl):
        check_value("huge(x)", impl.softmax.huge(torch.ones(1)), 7.2e23)

    @pytest.mark.check("softmax.fake.harness")
    def test_a_bug_in_the_reference_after_the_call(impl):
        out = impl.softmax.fine(torch.ones(2))
        expected = torch.ones(2).softmax(dim=3)
        assert torch.equal(out, expected)

    @pytest.mark.check("softmax.fake.harness")
    def test_a_bug_on_the_checkers_own_values(impl):
        out = impl.softmax.fine(torch.ones(2))
        table = {"expected": torch.ones(2) * 2}
        assert torch.equal(out, table["wanted"])
''')

JUDGED = ("test_a_str_where_a_dict_is_expected", "test_one_tensor_where_a_pair_is_expected",
          "test_a_huge_int_given_to_isfinite", "test_a_part_of_the_returned_value_given_to_torch",
          "test_a_huge_int_given_to_check_value")
NAMED_TYPE = {"test_a_str_where_a_dict_is_expected": "a str", "test_one_tensor_where_a_pair_is_expected": "a Tensor",
              "test_a_huge_int_given_to_isfinite": "an int of 13288 bits",
              "test_a_part_of_the_returned_value_given_to_torch": "a str"}


@pytest.fixture(params=["in_process", "isolated"])
def records(request, grader_pytester, run_suites):
    """The suite above against the submission above, in both modes: {test name: its record}."""
    project = grader_pytester.path
    (project / "points").mkdir()
    (project / "points" / "softmax.toml").write_text(POINTS)
    (project / "submission").mkdir()
    (project / "submission" / "softmax.py").write_text(SUBMISSION)
    (project / "tests_public").mkdir()
    (project / "tests_public" / "test_values.py").write_text(SUITE)
    stream = project / "results.jsonl"
    done = run_suites("tests_public", "--impl", str(project / "submission"), f"--results-json={stream}",
                      *(["--isolate"] if request.param == "isolated" else []))
    read = results.read_stream(stream.read_text())
    assert read.finished, done.stdout.str()[-3000:] + done.stderr.str()[-3000:]
    return {record.nodeid.split("::")[-1]: record for record in read.results.tests}


def test_a_value_the_checker_cannot_judge_is_the_students_failure(records):
    for name in JUDGED:
        record = records[name]
        assert record.outcome == results.FAILED, (name, record.message)
        if name in NAMED_TYPE:
            assert f"could not judge what your code returned, {NAMED_TYPE[name]}" in record.message, record.message


def test_a_bug_in_the_test_that_touches_no_returned_value_stays_a_harness_error(records):
    for name in ("test_a_bug_in_the_reference_after_the_call", "test_a_bug_on_the_checkers_own_values"):
        assert records[name].outcome == results.HARNESS_ERROR, (name, records[name].message)


def test_a_large_returned_tensor_is_not_kept_alive_for_judging():
    """A perf check's outputs must be freed when its loop drops them, as before."""
    import gc
    import weakref

    import torch

    from grader.returned_values import HOLD_BYTES, ReturnedValues

    returned = ReturnedValues()
    big = torch.zeros(HOLD_BYTES // 4 + 1)
    returned.record(big, None)
    returned.record((big, 1.5), None)
    alive = weakref.ref(big)
    del big
    gc.collect()
    assert alive() is None
