#!/usr/bin/env bash
# One device call (H100 or H200): the TMA probe's second form, then four epilogue-heavy or few-tile products at
# tol 1e-2 through egg bench with the binary in .deps/egg-new (the in-place wide tile's seeds, checked where a
# fused row reduction or 128 tiles could make it lose).
secs="${1:-420}"
start=$(date +%s)
out="${OUT:-/tmp/egg-out}"; mkdir -p "$out"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "gpu: $gpu; egg $(cat .gl/egg-commit-new)"
mkdir -p build && cp .deps/egg-new build/egg
timeout 170 python3 bench/micro/tma_matmul.py > "$out/tma.txt" 2>&1; echo "tma probe exit $?"
mkdir -p .kb/ab4 .gl/bench/ab4
cp .kb/level2/45_*.py .kb/level2/84_*.py .kb/level2/99_*.py .kb/level3/2_*.py .kb/ab4/
left=$(( secs - ($(date +%s) - start) ))
echo "call on $gpu at $(date -u +%FT%TZ)" >> .gl/bench/ab4/bench.log
OUT="$out/ab4" BENCH_SECONDS="$left" bash bench/h200_bench.sh ab4 .kb/ab4 --tol 1e-2 --time-budget 40 \
  --timing-budget 0.5 --no-profile --per-gpu 4 > "$out/table.txt" 2>&1
rm -f "$out/ab4/tasks.tgz" "$out/ab4/worker-logs.tgz"
head -4 "$out/table.txt"
cat "$out/tma.txt"
