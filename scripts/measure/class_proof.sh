#!/usr/bin/env bash
# A class graded on one GPU as a TA grades it: `grader grade SUBMISSIONS --out OUT --gpus 0`, default
# options (suite all, split, per-GPU from the machine, sandboxed when bubblewrap is on PATH). Each
# step ends with a summary (scripts/measure/class_summary.py) and leaves $OUT/<step>.tgz.
#   honest  REFS references and SLOW copies of examples' slow matmul (a correct, mid-quality kernel),
#           and the gallery entries named in ATTACKS:
#           the rate per GPU, the reference's marks in every copy, the mid-quality spread, the
#           time breakdown and the leaderboard's order
#   mixed   REFS references, the gallery entries named in ATTACKS (default: the timing cheats and a
#           torch-op "kernel"), the broken variants named in VARIANTS (default: the real TF32 mistakes)
#           and a matmul compiling a kernel per shape: each honest submission's time against the honest
#           batch's, and what each of the others earned
#   entries the gallery entries named in ATTACKS and the broken variants named in VARIANTS alone, without
#           references: what each earned and which checks it lost, in a call too short for `mixed`
# PER_GPU=N grades N at once on the GPU instead of the machine's default; each summary ends with the GPU
# memory the batch used at its peak, and what checking runs and workers each held.
# Run as: OUT=... BUDGET=540 bash scripts/measure/class_proof.sh honest   (then mixed), one device call each.
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-out}
WORK=${WORK:-/tmp/class-proof}
BUDGET=${BUDGET:-540}
mkdir -p "$OUT" "$WORK"

references() {   # $1 folder, $2 copies
  for i in $(seq 1 "$2"); do
    mkdir -p "$1/reference$i"
    cp solutions/{accounting,flash_attention,matmul,mixed_precision,softmax}.py "$1/reference$i/"
  done
}

grade() {   # $1 step: grade $WORK/$1-subs within the budget, then summarise (DRY=1: only list them)
  if [ -n "${DRY:-}" ]; then ls "$WORK/$1-subs"; return; fi
  # the GPU's memory in use, every half second: what the batch needed at its peak
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$WORK/$1-gpu-memory.log" 2>&1 &
  local sampler=$!
  # and which processes hold it: checking runs or workers
  python scripts/measure/gpu_process_memory.py sample "$WORK/$1-gpu-processes.log" > /dev/null 2>&1 &
  local process_sampler=$!
  { time timeout "$BUDGET" python -m grader grade "$WORK/$1-subs" --out "$WORK/$1" --gpus 0 \
      ${PER_GPU:+--per-gpu "$PER_GPU"}; } 2>&1 | tee "$WORK/$1.log"
  kill "$sampler" "$process_sampler" 2>/dev/null
  { python scripts/measure/class_summary.py "$WORK/$1" "$WORK/$1.log"
    sort -n "$WORK/$1-gpu-memory.log" | tail -n 1 | awk '{printf "GPU memory in use at most: %.1f GiB\n", $1 / 1024}'
    python scripts/measure/gpu_process_memory.py summary "$WORK/$1-gpu-processes.log"
  } | tee "$WORK/$1-summary.txt"
  python -m grader leaderboard "$WORK/$1" > "$WORK/$1-leaderboard.txt" 2>&1 && head -n 40 "$WORK/$1-leaderboard.txt"
  tar czf "$OUT/$1.tgz" -C "$WORK" "$1" "$1.log" "$1-summary.txt" "$1-leaderboard.txt" "$1-gpu-memory.log" "$1-gpu-processes.log"
}

honest() {
  rm -rf "$WORK/honest-subs" "$WORK/honest"
  references "$WORK/honest-subs" "${REFS:-5}"
  python examples/make_examples.py --out "$WORK/examples" --slow > /dev/null
  for i in $(seq 1 "${SLOW:-3}"); do cp -r "$WORK/examples/slow" "$WORK/honest-subs/slow$i"; done
  entries_into "$WORK/honest-subs" "${ATTACKS:-}" ""
  grade honest
}

MIXED_ATTACKS="timing_hbm_thread timing_memo timing_side_stream torch_addbmm_dummy_launch"

entries_into() {   # $1 folder, $2 gallery entries, $3 broken variants (tests/broken_variants.py)
  python - "$@" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "tests")
from broken_variants import build_variant
from test_adversarial import GALLERY, build_submission
out = Path(sys.argv[1])
for name in sys.argv[2].split():
    build_submission(GALLERY / name, out / name, {})
for name in sys.argv[3].split():
    build_variant(name, out)
PY
}

entries() {
  rm -rf "$WORK/entries-subs" "$WORK/entries"
  entries_into "$WORK/entries-subs" "${ATTACKS-$MIXED_ATTACKS}" "${VARIANTS-fa_tf32_products matmul_tf32_products}"
  grade entries
}

mixed() {
  rm -rf "$WORK/mixed-subs" "$WORK/mixed"
  references "$WORK/mixed-subs" "${REFS:-3}"
  entries_into "$WORK/mixed-subs" "${ATTACKS:-$MIXED_ATTACKS}" "${VARIANTS-fa_tf32_products matmul_tf32_products}"
  python - "$WORK/mixed-subs" <<'PY'
import shutil, sys
from pathlib import Path
out = Path(sys.argv[1])
heavy = out / "compiles_per_shape"              # the reference, its matmul specialised on every shape
shutil.copytree(out / "reference1", heavy)
source = (heavy / "matmul.py").read_text()
signature = "def matmul_kernel(\n    a_ptr, b_ptr, c_ptr,\n    M, N, K,"
assert signature in source
(heavy / "matmul.py").write_text(source.replace(
    signature, "def matmul_kernel(\n    a_ptr, b_ptr, c_ptr,\n    M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,", 1))
PY
  grade mixed
}

"$@"
