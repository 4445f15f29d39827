"""`python -m egg_worker.timeit TASK.py CANDIDATE.py`: check any egg number by hand, in a fresh process.

Builds the task's Model and the candidate's ModelNew as egg's harness does (loader.build_model: the init seed, the
torch.device context, eval mode; everything under torch.no_grad), checks that ModelNew agrees with Model on `--trials`
fresh inputs (evaluate.compare_outputs at `--tol`, PyTorch's TF32 off as in the worker), counts its Triton launches,
and times Model eager, torch.compile(Model) (its first call, which compiles, timed apart and left out) and ModelNew
with timing.time_cuda on trial 0's inputs: the protocol of `egg eval` (timing.protocol), printed with the table.
The baselines run under `--precision` (egg_worker.precision; default: PyTorch's defaults), ModelNew under
`--candidate-precision` (default strict, as in egg's worker). Library kernels on side streams switch ModelNew to
the synchronized timer, as in the harness. Without a GPU (or with TRITON_INTERPRET=1) the kernels run in Triton's
interpreter and nothing is timed: correctness only. `--batch-sizes 1,17,64` (a dynamic-batch candidate, egg's
`--dynamic batch`; with `--dim N` sizes of dim N, egg's `--dynamic dimN`) also checks and times each of those
batches (inputs from loader.make_batch_inputs) against
eager and torch.compile(Model, dynamic=True), the form torch.compile users serve many batch sizes with (one
compiled module; each batch's first call, which may compile, timed apart). Exit 0 when ModelNew agrees with Model, 1 when it does not or
fails, 2 for bad arguments or a broken task.
"""

import argparse
import json
import os
import sys
import types

import torch

DEFAULT_TOL = 1e-4  # egg's defaults (harness::EvalOptions), not the worker's request defaults
HALF_TOL = 1e-2  # KernelBench's tolerance for bf16 and fp16
DEFAULT_TRIALS = 5
DEFAULT_SEED = 1
DEFAULT_INIT_SEED = 42
TIMEIT_PROCESS = "a fresh process (python -m egg_worker.timeit): eager, then torch.compile, then the candidate"
LAUNCH_BOUND_SHARE = 0.9  # host time per call at least this share of the GPU time: the GPU waits on Python


class Failed(Exception):
    """ModelNew failed to import, build or run; str() is the one-line reason."""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m egg_worker.timeit", description=__doc__.split("\n\n")[0])
    parser.add_argument("task", help="KernelBench-format task (Model, get_inputs, get_init_inputs)")
    parser.add_argument("candidate", help="file defining ModelNew")
    parser.add_argument("--precision", default="default", help="baselines' float32 setting: default, strict, tf32")
    parser.add_argument("--candidate-precision", default="strict", help="ModelNew's float32 setting (egg: strict)")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"),
                        help="the task's inputs and both models cast to this dtype (egg's --precision)")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help="correctness trials, fresh inputs each")
    parser.add_argument("--tol", type=float, default=None,
                        help=f"tolerance (default {DEFAULT_TOL:g}, {HALF_TOL:g} with a half --dtype)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed of trial 0's inputs (timed)")
    parser.add_argument("--init-seed", type=int, default=DEFAULT_INIT_SEED, help="seed both models are built from")
    parser.add_argument("--warmup", type=int, default=10, help="warm-up calls after the first")
    parser.add_argument("--timing-trials", type=int, default=100, help="timed calls (at least 10 past the budget)")
    parser.add_argument("--timing-budget", type=float, default=10.0, help="seconds of timed calls per model")
    parser.add_argument("--no-compile", action="store_true", help="skip torch.compile(Model)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--dim", type=int, default=0,
                        help="the dynamic dimension --batch-sizes are sizes of (egg's --dynamic dimN; default 0, the "
                             "batch)")
    parser.add_argument("--batch-sizes", default="",
                        help="also check and time these batches (comma-separated; a dynamic-batch candidate) against "
                             "eager and torch.compile(dynamic=True)")
    args = parser.parse_args(argv)
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",") if b.strip()]
    except ValueError:
        parser.error("--batch-sizes takes batch sizes separated by commas, such as 1,17,64")
    if any(b < 1 for b in args.batch_sizes):
        parser.error("--batch-sizes must be at least 1")
    if args.dim < 0:
        parser.error("--dim must be 0 or more")
    if args.tol is None:
        args.tol = DEFAULT_TOL if args.dtype == "fp32" else HALF_TOL
    if args.trials < 1 or not args.tol > 0 or args.warmup < 0 or args.timing_trials < 1 or args.timing_budget < 0:
        parser.error("needs --trials >= 1, --tol > 0, --warmup >= 0, --timing-trials >= 1, --timing-budget >= 0")
    return args


