#!/usr/bin/env bash
# Issue 2's H200 run: `egg eval` on the hand-written candidates under examples/kernelbench (tol 1e-2, and
# tol 1e-4 with tf32x3 dot products), `egg profile` on two of them. Run through the device tool from the
# repository root with build/ carried:  bash bench/h200_harness.sh [1e-2|1e-4|profile]...
# Writes $OUT/eval_<tol>.jsonl, $OUT/profile.jsonl, $OUT/log.txt and $OUT/egg.db.
set -uo pipefail
out="${OUT:-/tmp/egg-out}"
mkdir -p "$out"
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-/tmp/egg-home}"
kb="${KB:-shared/kernelbench}"
[ -d "$kb" ] || kb=../shared/kernelbench
log="$out/log.txt"
order=(level3/1_MLP level2/12_Gemm_Multiply_LeakyReLU level1/1_Square_matrix_multiplication_ level1/23_Softmax
       level1/19_ReLU level1/94_MSELoss level1/89_cumsum level3/2_ShallowWideMLP level2/76_Gemm_Add_ReLU
       level1/42_Max_Pooling_2D level1/4_Matrix_vector_multiplication_ level1/47_Sum_reduction_over_a_dimension
       level1/26_GELU_)
run_evals() {
  local tol="$1" precision="$2"
  for name in "${order[@]}"; do
    candidate="examples/kernelbench/$name.py"
    level=$(basename "$(dirname "$candidate")")
    task="$kb/$level/$(basename "$candidate")"
    start=$(date +%s)
    EGG_DOT_PRECISION="$precision" ./egg eval "$task" "$candidate" --json --device cuda --tol "$tol" ${EVAL_FLAGS:-} \
      > /tmp/one.json 2>> "$log"
    rc=$?
    python3 -c "import json,sys; r=json.load(open('/tmp/one.json')); r['level']='$level'; r['exit_code']=$rc; r['dot_precision']='$precision'; print(json.dumps(r))" \
      >> "$out/eval_$tol.jsonl" 2>> "$log" || echo "{\"task\": \"$task\", \"status\": \"no_json\", \"exit_code\": $rc}" >> "$out/eval_$tol.jsonl"
    echo "$(date +%T) tol=$tol $candidate rc=$rc $(( $(date +%s) - start ))s" | tee -a "$log"
  done
}
for step in "${@:-1e-2}"; do
  case "$step" in
    1e-2) run_evals 1e-2 tf32 ;;
    1e-4) run_evals 1e-4 tf32x3 ;;
    profile)
      for name in level1/23_Softmax.py level1/1_Square_matrix_multiplication_.py; do
        ./egg profile "$kb/$name" "examples/kernelbench/$name" --json --device cuda >> "$out/profile.jsonl" 2>> "$log"
        echo "$(date +%T) profile $name rc=$?" | tee -a "$log"
      done ;;
  esac
done
cp "$EGG_HOME/egg.db" "$out/egg.db" 2>/dev/null
python3 bench/summarize_harness.py "$out"/eval_*.jsonl 2>&1 | tee -a "$log"
