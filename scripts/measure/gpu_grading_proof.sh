#!/usr/bin/env bash
# The grader's GPU proofs (throughput over two GPUs, the gallery's GPU faults), for a 2-GPU H200 node; logs go to $OUT (or ./out).
#   throughput: one copy of the reference alone on GPU 0, then two copies at once on GPUs 0 and 1;
#               the gain of the second GPU is (2 / wall of the pair) / (1 / wall of the one).
#   faults:     the GPU side of the adversarial gallery (hung kernel, out-of-bounds store, segfault,
#               forged memory counters, clean reference, one submission per GPU), the worker's
#               CUDA-fault recovery, and the memory check's driver figures for the reference.
#   sandboxed:  the quick GPU gallery entries graded inside bubblewrap (its root folder as $2).
#   block16:    make bench's student bench on a 16 x 16-tile matmul (right on CPU, slow on GPU) and the reference.
#   doctor:     `grader doctor`, then the examples graded sandboxed on GPU 0 (bubblewrap root as $2).
set -u
cd "$(dirname "$0")/../.."
export PYTHONPATH=. PYTHONUNBUFFERED=1
OUT=${OUT:-out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,memory.total --format=csv > "$OUT/gpus.csv" 2>&1
case "${1:-}" in
  throughput)
    bench() { python -m grader bench grading --suite public --no-perf --per-gpu 1 "$@"; }
    { time bench --copies 1 --gpus 0; } > "$OUT/one-gpu.log" 2>&1
    { time bench --copies 2 --gpus 0,1; } > "$OUT/two-gpus.log" 2>&1
    tail -n 8 "$OUT/one-gpu.log" "$OUT/two-gpus.log" ;;
  faults)
    python -m pytest tests/test_impl.py -k cuda -q -rs > "$OUT/impl-cuda.log" 2>&1
    python scripts/measure/attention_memory.py --impl solutions > "$OUT/attention-memory.log" 2>&1
    { time python -m pytest tests/test_adversarial.py -k gpu -q -rs --basetemp=/tmp/gallery-gpu; } \
      > "$OUT/gallery-gpu.log" 2>&1
    tar czf "$OUT/gallery-gpu-reports.tgz" -C /tmp/gallery-gpu --exclude='*/suite' . 2>/dev/null
    tail -n 15 "$OUT/impl-cuda.log" "$OUT/attention-memory.log" "$OUT/gallery-gpu.log" ;;
  sandboxed)
    # bubblewrap from a folder given as $2 (e.g. Debian's .deb unpacked with dpkg -x): grading in the
    # sandbox with the GPUs passed through, on the quick entries of the GPU gallery.
    export PATH="$2/usr/bin:$PATH" GALLERY_GPU_ATTACKS=clean,oob_kernel_write,memory_creep,segfault,forged_memory_peak
    bwrap --version > "$OUT/bwrap.log" 2>&1
    python -m pytest tests/test_adversarial.py -k gpu -q -rs --basetemp=/tmp/gallery-gpu \
      > "$OUT/gallery-gpu-sandboxed.log" 2>&1
    grep -ho '"sandbox": "[a-z]*"' /tmp/gallery-gpu/*/out/*/result.json | sort | uniq -c >> "$OUT/bwrap.log"
    tail -n 15 "$OUT/bwrap.log" "$OUT/gallery-gpu-sandboxed.log" ;;
  block16)
    # a matmul with 16 x 16 tiles passes every CPU test; make bench on the GPU must show it
    # below the ladder next to the reference (the student bench, as the handout runs it).
    python -c "import sys; sys.path.insert(0, 'tests'); from broken_variants import build_variant; \
print(build_variant('matmul_block16', '/tmp/variants'))" > "$OUT/block16.log" 2>&1
    python -m grader.bench --impl /tmp/variants/matmul_block16 --kernel matmul >> "$OUT/block16.log" 2>&1
    python -m grader.bench --impl solutions --kernel matmul > "$OUT/block16-reference.log" 2>&1
    tail -n 20 "$OUT/block16.log" "$OUT/block16-reference.log" ;;
  doctor)
    # `grader doctor` on the GPU node, then the examples graded in the allow-list sandbox on GPU 0
    # (the preflight must pass with the GPU pinned; bubblewrap from $2 as for `sandboxed`).
    export PATH="$2/usr/bin:$PATH"
    python -m grader doctor > "$OUT/doctor.log" 2>&1
    python examples/make_examples.py > /dev/null
    { time python -m grader grade examples/submissions --gpus 0 --out /tmp/examples-gpu; } \
      > "$OUT/examples-gpu.log" 2>&1
    cp /tmp/examples-gpu/grades.csv "$OUT/examples-gpu.csv"
    tail -n 25 "$OUT/doctor.log" "$OUT/examples-gpu.log" "$OUT/examples-gpu.csv" ;;
  *) echo "usage: $0 throughput|faults|sandboxed BWRAP_ROOT|doctor BWRAP_ROOT|block16" >&2; exit 2 ;;
esac