def _use_interpreter_without_gpu() -> None:
    """Triton's interpreter when no GPU is visible (set before any candidate imports triton)."""
    if os.environ.get("TRITON_INTERPRET") != "1" and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


def _call(what: str, fn, *args):
    from egg_worker import evaluate, loader

    try:
        result = fn(*args)
        if torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1":
            torch.cuda.synchronize()
        return result
    except Exception as error:
        raise Failed(f"{what}: {evaluate.classify(error).status}: {loader.one_line(error)}") from None


def check(task, reference, model, args, device) -> dict:
    """Correctness on `args.trials` fresh inputs, as the harness compares (noise-floor check included)."""
    from egg_worker import evaluate, launches, loader

    report = {"trials": args.trials, "trials_passed": 0, "reason": "", "errors": evaluate.Errors()}
    context = types.SimpleNamespace(reference=reference, request=types.SimpleNamespace(tol=args.tol))
    for trial in range(args.trials):
        inputs = loader.make_inputs(task, args.seed + trial, device)
        expected = evaluate.flatten(reference(*inputs))
        with launches.count_launches() as launched:
            outputs = evaluate.flatten(_call(f"trial {trial}", model, *inputs))
        report["triton_launches"] = len(launched)
        comparison = evaluate.compare_outputs(outputs, expected, args.tol)
        if evaluate._only_relative_l2_failed(comparison):
            comparison = evaluate.compare_at_noise_floor(context, outputs, expected, inputs, comparison)
        report["errors"].merge(comparison.errors)
        if comparison.passed:
            report["trials_passed"] += 1
        elif not report["reason"]:
            report["reason"] = f"trial {trial} {comparison.reason}"
    return report


def _side_streams(model, inputs) -> bool:
    """Whether library kernels of one call ran on streams beside the caller's (the harness then synchronizes)."""
    from egg_worker import guards

    _, records, _ = guards.kernel_trace(model, inputs)
    if records is None:
        return False
    caller, records = guards.split_marker(records)
    return caller is not None and any(record.stream != caller for record in records)


def _time_compiled(model, inputs, settings, device, compiled=None) -> tuple:
    """(Stats, compile_s, error) of torch.compile(model), or of `compiled` where given (one compiled module timed
    at several batches); its first call on these inputs, which may compile, timed apart."""
    from egg_worker import loader, timing

    try:
        # `is None`, not truthiness: torch.compile's module forwards len() to the task's Model, which has none
        compiled = torch.compile(model) if compiled is None else compiled
        compile_s = timing.first_call_s(compiled, inputs, device)
        return timing.time_cuda(compiled, inputs, settings, device), compile_s, ""
    except Exception as error:
        return None, None, loader.one_line(error)


def time_all(task, reference, model, args, device) -> dict:
    """Eager and torch.compile under --precision, then ModelNew under --candidate-precision (the harness's order)."""
    from egg_worker import loader, precision, timing

    settings = timing.TimingSettings(True, args.warmup, args.timing_trials, args.timing_budget)
    inputs = loader.make_inputs(task, args.seed, device)
    times = {"eager": None, "compile": None, "candidate": None, "compile_s": None, "compile_error": ""}
    with precision.applied(precision.get(args.precision)):
        times["eager"] = timing.time_cuda(reference, inputs, settings, device)
        if not args.no_compile:
            times["compile"], times["compile_s"], times["compile_error"] = _time_compiled(
                reference, inputs, settings, device)
    with precision.applied(precision.get(args.candidate_precision)):
        synchronized = _call("side-stream check", _side_streams, model, inputs)
        timer = timing.time_cuda_synchronized if synchronized else timing.time_cuda
        times["candidate"] = _call("timing", timer, model, inputs, settings, device)
        times["host_call"] = _call("host time", timing.host_call_ms, model, inputs)
    return times


def _at_batch(task, reference, model, compiled, batch: int, args, device) -> dict:
    """One batch of --batch-sizes: correctness against Model, then (on a GPU) eager, torch.compile(dynamic=True)
    and ModelNew timed on the same inputs."""
    from egg_worker import evaluate, launches, loader, precision, timing

    inputs = loader.make_batch_inputs(task, args.seed, device, batch, args.dim)
    expected = evaluate.flatten(reference(*inputs))
    with launches.count_launches() as launched:
        outputs = evaluate.flatten(_call(f"batch {batch}", model, *inputs))
    comparison = evaluate.compare_outputs(outputs, expected, args.tol)
    row = {"batch": batch, "correct": comparison.passed, "reason": comparison.reason,
           "triton_launches": len(launched), "time_ms": {"eager": None, "compile": None, "candidate": None},
           "compile_s": None, "compile_error": ""}
    if device.type != "cuda" or not comparison.passed:
        return row
    settings = timing.TimingSettings(True, args.warmup, args.timing_trials, args.timing_budget)
    times = row["time_ms"]
    with precision.applied(precision.get(args.precision)):
        times["eager"] = timing.time_cuda(reference, inputs, settings, device)
        if compiled is not None:
            times["compile"], row["compile_s"], row["compile_error"] = _time_compiled(
                reference, inputs, settings, device, compiled)
    with precision.applied(precision.get(args.candidate_precision)):
        times["candidate"] = _call(f"timing at batch {batch}", timing.time_cuda, model, inputs, settings, device)
    row.update(_speedups(times))
    return row


