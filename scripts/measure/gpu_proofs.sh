#!/usr/bin/env bash
# H200 proofs of several submissions per GPU, perf stability and the timing-cheat defences. One H200
# with 16 cores; every step prints its numbers and the whole working folder ends up in
# $OUT/<subcommand>.tgz (logs and every result.json).
#   part1  (~7 min)  alone: one reference, --per-gpu 1   -> T1, the reference's ratios alone
#                    spread: partial graded 3 times at once (--per-gpu 3) -> score and perf spread
#   part2  (~8 min)  shared: four references at once (COPIES=N for N, PER_GPU=M at a time), --per-gpu 4
#                            -> T4, gain = 4 T1 / T4 (>= 2.5x),
#                            ratios with 4 sharing vs alone, 4 more full-mark grades
#                    cheats: the three timing-cheat gallery entries and the clean reference, perf on
#                    span: the side-stream cheat's speed-up over the clean softmax (scripts/investigations/sync_span_check.py)
# Perf warm-ups (compile, autotune) have the GPU alone, lending it out while they compile;
# GRADER_PERF_WARMUP=shared (exported before the call) runs them beside the other submissions instead.
#   seconds (~9 min) eight references at 4 per GPU with SAVE_SECONDS=1: the seconds their tests take
#                    shared, which the split packs parts by (test_seconds.json, copied to $WORK)
# Single steps: alone | alone_split | spread | shared | cheats | span | profile (the perf checks alone, timed
# step by step) | lag (busy cores and GPU neighbours against a timed matmul, scripts/investigations/host_lag_check.py). Every grade uses the
# hidden suite (all perf checks are there) to keep within the time.
# part2's throughput line and alone-vs-shared table need part1's $WORK/alone on the same machine;
# otherwise unpack both tarballs and run
#   python scripts/measure/gpu_proofs_summary.py alone=part1/alone shared=part2/shared partial=part1/partial
# Run as: OUT=... bash scripts/measure/gpu_proofs.sh part1   (then part2), each one device call.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-out}
WORK=${WORK:-/tmp/gpu-proofs}
mkdir -p "$OUT" "$WORK"
BUDGET=${BUDGET:-560}              # seconds for a whole subcommand: it must end well inside 10 minutes
START=$SECONDS
left() { local rest=$((BUDGET - (SECONDS - START) - 15)); echo $((rest < ${1:-$rest} ? rest : ${1:-$rest})); }

header() {
  { date -u; nproc; free -g | head -2; nvidia-smi --query-gpu=index,name,memory.total,clocks.sm --format=csv
    git log --oneline -1; } > "$WORK/machine-$1.txt" 2>&1
  cat "$WORK/machine-$1.txt"
}

bench_alone() {   # one reference, nothing beside it: $1 its folder under $WORK, then bench grading's options
  local name=$1; shift
  rm -rf "$WORK/$name"
  { time timeout "$(left 330)" python -m grader bench grading --copies 1 --gpus 0 --per-gpu 1 --suite hidden \
      "$@" --out "$WORK/$name"; } > "$WORK/$name.log" 2>&1
  tail -n 8 "$WORK/$name.log"
}

alone() {   # the baseline: the whole suite in one run
  bench_alone alone --whole-suite
}

alone_split() {   # its suite split into parts side by side
  bench_alone alone-split
}

spread() {
  python examples/make_examples.py > /dev/null
  rm -rf "$WORK/partial-subs" "$WORK/partial"
  mkdir -p "$WORK/partial-subs"
  for copy in 1 2 3; do cp -r examples/submissions/partial "$WORK/partial-subs/partial$copy"; done
  local limit; limit=$(left)
  # the grader's own per-submission budget ends first, so what reported is kept (status timeout)
  { time timeout "$limit" python -m grader grade "$WORK/partial-subs" --out "$WORK/partial" --gpus 0 \
      --per-gpu 3 --suite hidden --force --timeout $((limit - 20)); } > "$WORK/partial.log" 2>&1
  tail -n 6 "$WORK/partial.log"
}

# What N at once on one GPU use at their peak: GPU memory in all and per process, and the cores' load.
sample_start() {
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$WORK/gpu-memory.log" 2>&1 &
  SAMPLERS="$!"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits -lms 1000 \
    > "$WORK/gpu-processes.log" 2>&1 &
  SAMPLERS="$SAMPLERS $!"
  vmstat -n 5 > "$WORK/vmstat.log" 2>&1 &
  SAMPLERS="$SAMPLERS $!"
}

sample_stop() {
  kill $SAMPLERS 2>/dev/null
  python - "$WORK" <<'EOF'
import sys
from pathlib import Path
work = Path(sys.argv[1])
def numbers(name, column):
    out = []
    for line in (work / name).read_text().splitlines():
        parts = line.replace(",", " ").split()
        try:
            out.append(float(parts[column]))
        except (IndexError, ValueError):
            pass
    return out
total = numbers("gpu-memory.log", 0)
per_process = numbers("gpu-processes.log", 1)
idle = numbers("vmstat.log", 14)[1:]          # the first line is the average since boot
free_kib = numbers("vmstat.log", 3)[1:]
if total:
    print(f"GPU MEMORY peak {max(total) / 1024:.1f} GiB in all; one process at most "
          f"{max(per_process or [0]) / 1024:.1f} GiB")
if idle:
    print(f"CPU busy {100 - sum(idle) / len(idle):.0f}% on average, {100 - min(idle):.0f}% at the busiest 5 s")
if free_kib:
    print(f"RAM free {min(free_kib) / 2**20:.1f} GiB at the least")
EOF
}

