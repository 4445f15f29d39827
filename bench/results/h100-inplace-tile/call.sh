#!/usr/bin/env bash
# One device call (H100 or H200): (1) issue 25's per-batch speedups end to end: egg optimize --dynamic batch of
# 2_76 with .deps/egg-new; (2) the A/B of the tf32 in-place tile: three tasks at tol 1e-2 through egg bench with
# e67e4e8 (.deps/egg) and the new binary (.deps/egg-new), one store (baselines shared).
secs="${1:-420}"
start=$(date +%s)
out="${OUT:-/tmp/egg-out}"; mkdir -p "$out"
gpu="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
echo "gpu: $gpu; egg $(cat .gl/egg-commit) and $(cat .gl/egg-commit-new)"
missing="$(ldd .deps/egg | grep 'not found')"
if [ -n "$missing" ]; then echo "missing libs: $missing"; fi
mkdir -p build "$out/dyn76"
cp .deps/egg-new build/egg
export EGG_PYTHON=python3 PYTHONUNBUFFERED=1
EGG_HOME=/tmp/egg-dyn-home timeout 170 ./egg optimize .kb/level2/76_Gemm_Add_ReLU.py --device cuda --dynamic batch \
  --out /tmp/dyn76 --quick --time-budget 60 --no-profile --tol 1e-4 > "$out/dyn76/optimize.log" 2>&1
echo "optimize exit $? after $(( $(date +%s) - start )) s"
cp /tmp/dyn76/report.json /tmp/dyn76/trajectory.md /tmp/dyn76/model_new.py "$out/dyn76/" 2>/dev/null
grep -A8 "speedups at each batch" /tmp/dyn76/trajectory.md; grep "^- vs PyTorch" /tmp/dyn76/trajectory.md
mkdir -p .kb/ab3
cp .kb/level1/17_*.py .kb/level2/12_*.py .kb/level2/76_*.py .kb/ab3/
for v in old new; do
  if [ $v = old ]; then cp .deps/egg build/egg; else cp .deps/egg-new build/egg; fi
  left=$(( secs - ($(date +%s) - start) ))
  [ $v = old ] && left=$(( left / 2 ))
  mkdir -p .gl/bench/ab-$v
  echo "call on $gpu at $(date -u +%FT%TZ)" >> .gl/bench/ab-$v/bench.log
  OUT="$out/$v" BENCH_SECONDS="$left" bash bench/h200_bench.sh ab-$v .kb/ab3 --tol 1e-2 --time-budget 40 \
    --timing-budget 0.5 --no-profile --per-gpu 3 > "$out/table-$v.txt" 2>&1
  echo "== $v"; head -3 "$out/table-$v.txt"
done
