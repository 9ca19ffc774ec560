"""Write grader/grade/test_seconds.json from references already graded as a class, and show the split.

`grader bench grading --save-test-seconds` grades copies of the reference and writes the file in one
go. This does the same from graded folders a device call brought back (class_proof.sh's `honest` or
`mixed`): every graded submission whose id starts with "reference" counts. It prints each part's
seconds by the file before and after, for the suite those references ran.

    PYTHONPATH=. python scripts/measure/save_test_seconds.py GRADED_FOLDER... [--dry-run]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from grader.grade import parts
from grader.report.class_files import RESULT_FILE
from grader.report.model import result_tests


def graded_references(folders: list[Path]) -> list[dict]:
    results = [json.loads(path.read_text()) for folder in folders for path in sorted(folder.glob(f"*/{RESULT_FILE}"))]
    return [r for r in results if str(r.get("id", "")).startswith("reference") and r.get("status") == "graded"]


def part_seconds(results: list[dict], seconds: dict[str, float]) -> list[float]:
    """Each part's seconds by `seconds`, for the tests the first result ran, as the runner would split them."""
    collected = [(str(test["nodeid"]), str(test.get("check", ""))) for test in result_tests(results[0])]
    problem_of = {check: check.split(".")[0] for _, check in collected}
    return [round(part.seconds, 1) for part in parts.plan(collected, problem_of, seconds=seconds)]


def main(argv: list[str]) -> int:
    dry_run = "--dry-run" in argv
    folders = [Path(arg) for arg in argv if arg != "--dry-run"]
    results = graded_references(folders)
    if not results:
        print(f"no graded reference in {', '.join(map(str, folders)) or 'no folder'}", file=sys.stderr)
        return 1
    before = part_seconds(results, parts.load_test_seconds())
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "test_seconds.json" if dry_run else parts.TEST_SECONDS_FILE
        written = parts.save_test_seconds(results, path)
    print(f"{len(results)} graded references ({parts.graded_on(results[0])}), {len(written)} tests' seconds"
          f"{'' if dry_run else ' written to ' + str(parts.TEST_SECONDS_FILE)}")
    print(f"parts by the file before: {before}; by these references: {part_seconds(results, written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
