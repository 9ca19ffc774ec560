"""The results stream: written line by line by the checking run, read back by one defensive reader."""

import json

from grader import results
from grader.results import END_LINE, header_line, read_stream, record_line
from grader.results import TestRecord as Record


def _header(**extra):
    return header_line("solutions", "cpu", {"torch": "2"}, ["softmax.rows"], **extra)


def _test(nodeid="t::a", outcome=results.PASSED, check="softmax.rows"):
    return record_line(Record(nodeid, check, outcome, "msg", 0.5))


def test_a_complete_stream_reads_back_every_record_and_the_end():
    read = read_stream("\n".join([_header(), _test("t::a"), _test("t::b", results.FAILED), END_LINE]))
    assert read.finished and read.notes == []
    assert [(r.nodeid, r.outcome) for r in read.results.tests] == [("t::a", "passed"), ("t::b", "failed")]


def test_a_truncated_last_line_keeps_what_came_before():
    read = read_stream(_header() + "\n" + _test() + "\n" + _test("t::b")[:20])
    assert not read.finished and [r.nodeid for r in read.results.tests] == ["t::a"]
    assert any("incomplete" in note for note in read.notes)


def test_records_before_the_header_or_after_the_end_are_never_read():
    text = "\n".join([_test("t::early"), _header(), _test("t::a"), END_LINE, _test("t::late")])
    assert [r.nodeid for r in read_stream(text).results.tests] == ["t::a"]


def test_malformed_records_and_unknown_checks_are_ignored_with_a_note():
    bad = json.dumps({"type": "test", "nodeid": "t::x", "check": "softmax.rows", "outcome": "excellent"})
    text = "\n".join([_header(), bad, _test("t::y", check="made.up"), _test("t::a"), END_LINE])
    read = read_stream(text, known_checks={"softmax.rows"})
    assert [r.nodeid for r in read.results.tests] == ["t::a"] and len(read.notes) == 2


def test_a_test_reported_twice_is_scored_failed():
    read = read_stream("\n".join([_header(), _test("t::a"), _test("t::a"), END_LINE]))
    assert [r.outcome for r in read.results.tests] == [results.FAILED]


def test_a_header_of_another_version_or_shape_is_refused():
    header = json.loads(_header())
    for broken in ({**header, "version": 99}, {**header, "environment": "x"}):
        read = read_stream(json.dumps(broken) + "\n" + _test() + "\n" + END_LINE)
        assert read.results is None and read.notes


def test_collected_tests_absent_means_unknown_not_empty():
    assert read_stream(_header()).results.collected_tests is None
    listed = read_stream(_header(collected_tests=[("t::a", "softmax.rows")])).results.collected_tests
    assert listed == [("t::a", "softmax.rows")]


def test_long_messages_are_bounded_when_read_back():
    record = record_line(Record("t::a", "softmax.rows", results.FAILED, "x" * 50_000))
    message = read_stream(_header() + "\n" + record).results.tests[0].message
    assert len(message) <= results.MESSAGE_LIMIT + 10


def test_a_shared_gpus_lock_line_reads_back_and_a_malformed_one_is_ignored_with_a_note():
    summary = {"totals": {"waited_s": 1.5, "compiles": 2},
               "intervals": ["wait_shared 10.000 11.500", "shared 11.500 12.000", "lent 11.600 11.900"]}
    read = read_stream("\n".join([_header(), _test(), results.gpu_lock_line(summary), END_LINE]))
    assert read.finished and read.results.gpu_lock == summary and read.notes == []
    for broken in ({"totals": {"waited_s": "long"}, "intervals": []},
                   {"totals": {}, "intervals": ["asleep 1.0 2.0"]},
                   {"totals": {}, "intervals": ["shared 2.0 1.0"]},
                   {"totals": {}, "intervals": [["shared", 1.0, 2.0]]},
                   {"totals": {}}):
        read = read_stream("\n".join([_header(), results.gpu_lock_line(broken), END_LINE]))
        assert read.results.gpu_lock is None and any("GPU lock" in note for note in read.notes), broken


def _part(nodeids, check="softmax.rows", finished=True, lock=None):
    lines = [header_line("solutions", "cuda", {"gpu": "H200"}, [check], [(n, check) for n in nodeids])]
    lines += [_test(n, check=check) for n in nodeids]
    if lock is not None:
        lines.append(results.gpu_lock_line(lock))
    return "\n".join(lines + ([END_LINE] if finished else []))


def test_merged_parts_read_back_as_one_run_with_every_collected_test_and_record():
    merged = results.merge_streams([_part(["a::x", "a::y"]), _part(["b::z"], check="matmul.square")])
    read = read_stream(merged)
    assert read.finished and read.notes == []
    assert [r.nodeid for r in read.results.tests] == ["a::x", "a::y", "b::z"]
    assert read.results.collected_tests == [("a::x", "softmax.rows"), ("a::y", "softmax.rows"),
                                            ("b::z", "matmul.square")]
    assert read.results.collected_checks == ["softmax.rows", "matmul.square"]
    assert read.results.environment == {"gpu": "H200"}


def test_a_part_cut_short_leaves_the_merged_run_unfinished_with_its_collected_tests_kept():
    merged = results.merge_streams([_part(["a::x"]), _part(["b::z"], finished=False)])
    read = read_stream(merged)
    assert not read.finished
    assert ("b::z", "softmax.rows") in read.results.collected_tests


def test_merged_lock_lines_sum_their_totals_and_join_their_timelines():
    one = {"totals": {"waited_s": 1.5, "compiles": 2}, "intervals": ["shared 0.000 1.000"]}
    two = {"totals": {"waited_s": 2.0, "compiles": 3}, "intervals": ["alone 0.500 0.700"]}
    read = read_stream(results.merge_streams([_part(["a::x"], lock=one), _part(["b::z"], lock=two)]))
    assert read.results.gpu_lock == {"totals": {"waited_s": 3.5, "compiles": 5},
                                     "intervals": ["shared 0.000 1.000", "alone 0.500 0.700"]}


def test_a_test_two_parts_both_report_is_scored_failed_in_the_merge():
    read = read_stream(results.merge_streams([_part(["a::x"]), _part(["a::x"])]))
    assert [(r.nodeid, r.outcome) for r in read.results.tests] == [("a::x", results.FAILED)]
