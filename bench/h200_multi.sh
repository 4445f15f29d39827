#!/usr/bin/env bash
# Several `egg bench` runs in one device call, one after the other, each with its own slice of the call's time:
#     bash bench/h200_multi.sh NAME:SECONDS:"FLAGS" [NAME:SECONDS:"FLAGS"...]
# Each run is bench/h200_bench.sh NAME FLAGS under BENCH_SECONDS=SECONDS (so each goes on with --resume from
# .gl/bench/NAME); all share EGG_HOME (.gl/home). The device tool brings back only a few files, so each run's
# outputs are packed into $OUT/NAME.tgz (results.json, bench.log, summary.txt, tasks.tgz, worker-logs.tgz), the
# shared store into $OUT/store.tgz and every run's short table into $OUT/tables.txt, which is printed last.
set -uo pipefail
out="${OUT:-/tmp/egg-out}"
mkdir -p "$out" build
[ -x build/egg ] || cp .deps/egg build/egg
: > "$out/tables.txt"
for spec in "$@"; do
  name="${spec%%:*}"
  rest="${spec#*:}"
  seconds="${rest%%:*}"
  flags="${rest#*:}"
  part="/tmp/egg-multi/$name"
  rm -rf "$part" && mkdir -p "$part"
  # shellcheck disable=SC2086  # FLAGS is a flag list on purpose
  OUT="$part" BENCH_SECONDS="$seconds" bash bench/h200_bench.sh "$name" $flags > "$part/table.txt" 2>&1
  rm -f "$part/store.tgz"
  { echo "== $name ($seconds s): $flags"; cat "$part/table.txt"; } >> "$out/tables.txt"
  tar czf "$out/$name.tgz" -C "$part" .
done
tar czf "$out/store.tgz" -C "${EGG_HOME:-$PWD/.gl/home}" egg.db 2>/dev/null
cat "$out/tables.txt"
