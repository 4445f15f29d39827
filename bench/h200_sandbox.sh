#!/usr/bin/env bash
# Issue 27 on the H200: one `egg eval` and one `egg profile` inside the bubblewrap sandbox, the evaluation's wall
# time with and without it (a table), and a planted candidate that tries to leave the sandbox on the GPU.
#
# The H200 machine has no bubblewrap and cannot download, so carry the binary. On the development machine:
#     cd /tmp && apt-get download bubblewrap && dpkg-deb -x bubblewrap_*_amd64.deb bw
#     cp /tmp/bw/usr/bin/bwrap <repo>/bench/bwrap        # an untracked file: it travels with the working tree
# The Debian 12 binary needs glibc >= 2.34 (Ubuntu 22.04 and later) and libselinux.so.1 (with libpcre2-8.so.0)
# and libcap.so.2: all three are in Ubuntu's base images (libselinux1 and libpcre2-8-0 are priority required,
# libcap2 comes with the base system); the script checks with ldd and names anything missing, which can be carried
# the same way (/lib/x86_64-linux-gnu/libcap.so.2 ...) into bench/bwrap-libs/.
# Run through the device tool from the repository root with build/ carried:
#     bash bench/h200_sandbox.sh            (REPEATS=3 timed evaluations per mode; KB=path to KernelBench)
# Writes $OUT/sandbox_eval.jsonl, $OUT/sandbox_profile.json, $OUT/sandbox_planted.json and $OUT/log.txt.
set -uo pipefail
out="${OUT:-/tmp/egg-out}"
mkdir -p "$out"
log="$out/log.txt"
export EGG_PYTHON="${EGG_PYTHON:-python3}" EGG_HOME="${EGG_HOME:-/tmp/egg-home-sandbox}"
kb="${KB:-shared/kernelbench}"
[ -d "$kb" ] || kb=../shared/kernelbench
repeats="${REPEATS:-3}"
task="$kb/level1/23_Softmax.py"
candidate="examples/kernelbench/level1/23_Softmax.py"

bwrap="${EGG_BWRAP:-}"
[ -z "$bwrap" ] && [ -f bench/bwrap ] && bwrap="$PWD/bench/bwrap"
[ -z "$bwrap" ] && bwrap="$(command -v bwrap || true)"
if [ -z "$bwrap" ]; then
  echo "no bwrap: carry one as bench/bwrap (see the header)" | tee -a "$log"
  exit 2
fi
chmod +x "$bwrap" 2>/dev/null
[ -d bench/bwrap-libs ] && export LD_LIBRARY_PATH="$PWD/bench/bwrap-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export EGG_BWRAP="$bwrap"
{
  echo "== bwrap: $bwrap ($("$bwrap" --version 2>&1))"
  ldd "$bwrap" 2>&1
  if ldd "$bwrap" 2>&1 | grep -q "not found"; then
    echo "MISSING libraries above: carry them into bench/bwrap-libs/"
  fi
  echo "== host: $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME"), uid $(id -u), kernel $(uname -r)"
  echo "unprivileged user namespaces: $(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo n/a)," \
       "apparmor restriction: $(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null || echo n/a)"
  ls -l /dev/nvidia* 2>&1 | head -20
  ldconfig -p | grep "libcuda.so" 2>&1
} 2>&1 | tee -a "$log"

# One timed `egg eval` (fresh evaluation, timing on) in the given mode; appends its JSON line with the wall time.
timed_eval() {
  local mode="$1" round="$2" start end rc
  start=$(date +%s.%N)
  ./egg eval "$task" "$candidate" --json --device cuda --no-cache --baselines default "$mode" > /tmp/sandbox_one.json 2>> "$log"
  rc=$?
  end=$(date +%s.%N)
  python3 - "$mode" "$round" "$rc" "$start" "$end" >> "$out/sandbox_eval.jsonl" 2>> "$log" <<'PY'
import json, sys
mode, round_, rc, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
try:
    result = json.load(open("/tmp/sandbox_one.json"))
except (OSError, ValueError):
    result = {"status": "no_json"}
time = (result.get("time_ms") or {}).get("candidate") or {}
print(json.dumps({"mode": mode, "round": round_, "exit_code": rc, "wall_s": round(end - start, 3),
                  "status": result.get("status"), "reason": result.get("reason", "")[:300],
                  "candidate_median_ms": time.get("median"), "speedup_vs_eager": result.get("speedup_vs_eager")}))
PY
  echo "$(date +%T) eval $mode round $round rc=$rc $(python3 -c "print(round($end - $start, 2))") s" | tee -a "$log"
}

