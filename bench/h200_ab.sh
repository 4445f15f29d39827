#!/usr/bin/env bash
# One GPU call over an A/B set made by bench/ab_variants.py (DIR carried): each candidate of DIR/manifest.json
# checked and timed in a fresh process by egg_worker.timeit at its tolerance, eager PyTorch beside every one and
# torch.compile beside those marked `baselines` (PyTorch's defaults). From the repository root:
#     bash bench/h200_ab.sh DIR            (LIMIT=seconds to stop starting new candidates, default 500)
# Writes $OUT/ab.jsonl (a line per candidate), $OUT/ab-table.txt (the table so far, after every candidate) and
# $OUT/ab.txt (the devices, then the table). LIMIT bounds every candidate's run too, so the call ends within it.
set -uo pipefail
dir="$1"
out="${OUT:-/tmp/egg-out}"
mkdir -p "$out"
export PYTHONPATH="$PWD/python"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$out/ab.txt" 2>&1
start=$SECONDS
python3 -c "import json, sys; [print(e['tag'], e['variant'], e['tol'], int(e['baselines'])) for e in json.load(open(sys.argv[1]))]" \
  "$dir/manifest.json" | while read -r tag variant tol baselines; do
  left=$(( ${LIMIT:-500} - (SECONDS - start) ))
  if (( left < 30 )); then
    echo "{\"tag\": \"$tag\", \"variant\": \"$variant\", \"error\": \"not run: out of time\"}" >> "$out/ab.jsonl"
    continue
  fi
  compile="--no-compile"
  [ "$baselines" = 1 ] && compile=""
  # no candidate runs past LIMIT (the device tool stops the call at its own limit, table or not)
  timeout $(( left < 240 ? left : 240 )) python3 -m egg_worker.timeit "$dir/${tag}_task.py" "$dir/${tag}_${variant}.py" --tol "$tol" --json \
    --timing-budget 0.5 --trials 2 $compile > /tmp/egg-ab.json 2> /tmp/egg-ab.err
  python3 - "$tag" "$variant" >> "$out/ab.jsonl" <<'PY'
import json, sys
try:
    row = json.load(open("/tmp/egg-ab.json"))
except (OSError, ValueError):
    row = {"error": open("/tmp/egg-ab.err").read()[-1500:]}
row.update(tag=sys.argv[1], variant=sys.argv[2])
print(json.dumps(row))
PY
  python3 bench/ab_variants.py table "$out/ab.jsonl" > "$out/ab-table.txt"  # kept current if the call is cut
done
python3 bench/ab_variants.py table "$out/ab.jsonl" | tee "$out/ab-table.txt" | tee -a "$out/ab.txt"
