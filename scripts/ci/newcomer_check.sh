#!/usr/bin/env bash
# The README as a newcomer runs it: a fresh venv under /tmp WITHOUT the system's packages, `make
# install` in it, `grader grade examples/submissions` sandboxed (the reference earns every point that
# runs on this machine, the stubs 0, `partial` the same total when graded again, one max for all),
# and `make handout`. Fails on the first step that does not. Called by .ci/run after `make test`.
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/newcomer-XXXXXX)
trap 'rm -rf "$work"' EXIT
step() { echo; echo "=== newcomer: $* ($(date -u +%H:%M:%S))"; }

step "fresh venv at $work/venv"
python3 -m venv "$work/venv"
# What `source venv/bin/activate` does; nothing of the caller's Python setup leaks in.
export VIRTUAL_ENV="$work/venv" PATH="$work/venv/bin:$PATH"
unset PYTHONPATH PYTHONHOME
test "$(command -v python3)" = "$work/venv/bin/python3"

step "make install"
make install

step "grader doctor"
grader doctor

step "grader grade examples/submissions (sandboxed)"
command -v bwrap >/dev/null || { echo "newcomer: bubblewrap is missing, the grade would not be sandboxed"; exit 1; }
grader grade examples/submissions --out "$work/reports" --jobs 2
cp "$work/reports/grades.csv" "$work/first.csv"

step "grade partial again: the same total"
grader grade examples/submissions --out "$work/reports" --only partial --force   # --only alone keeps a grade

python3 - "$work/first.csv" "$work/reports" <<'PY'
import csv, json, sys
from pathlib import Path

first = {row["id"]: row for row in csv.DictReader(open(sys.argv[1]))}
reports = Path(sys.argv[2])
again = {row["id"]: row for row in csv.DictReader(open(reports / "grades.csv"))}
results = {name: json.loads((reports / name / "result.json").read_text()) for name in first}
problems = []
for name, result in results.items():
    if result["status"] != "graded" or result["sandbox"] != "bubblewrap":
        problems.append(f"{name}: {result['status']} in sandbox {result['sandbox']}: {result['reason']}")
maxima = {row["max"] for row in [*first.values(), *again.values()]}
if len(maxima) != 1:
    problems.append(f"more than one max in the batch: {sorted(maxima)}")
if first["reference"]["total"] != first["reference"]["max"]:
    problems.append(f"reference: {first['reference']['total']}/{first['reference']['max']}, not every point")
if float(first["stubs"]["total"]) != 0:
    problems.append(f"stubs: {first['stubs']['total']}, not 0")
if first["partial"]["total"] != again["partial"]["total"]:
    problems.append(f"partial: {first['partial']['total']} then {again['partial']['total']}")
for name in sorted(first):
    print(f"newcomer: {name}: {first[name]['total']}/{first[name]['max']} then {again[name]['total']}")
if problems:
    sys.exit("newcomer grading check failed:\n  " + "\n  ".join(problems))
PY

step "make handout"
make handout
step "done"
