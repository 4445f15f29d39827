#!/usr/bin/env bash
# One device call. On an H200: the full run at tol 1e-4 goes on (issue 20, bench/results/h200-fair-l1-3).
# On any other card: issue 25's dynamic-batch tasks through egg bench (per-batch speedups against
# torch.compile(dynamic=True)), which needs no H200.
secs="${1:-520}"
out="${OUT:-/tmp/egg-out}"; mkdir -p "$out"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "gpu: $gpu; egg $(cat .gl/egg-commit-new)"
mkdir -p build && cp .deps/egg-new build/egg
if [[ "$gpu" == *H200* ]]; then
  name=full-1e-4
  mkdir -p .gl/bench/$name
  echo "call on $gpu at $(date -u +%FT%TZ), egg $(cat .gl/egg-commit-new)" >> .gl/bench/$name/bench.log
  BENCH_SECONDS="$secs" bash bench/h200_bench.sh $name --kernelbench .kb --level 1 2 3 --tol 1e-4 --quick \
    --time-budget 45 --timing-budget 0.5 --no-profile --per-gpu 4 > "$out/table.txt" 2>&1
  rm -f "$out/worker-logs.tgz" "$out/summary.txt"
else
  # issue 25 on a card other than the H200: a dynamic batch (2_1, 2_76), then batch and sequence both dynamic
  # (3_43, causal attention)
  name=dyn-h100
  mkdir -p .kb/dyn .kb/dyn2 .gl/bench/$name .gl/bench/dyn2-h100
  cp .kb/level2/1_Conv2D_ReLU_BiasAdd.py .kb/level2/76_Gemm_Add_ReLU.py .kb/dyn/
  cp .kb/level3/43_MinGPTCausalAttention.py .kb/dyn2/
  echo "call on $gpu at $(date -u +%FT%TZ), egg $(cat .gl/egg-commit-new)" >> .gl/bench/$name/bench.log
  OUT="$out/batch" BENCH_SECONDS="$(( secs * 5 / 10 ))" bash bench/h200_bench.sh $name .kb/dyn --tol 1e-4 \
    --dynamic batch --quick --time-budget 60 --timing-budget 0.5 --no-profile --per-gpu 2 > "$out/table.txt" 2>&1
  OUT="$out/dim1" BENCH_SECONDS="$(( secs * 5 / 10 ))" bash bench/h200_bench.sh dyn2-h100 .kb/dyn2 --tol 1e-4 \
    --dynamic batch,dim1 --quick --time-budget 60 --timing-budget 0.5 --no-profile --per-gpu 1 >> "$out/table.txt" 2>&1
  rm -f "$out"/*/worker-logs.tgz "$out"/*/store.tgz "$out"/*/summary.txt
fi
tail -3 "$out/table.txt"
