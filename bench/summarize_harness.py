"""Prints a table of `egg eval` JSON lines, beside the H200 probe baselines where the task has one.

usage: python bench/summarize_harness.py eval_1e-2.jsonl [...]
"""
import json
import pathlib
import sys

PROBE = pathlib.Path(__file__).resolve().parents[1].parent / "shared/kernelbench/baseline_times/H200_probe/baseline_times.json"


def load_probe():
    for path in (PROBE, pathlib.Path("shared/kernelbench/baseline_times/H200_probe/baseline_times.json")):
        if path.exists():
            return json.loads(path.read_text())
    return {}


def fmt(value, spec=".3f"):
    return "-" if value is None else format(value, spec)


def main(paths):
    probe = load_probe()
    header = (f"{'task':<44} {'tol':>6} {'status':<13} {'cand ms':>9} {'eager ms':>9} {'probe':>9} {'compile':>9}"
              f" {'probe':>9} {'x eager':>8} {'x comp':>8} {'triton%':>7}")
    print(header)
    for path in paths:
        for line in pathlib.Path(path).read_text().splitlines():
            r = json.loads(line)
            name = pathlib.Path(r.get("task", "?")).name
            level = r.get("level", "")
            times = r.get("time_ms") or {}
            stat = lambda key: (times.get(key) or {}).get("mean")
            ref = probe.get(level, {}).get(name, {})
            share = r.get("triton_time_share")
            print(f"{(level[-1:] + '/' + name)[:44]:<44} {r.get('tol', 0):>6g} {r.get('status', '?'):<13}"
                  f" {fmt(stat('candidate')):>9} {fmt(stat('eager')):>9} {fmt(ref.get('eager_mean')):>9}"
                  f" {fmt(stat('compile')):>9} {fmt(ref.get('compile_mean')):>9}"
                  f" {fmt(r.get('speedup_vs_eager'), '.2f'):>8} {fmt(r.get('speedup_vs_compile'), '.2f'):>8}"
                  f" {fmt(None if share is None else 100 * share, '.0f'):>7}")


if __name__ == "__main__":
    main(sys.argv[1:])
