"""egg's numbers beside `python -m egg_worker.timeit`'s, for bench/h200_timeit.sh (standard library only).

`row NAME DIR EGG_RC TIMEIT_RC EGG_S TIMEIT_S` prints one JSON line for a task from DIR/report.json and
DIR/timeit.json; `table RESULTS.jsonl` prints the comparison: the final kernel's median as egg's search measured
it (its row from the search), as egg's final evaluation measured it (fresh worker, full protocol: what
report.json and the speedups use) and as timeit measured it in a fresh process; their ratio; the baselines' medians
in both; Triton launches and the host's time to issue one call (launch-bound when near the GPU time).
"""

import json
import sys

AGREE = 0.05  # issue 29: within 5% (or the measured noise)


def _load(path: str):
    try:
        with open(path) as source:
            return json.load(source)
    except (OSError, ValueError):
        return None


def _median(stats):
    return stats.get("median") if isinstance(stats, dict) else None


def _spread(stats):
    if not isinstance(stats, dict):
        return None
    return stats.get("p80", 0) - stats.get("p20", 0)


def _search_median(report: dict):
    """The final candidate's median from its evaluation during the search."""
    final_id = report.get("final_candidate_id")
    for stage in report.get("stages", []):
        for candidate in stage.get("candidates", []):
            if candidate.get("id") == final_id and candidate.get("median_ms") is not None:
                return candidate["median_ms"]
    return None


def row(name, directory, egg_rc, timeit_rc, egg_s, timeit_s) -> dict:
    report = _load(f"{directory}/report.json") or {}
    final = report.get("final") or {}
    times = final.get("time_ms") or {}
    timed = _load(f"{directory}/timeit.json") or {}
    script = timed.get("time_ms") or {}
    return {
        "task": name, "egg_rc": int(egg_rc), "timeit_rc": int(timeit_rc), "egg_s": int(egg_s),
        "timeit_s": int(timeit_s), "status": report.get("status"), "stopped_because": report.get("stopped_because"),
        "cached": final.get("cached"), "timer": (times.get("candidate") or {}).get("timer", "cuda-events"),
        "egg_search_ms": _search_median(report), "egg_ms": _median(times.get("candidate")),
        "egg_spread_ms": _spread(times.get("candidate")), "timeit_ms": _median(script.get("candidate")),
        "timeit_spread_ms": _spread(script.get("candidate")), "egg_eager_ms": _median(times.get("eager")),
        "timeit_eager_ms": _median(script.get("eager")), "egg_compile_ms": _median(times.get("compile")),
        "timeit_compile_ms": _median(script.get("compile")), "launches": final.get("triton_launches"),
        "host_ms": _median(timed.get("host_call_ms")), "timeit_correct": timed.get("correct"),
        "timeit_precision": (timed.get("timing_protocol") or {}).get("precision"),
        "cuda_graph": "_egg_graphed(" in _text(f"{directory}/model_new.py"),
    }


def _text(path: str) -> str:
    try:
        with open(path) as source:
            return source.read()
    except OSError:
        return ""


def _ms(value) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "-"


def _ratio(a, b) -> str:
    return f"{a / b:.3f}" if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0 else "-"


def _verdict(entry: dict) -> str:
    egg, script = entry.get("egg_ms"), entry.get("timeit_ms")
    if not isinstance(egg, (int, float)) or not isinstance(script, (int, float)):
        return "-"
    noise = max(entry.get("egg_spread_ms") or 0, entry.get("timeit_spread_ms") or 0)
    return "agree" if abs(egg - script) <= max(AGREE * script, noise) else "DIFFER"


def table(path: str) -> None:
    with open(path) as source:
        entries = [json.loads(line) for line in source if line.strip()]
    header = (f"{'task':34} {'search':>9} {'egg':>9} {'timeit':>9} {'egg/ti':>7} {'verdict':>7} "
              f"{'eager e':>9} {'eager ti':>9} {'comp e':>9} {'comp ti':>9} {'launch':>6} {'host':>8} {'graph':>5} "
              f"{'egg s':>5} {'ti s':>4}")
    print(header)
    for e in entries:
        print(f"{e['task'][:34]:34} {_ms(e['egg_search_ms']):>9} {_ms(e['egg_ms']):>9} {_ms(e['timeit_ms']):>9} "
              f"{_ratio(e['egg_ms'], e['timeit_ms']):>7} {_verdict(e):>7} {_ms(e['egg_eager_ms']):>9} "
              f"{_ms(e['timeit_eager_ms']):>9} {_ms(e['egg_compile_ms']):>9} {_ms(e['timeit_compile_ms']):>9} "
              f"{str(e['launches']):>6} {_ms(e['host_ms']):>8} {'yes' if e['cuda_graph'] else 'no':>5} "
              f"{e['egg_s']:>5} {e['timeit_s']:>4}")
    agree = sum(_verdict(e) == "agree" for e in entries)
    print(f"{agree} of {len(entries)} agree within 5% or the noise (medians in ms; search: egg's row from the "
          f"search, egg: its final evaluation in a fresh worker, timeit: a fresh process; host: the host's time to "
          f"issue one call)")


def main(argv) -> int:
    if len(argv) == 8 and argv[1] == "row":
        print(json.dumps(row(*argv[2:])))
        return 0
    if len(argv) == 3 and argv[1] == "table":
        table(argv[2])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