# Round 0 of each mode warms its caches (the sandbox's are under $EGG_HOME/sandbox/cache); rounds 1.. are timed,
# alternating the modes so that drift hits both alike.
: > "$out/sandbox_eval.jsonl"
for round in $(seq 0 "$repeats"); do
  timed_eval --sandbox "$round"
  timed_eval --no-sandbox "$round"
done

echo "== egg profile in the sandbox" | tee -a "$log"
./egg profile "$task" "$candidate" --json --device cuda --sandbox > "$out/sandbox_profile.json" 2>> "$log"
echo "profile rc=$?" | tee -a "$log"

echo "== a planted candidate on the GPU (writes to /root and /tmp, connects out, detaches a process)" | tee -a "$log"
planted=/tmp/egg_planted_softmax.py
marker="31337.$$"
{
  cat <<PY
import os, socket
for attempt in (lambda: open("/root/egg-sandbox-was-here.txt", "w").write("x"),
                lambda: open("/tmp/egg-sandbox-was-here.txt", "w").write("x"),
                lambda: socket.create_connection(("1.1.1.1", 443), 3)):
    try:
        attempt()
    except BaseException as error:
        print("refused:", error)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", "$marker"])
    os._exit(0)
PY
  cat "$candidate"
} > "$planted"
./egg eval "$task" "$planted" --json --device cuda --no-timing --sandbox > "$out/sandbox_planted.json" 2>> "$log"
echo "planted rc=$? (1 expected)" | tee -a "$log"
ls /root/egg-sandbox-was-here.txt /tmp/egg-sandbox-was-here.txt 2>&1 | tee -a "$log"
echo "processes left: $(pgrep -fc "sleep $marker")" | tee -a "$log"

python3 - "$out" <<'PY' 2>&1 | tee -a "$log"
import json, statistics, sys
out = sys.argv[1]
rows = [json.loads(line) for line in open(f"{out}/sandbox_eval.jsonl")]
print(f"\n{'mode':<13} {'runs':>4} {'median s':>9} {'min s':>7} {'max s':>7}  statuses (round 0, the warm-up, left out)")
medians = {}
for mode in ("--sandbox", "--no-sandbox"):
    timed = [row for row in rows if row["mode"] == mode and row["round"] > 0]
    walls = [row["wall_s"] for row in timed]
    if not walls:
        print(f"{mode:<13} {0:>4}")
        continue
    medians[mode] = statistics.median(walls)
    statuses = ",".join(sorted({str(row["status"]) for row in timed}))
    print(f"{mode:<13} {len(walls):>4} {medians[mode]:>9.2f} {min(walls):>7.2f} {max(walls):>7.2f}  {statuses}")
if len(medians) == 2:
    print(f"sandbox overhead: {medians['--sandbox'] - medians['--no-sandbox']:+.2f} s per egg eval "
          f"({medians['--sandbox'] / medians['--no-sandbox']:.2f}x)")
profile = json.load(open(f"{out}/sandbox_profile.json"))
ncu = profile.get("ncu", {})
print(f"profile: status {profile.get('status')}, ncu available {ncu.get('available')} {ncu.get('reason', '')}, "
      f"{len(profile.get('kernels', []))} kernels")
planted = json.load(open(f"{out}/sandbox_planted.json"))
print(f"planted: status {planted.get('status')}: {planted.get('reason', '')[:200]}")
PY
