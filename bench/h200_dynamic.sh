#!/usr/bin/env bash
# Issue 25's dynamic-batch figure on the GPU: for each task, `egg optimize --dynamic batch` (one compiled file for
# every batch up to the task's own), then `python -m egg_worker.timeit TASK model_new.py --batch-sizes B1,B2,B3`,
# which checks each batch against Model and times eager, torch.compile(Model, dynamic=True) and ModelNew at each
# (egg's timing protocol, medians). Run through the device tool from the repository root, with the stripped binary
# in .deps/egg and KernelBench's levels in .kb/ (both carried):
#     bash bench/h200_dynamic.sh [TASK:B1,B2,B3 ...]     TASK: level2/76_Gemm_Add_ReLU (under .kb/)
# OPTIMIZE_FLAGS (default "--quick --time-budget 60 --no-profile --tol 1e-4") are egg optimize's search flags.
# $OUT gets tables.txt (timeit's table per task), results.jsonl (timeit's JSON per task) and logs.tgz.
set -uo pipefail
out="${OUT:-/tmp/egg-out}"
work=/tmp/egg-dynamic
mkdir -p "$out" "$work" build
[ -x build/egg ] || cp .deps/egg build/egg
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-/tmp/egg-dynamic-home}" PYTHONUNBUFFERED=1
kb="${KB:-.kb}"
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(level2/76_Gemm_Add_ReLU:1,37,1024 level2/1_Conv2D_ReLU_BiasAdd:1,13,128)
: > "$out/tables.txt"
: > "$out/results.jsonl"
for spec in "${specs[@]}"; do
  task="${spec%%:*}"
  sizes="${spec#*:}"
  name="$(basename "$task")"
  dir="$work/$name"
  mkdir -p "$dir"
  # shellcheck disable=SC2086  # OPTIMIZE_FLAGS is a flag list on purpose
  ./egg optimize "$kb/$task.py" --device cuda --dynamic batch --out "$dir" \
    ${OPTIMIZE_FLAGS:---quick --time-budget 60 --no-profile --tol 1e-4} > "$dir/optimize.log" 2>&1
  echo "== $task (egg optimize exit $?), batches $sizes" >> "$out/tables.txt"
  if [ -f "$dir/model_new.py" ]; then
    PYTHONPATH=python "$EGG_PYTHON" -m egg_worker.timeit "$kb/$task.py" "$dir/model_new.py" --precision strict \
      --batch-sizes "$sizes" --json > "$dir/timeit.json" 2> "$dir/timeit.err"
    PYTHONPATH=python "$EGG_PYTHON" - "$dir/timeit.json" >> "$out/results.jsonl" <<'PY'
import json, sys
print(json.dumps(json.load(open(sys.argv[1]))))
PY
    PYTHONPATH=python "$EGG_PYTHON" - "$dir/timeit.json" >> "$out/tables.txt" <<'PY'
import json, sys
from egg_worker import timeit
print("\n".join(timeit._batch_lines(json.load(open(sys.argv[1])).get("batches", []))))
PY
  else
    tail -3 "$dir/optimize.log" >> "$out/tables.txt"
  fi
done
tar czf "$out/logs.tgz" -C "$work" . 2>/dev/null
cat "$out/tables.txt"