def at_batches(task, reference, model, args, device) -> list:
    compiled = None if args.no_compile else torch.compile(reference, dynamic=True)
    return [_at_batch(task, reference, model, compiled, batch, args, device) for batch in args.batch_sizes]


def _speedups(times: dict) -> dict:
    candidate = times.get("candidate")
    speedups = {}
    for name in ("eager", "compile"):
        baseline = times.get(name)
        ok = candidate is not None and baseline is not None
        speedups[f"speedup_vs_{name}"] = baseline["mean"] / candidate["mean"] if ok else None
        speedups[f"speedup_median_vs_{name}"] = baseline["median"] / candidate["median"] if ok else None
    return speedups


def _protocol(args, device, times) -> dict:
    from egg_worker import timing

    candidate = times.get("candidate") if times else None
    timer = "none" if candidate is None else candidate.get("timer", timing.CUDA_EVENTS_TIMER)
    settings = timing.TimingSettings(True, args.warmup, args.timing_trials, args.timing_budget)
    precisions = {"candidate": args.candidate_precision, "eager": args.precision}
    if args.dtype != "fp32":
        precisions["dtype"] = args.dtype
    if not args.no_compile:
        precisions["compile"] = args.precision
    return timing.protocol(settings, device, timer, TIMEIT_PROCESS, args.seed, args.init_seed, precisions)


def run(args) -> dict:
    """The whole check and timing; raises Failed for a candidate that cannot run, loader.RequestError for a bad task."""
    from egg_worker import loader, server

    server.configure_torch()  # the worker's process-wide setting: the reference that decides correctness is strict
    device = loader.resolve_device(None)
    task = loader.load_task(args.task, args.dtype)
    result = {"task": os.path.abspath(args.task), "candidate": os.path.abspath(args.candidate),
              "device": server.device_info(), "versions": server.handle_hello({})["versions"]}
    with torch.no_grad():
        reference = loader.reference_model(task, device, args.init_seed)
        try:
            module = loader.load_candidate(args.candidate)
        except loader.CandidateError as error:
            raise Failed(f"compile_error: {error}") from None
        model = _call("ModelNew construction", loader.build_model, module.ModelNew, task, device, args.init_seed)
        correctness = check(task, reference, model, args, device)
        timed = device.type == "cuda" and correctness["trials_passed"] == correctness["trials"]
        times = time_all(task, reference, model, args, device) if timed else None
        batches = at_batches(task, reference, model, args, device) if args.batch_sizes else []
    errors = correctness.pop("errors")
    result.update(correctness, correct=correctness["trials_passed"] == correctness["trials"], tol=args.tol,
                  max_abs_err=errors.max_abs_err, max_rel_err=errors.max_rel_err, rel_l2_err=errors.rel_l2_err)
    result["time_ms"] = {key: times[key] if times else None for key in ("candidate", "eager", "compile")}
    result["host_call_ms"] = times["host_call"] if times else None
    result["compile_s"] = times["compile_s"] if times else None
    result["compile_baseline_error"] = times["compile_error"] if times else ""
    result.update(_speedups(result["time_ms"]))
    result["timing_protocol"] = _protocol(args, device, times)
    result["timing_note"] = "" if times else _untimed_note(device, result["correct"])
    if batches:
        result["batches"] = batches
        failed = [row for row in batches if not row["correct"]]
        if failed and result["correct"]:
            result.update(correct=False, reason=f"batch {failed[0]['batch']} {failed[0]['reason']}")
    return result


def _untimed_note(device, correct: bool) -> str:
    if device.type != "cuda":
        return ("no GPU: kernels ran in Triton's interpreter; correctness only, nothing timed (a CPU time would not "
                "be a performance figure)")
    return "not timed: ModelNew does not agree with Model" if not correct else ""


# ---------------------------------------------------------------- output

def _ms(value) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) else "-"


def _row(name: str, setting: str, stats) -> str:
    if stats is None:
        return f"  {name:<15} {setting:<8} {'-':>10} {'-':>10} {'-':>10} {'-':>10} {'-':>5}"
    return (f"  {name:<15} {setting:<8} {_ms(stats['mean']):>10} {_ms(stats['median']):>10} "
            f"{_ms(stats['p20']):>10} {_ms(stats['p80']):>10} {stats['n']:>5}")


def _ratio(value) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "n/a"