shared() {   # COPIES references (default 4) on GPU 0, PER_GPU of them at once (default: all); SAVE_SECONDS=1
  local copies=${COPIES:-4}   # also records their tests' seconds (test_seconds.json, copied to $WORK)
  local save=(); [ "${SAVE_SECONDS:-0}" = 1 ] && save=(--save-test-seconds)
  rm -rf "$WORK/shared"
  sample_start
  date +%s.%N > "$WORK/shared.start"      # result.json mtimes against it: completions over time, even if killed
  { time timeout "$(left 575)" python -m grader bench grading --copies "$copies" --gpus 0 \
      --per-gpu "${PER_GPU:-$copies}" --suite hidden "${save[@]}" --out "$WORK/shared"; } > "$WORK/shared.log" 2>&1
  sample_stop
  cp grader/grade/test_seconds.json "$WORK/"
  python - "$WORK" <<'EOF'
import sys
from pathlib import Path
work = Path(sys.argv[1])
start = float((work / "shared.start").read_text())
done = sorted(path.stat().st_mtime - start for path in (work / "shared").glob("*/result.json"))
print("COMPLETIONS (s after the start): " + (", ".join(f"{t:.0f}" for t in done) or "none"))
EOF
  tail -n 8 "$WORK/shared.log"
  grep -h "GPU lock:" "$WORK"/shared/*/log.txt   # waited / held alone / lent to compiles, per run
  python scripts/investigations/gpu_lock_timeline.py "$WORK/shared"   # what each run waited for, from the lock timelines
  python - "$WORK" <<'EOF'
import re, sys
from pathlib import Path
work = Path(sys.argv[1])
def wall(name):
    text = (work / f"{name}.log").read_text() if (work / f"{name}.log").exists() else ""
    match = re.search(r"graded (\d+) copies of the reference in ([\d.]+) s", text)
    return (int(match.group(1)), float(match.group(2))) if match else None
one, four = wall("alone"), wall("shared")
if one and four:
    gain = (four[0] / four[1]) / (one[0] / one[1])
    print(f"THROUGHPUT alone {3600 * one[0] / one[1]:.1f}/h, {four[0]} per GPU {3600 * four[0] / four[1]:.1f}/h: "
          f"gain {gain:.2f}x (needs >= 2.5x)")
else:
    print(f"THROUGHPUT: missing a run (alone {one}, shared {four})")
EOF
}

cheats() {
  rm -rf "$WORK/gallery"
  GALLERY_PER_GPU=4 timeout "$(left)" python -m pytest tests/test_adversarial.py -k timing_cheats -s -q \
    -p no:cacheprovider --basetemp="$WORK/gallery" > "$WORK/cheats.log" 2>&1
  grep -h "GALLERY-RATIO" "$WORK/cheats.log"
  tail -n 4 "$WORK/cheats.log"
}

profile() {   # the reference's perf checks alone in one checking run, each timing step's wall time printed
  timeout "$(left 240)" env GRADER_TIMING_DEBUG=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 \
    python -m pytest -p grader.plugin -p pytest_timeout tests_hidden -m perf --impl solutions --isolate \
    --results-json "$WORK/profile.jsonl" -q -s -p no:cacheprovider > "$WORK/profile.log" 2>&1
  tail -n 3 "$WORK/profile.log"
  python scripts/measure/perf_profile_summary.py "$WORK/profile.jsonl" "$WORK/profile.log" | tee "$WORK/profile.txt"
}

lag() {   # busy cores and GPU neighbours against the reference's timed 4096^3 matmuls
  timeout "$(left 300)" python scripts/investigations/host_lag_check.py 2>&1 | grep "^HOST-LAG"
}

span() {   # the side-stream cheat against the clean softmax, timed by the worker's own function
  timeout "$(left 120)" python scripts/investigations/sync_span_check.py 2>&1 | grep -v "^timing " | tail -n 4
}

summary() {
  python scripts/measure/gpu_proofs_summary.py alone="$WORK/alone" shared="$WORK/shared" partial="$WORK/partial" \
    cheats="$(ls -d "$WORK"/gallery/*/out 2>/dev/null | head -1)" | tee "$WORK/summary.txt"
}

pack() {
  tar czf "$OUT/$1.tgz" -C "$WORK" --exclude='*/suite' --exclude='*/submissions' --exclude='partial-subs' . \
    2>/dev/null
  ls -la "$OUT"
}

case "${1:-}" in
  part1) header part1; alone; spread; summary; pack part1 ;;
  part2) header part2; span; shared; cheats; summary; pack part2 ;;
  seconds) header seconds; COPIES=${COPIES:-8} PER_GPU=${PER_GPU:-4} SAVE_SECONDS=1 shared; summary; pack seconds ;;
  alone|alone_split|spread|shared|cheats|span|profile|lag) header "$1"; "$1"; summary; pack "$1" ;;
  *) echo "usage: $0 part1|part2|seconds|alone|alone_split|spread|shared|cheats|span|profile|lag" >&2; exit 2 ;;
esac
