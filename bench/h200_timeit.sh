#!/usr/bin/env bash
# Issue 29 on the H200: does egg's number for its final kernel agree with a fresh process's? For each task,
# `egg optimize --quick --time-budget 30 --no-profile`, then `python -m egg_worker.timeit TASK model_new.py --json`
# (a fresh process, egg's timing protocol) on the kernel it wrote; bench/timeit_compare.py prints egg's medians
# (the search's row and the final one) beside the script's, with their ratio, the launches and the host time per call.
# Run through the device tool from the repository root, with the stripped binary in .deps/egg and KernelBench's
# levels copied into .kb/ (both carried):
#     bash bench/h200_timeit.sh [TASK...]     TASK: level1/19_ReLU (under .kb/) or a path without .py
# Default: the ten tasks below (levels 1-3, four level-3 models). New tasks stop starting after TIMEIT_SECONDS
# (default 500, under the tool's 600 s); the ones not run are printed: pass them to a second call.
# TIMEIT_PRECISION (default strict: egg's headline baseline at its default tol 1e-4) is timeit's --precision;
# OPTIMIZE_FLAGS (default "--quick --time-budget 30 --no-profile") egg optimize's search flags. Issue 29's Hugging Face
# ResNet-18 (bench/tasks/hf_resnet18.py; the image's transformers) takes a call of its own:
#     OPTIMIZE_FLAGS="--time-budget 60 --no-profile" bash bench/h200_timeit.sh bench/tasks/hf_resnet18
# $OUT gets compare.txt (the table), results.jsonl (a row a task), logs.tgz (each task's egg stdout/stderr, report.json,
# model_new.py, timeit JSON and stderr, and the worker logs).
set -uo pipefail
out="${OUT:-/tmp/egg-out}"
work=/tmp/egg-timeit
mkdir -p "$out" "$work" build
[ -x build/egg ] || cp .deps/egg build/egg
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-/tmp/egg-timeit-home}" PYTHONUNBUFFERED=1
kb="${KB:-.kb}"
default=(level3/4_LeNet5 level1/19_ReLU level3/3_DeepNarrowMLP level2/12_Gemm_Multiply_LeakyReLU
         level3/8_ResNetBasicBlock level1/23_Softmax level3/1_MLP level2/76_Gemm_Add_ReLU
         level1/1_Square_matrix_multiplication_ level2/71_Conv2d_Divide_LeakyReLU)
tasks=("$@")
[ ${#tasks[@]} -gt 0 ] || tasks=("${default[@]}")
deadline=$(( $(date +%s) + ${TIMEIT_SECONDS:-500} ))
skipped=()
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > "$work/gpu.txt" 2>&1
for name in "${tasks[@]}"; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    skipped+=("$name")
    continue
  fi
  task="$name.py"
  [ -f "$task" ] || task="$kb/$name.py"
  dir="$work/$(basename "$name")"
  mkdir -p "$dir"
  started=$(date +%s)
  # shellcheck disable=SC2086
  timeout 300 ./egg optimize "$task" --device cuda ${OPTIMIZE_FLAGS:---quick --time-budget 30 --no-profile} --out "$dir" \
    > "$dir/egg.stdout" 2> "$dir/egg.stderr"
  egg_rc=$?
  optimized=$(date +%s)
  timeit_rc=-1
  if [ -f "$dir/model_new.py" ]; then
    PYTHONPATH=python timeout 240 "$EGG_PYTHON" -m egg_worker.timeit "$task" "$dir/model_new.py" --json \
      --precision "${TIMEIT_PRECISION:-strict}" > "$dir/timeit.json" 2> "$dir/timeit.stderr"
    timeit_rc=$?
  fi
  echo "$(date +%T) $name egg rc=$egg_rc $(( optimized - started ))s, timeit rc=$timeit_rc $(( $(date +%s) - optimized ))s" \
    | tee -a "$work/progress.txt"
  python3 bench/timeit_compare.py row "$name" "$dir" "$egg_rc" "$timeit_rc" $(( optimized - started )) \
    $(( $(date +%s) - optimized )) >> "$out/results.jsonl"
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >> "$work/gpu.txt" 2>&1
python3 bench/timeit_compare.py table "$out/results.jsonl" | tee "$out/compare.txt"
[ ${#skipped[@]} -eq 0 ] || echo "not run (time): ${skipped[*]}" | tee -a "$out/compare.txt"
cp -r "$EGG_HOME/logs" "$work/worker-logs" 2>/dev/null
tar czf "$out/logs.tgz" -C /tmp egg-timeit 2>/dev/null