def _launch_line(result: dict) -> str:
    launches = result.get("triton_launches", 0)
    line = f"ModelNew: {launches} Triton launches per call"
    if launches == 0:
        line += " (none: it ran no Triton kernel, e.g. its shape guard fell back to PyTorch)"
    host, candidate = result.get("host_call_ms"), result["time_ms"]["candidate"]
    if host and candidate:
        line += f"; the host takes {host['median']:.4f} ms to issue one call"
        if host["median"] >= LAUNCH_BOUND_SHARE * candidate["median"]:
            line += " (launch-bound: the GPU waits on the host)"
    return line


def _protocol_lines(protocol: dict) -> list:
    if protocol["timer"] == "none":
        return [f"protocol: nothing timed; models {protocol['models']}"]
    flush = protocol["l2_flush_bytes"]
    flush_text = f"{flush / 2**20:.0f} MiB" if flush else "nothing (no GPU)"
    return [
        f"protocol: timer {protocol['timer']}; one untimed first call, {protocol['warmup_calls']} warm-up calls, then "
        f"{protocol['timed_calls']} timed calls (at least {protocol['min_timed_calls_on_budget']} once "
        f"{protocol['budget_s']:g} s are spent); L2 flush of {flush_text} before each; median reported",
        f"  timed region: {protocol['timed_region']}",
        f"  inputs: {protocol['inputs']}",
        f"  models: {protocol['models']}",
        f"  process: {protocol['process']}",
    ]


def render(result: dict) -> str:
    device = result["device"]
    lines = [f"egg timeit: {os.path.basename(result['task'])} vs {os.path.basename(result['candidate'])} on "
             f"{device.get('name')} ({device.get('kind')})"]
    agree = "yes" if result["correct"] else "NO"
    lines.append(f"correct: {agree} ({result['trials_passed']} of {result['trials']} trials at tol {result['tol']:g}, "
                 f"max_abs_err {_ms(result['max_abs_err'])}){'' if result['correct'] else ' - ' + result['reason']}")
    lines.append(_launch_line(result))
    times, precisions = result["time_ms"], result["timing_protocol"]["precision"]
    lines.append(f"  {'ms':<15} {'setting':<8} {'mean':>10} {'median':>10} {'p20':>10} {'p80':>10} {'n':>5}")
    lines.append(_row("Model eager", precisions.get("eager", "-"), times["eager"]))
    lines.append(_row("torch.compile", precisions.get("compile", "-"), times["compile"]))
    lines.append(_row("ModelNew", precisions.get("candidate", "-"), times["candidate"]))
    if times["candidate"] is not None:
        lines.append(f"speedup (medians): {_ratio(result['speedup_median_vs_eager'])} vs eager, "
                     f"{_ratio(result['speedup_median_vs_compile'])} vs torch.compile (means: "
                     f"{_ratio(result['speedup_vs_eager'])}, {_ratio(result['speedup_vs_compile'])})")
    if result["compile_s"] is not None:
        lines.append(f"torch.compile: its first call took {result['compile_s']:.1f} s (compiling; not timed)")
    if result["compile_baseline_error"]:
        lines.append(f"torch.compile failed: {result['compile_baseline_error']}")
    if result["timing_note"]:
        lines.append(f"note: {result['timing_note']}")
    lines += _batch_lines(result.get("batches", []))
    lines += _protocol_lines(result["timing_protocol"])
    return "\n".join(lines)


def _batch_lines(batches: list) -> list:
    if not batches:
        return []
    lines = [f"  {'batch':>6} {'correct':>8} {'launches':>9} {'eager ms':>10} {'compile ms':>11} {'ModelNew ms':>12} "
             f"{'x eager':>8} {'x compile':>10}  (medians; torch.compile(dynamic=True))"]
    for row in batches:
        times = row["time_ms"]
        median = lambda stats: _ms(stats["median"]) if stats else "-"
        lines.append(f"  {row['batch']:>6} {'yes' if row['correct'] else 'NO':>8} {row['triton_launches']:>9} "
                     f"{median(times['eager']):>10} {median(times['compile']):>11} {median(times['candidate']):>12} "
                     f"{_ratio(row.get('speedup_median_vs_eager')):>8} {_ratio(row.get('speedup_median_vs_compile')):>10}")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    _use_interpreter_without_gpu()
    from egg_worker import loader, precision

    loader.quicken_interpreter()

    try:
        precision.get(args.precision)
        precision.get(args.candidate_precision)
    except ValueError as error:
        print(f"egg timeit: error: {error}", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except Failed as failure:
        print(f"egg timeit: ModelNew failed: {failure}", file=sys.stderr)
        return 1
    except loader.RequestError as error:
        print(f"egg timeit: error: {error}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0 if result["correct"] else 1


if __name__ == "__main__":
    sys.exit(main())
