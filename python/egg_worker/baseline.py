"""The `baseline` op: the task's reference Model run and timed under named PyTorch precision settings.

For every setting of the request (precision.py: `default`, `strict`, `tf32`), side by side in this worker, on
the inputs of trial 0 (`seed`): eager and torch.compile (inductor, default mode; `max-autotune` on request), each
with its time (timing.time_cuda, like candidates), its compile time (the first compiled call, never inside the
timed region) and its error against the exact reference (the eager output under `strict`, the same function
that decides a candidate's correctness), with `within_tol` the main check's verdict at the request's `tol`.
Every compile starts from a reset dynamo cache, as a user's process would. A torch.compile failure is that
run's `error` (one line); a failing reference forward gives status runtime_error. On the cpu or with timing
disabled nothing is timed or compiled: only eager runs, for the errors. For a dynamic batch (`dynamic`), every
setting also times eager and one torch.compile(dynamic=True) (the form torch.compile users serve many batch sizes
with) at each batch a candidate is checked at (evaluate.dynamic_batches): `by_batch`. Results are cached per (task, content
hash, device, seeds, timing settings, tol, settings, runs).
"""

import dataclasses

import torch

from egg_worker import loader, precision, timing
from egg_worker.evaluate import (DEFAULT_INIT_SEED, DEFAULT_SEED, DEFAULT_TOL, compare_outputs, dynamic_points, flatten,
                                 point_entry, point_inputs)
from egg_worker.loader import RequestError, one_line

COMPILE_MODES = {"compile": "default", "max-autotune": "max-autotune"}
RUNS = ("eager", *COMPILE_MODES)
DEFAULT_RUNS = ("eager", "compile")

_clone = torch.Tensor.clone
_results = {}


@dataclasses.dataclass(frozen=True)
class BaselineRequest:
    task: str
    device: torch.device
    seed: int
    init_seed: int
    timing: timing.TimingSettings
    tol: float
    settings: tuple
    runs: tuple
    precision: str = "fp32"  # the task's inputs and Model cast to bf16 or fp16 (loader.load_task)
    dynamic: tuple = ()  # dynamic sizes: ((dim, largest size, 0 the task's own), ...) (evaluate.EvalRequest's)


def _names(value, known, default, what: str) -> tuple:
    if value is None:
        return tuple(default)
    if not isinstance(value, list) or not value or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{what} must be a non-empty list of names")
    unknown = [name for name in value if name not in known]
    if unknown:
        raise ValueError(f"unknown {what} {unknown[0]!r} (known: {', '.join(known)})")
    return tuple(dict.fromkeys(value))


def parse_request(request: dict) -> BaselineRequest:
    task_path = request.get("task")
    if not isinstance(task_path, str) or not task_path:
        raise RequestError("task must be a file path")
    try:
        parsed = BaselineRequest(
            task=task_path,
            device=loader.resolve_device(request.get("device")),
            seed=int(request.get("seed", DEFAULT_SEED)),
            init_seed=int(request.get("init_seed", DEFAULT_INIT_SEED)),
            timing=timing.parse_settings(request.get("timing")),
            tol=float(request.get("tol", DEFAULT_TOL)),
            settings=_names(request.get("settings"), precision.SETTINGS, precision.DEFAULT_ORDER, "settings"),
            runs=_names(request.get("runs"), RUNS, DEFAULT_RUNS, "runs"),
            precision=loader.precision_name(request.get("precision")),
            dynamic=tuple(loader.dynamic_fields(request)),
        )
    except (TypeError, ValueError) as error:
        raise RequestError(f"bad baseline request: {one_line(error)}") from None
    if not parsed.tol > 0:
        raise RequestError("baseline needs tol > 0")
    return parsed


def _run(time_ms=None, compile_s=None, error="", accuracy=None) -> dict:
    return {"time_ms": time_ms, "compile_s": compile_s, "error": error, "accuracy": accuracy}


def _cloned(inputs) -> list:
    return [_clone(value) if isinstance(value, torch.Tensor) else value for value in inputs]


def _accuracy(fn, inputs, reference: list, tol: float) -> dict:
    comparison = compare_outputs(flatten(fn(*_cloned(inputs))), reference, tol)
    return {**dataclasses.asdict(comparison.errors), "within_tol": comparison.passed}


def _measure_eager(model, inputs, reference, request: BaselineRequest, timed: bool) -> dict:
    try:
        accuracy = _accuracy(model, inputs, reference, request.tol)
        time_ms = timing.time_cuda(model, inputs, request.timing, request.device) if timed else None
    except Exception as error:
        return _run(error=f"eager failed: {one_line(error)}")
    return _run(time_ms=time_ms, accuracy=accuracy)


def _measure_compiled(model, inputs, reference, request: BaselineRequest, mode: str) -> dict:
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, mode=mode)
        compile_s = timing.first_call_s(compiled, _cloned(inputs), request.device)
        accuracy = _accuracy(compiled, inputs, reference, request.tol)
        time_ms = timing.time_cuda(compiled, inputs, request.timing, request.device)
    except Exception as error:
        return _run(error=one_line(error))
    return _run(time_ms=time_ms, compile_s=compile_s, accuracy=accuracy)


def _measure_setting(model, inputs, reference, request: BaselineRequest, name: str) -> dict:
    timed = request.device.type == "cuda" and request.timing.enabled
    with precision.applied(precision.get(name)):
        entry = {"flags": precision.describe_current(),
                 "runs": {"eager": _measure_eager(model, inputs, reference, request, timed)}}
        for run in request.runs:
            if run in COMPILE_MODES and timed:
                entry["runs"][run] = _measure_compiled(model, inputs, reference, request, COMPILE_MODES[run])
    return entry


def _time_dynamic(model, batches: dict, request: BaselineRequest) -> dict:
    """Under the current setting: eager and one torch.compile(dynamic=True) module timed at each batch
    ({batch: inputs}); the compile's first call (outside the timed region) is its compile time."""
    times = {batch: {"eager": None, "compile": None, "compile_s": None, "error": ""} for batch in batches}
    for batch, inputs in batches.items():
        try:
            times[batch]["eager"] = timing.time_cuda(model, inputs, request.timing, request.device)
        except Exception as error:
            times[batch]["error"] = f"eager failed: {one_line(error)}"
    try:
        torch._dynamo.reset()
        compiled = torch.compile(model, dynamic=True)
        for batch, inputs in batches.items():
            times[batch]["compile_s"] = timing.first_call_s(compiled, _cloned(inputs), request.device)
            times[batch]["compile"] = timing.time_cuda(compiled, inputs, request.timing, request.device)
    except Exception as error:  # the batch it failed at and those after it have no compiled time
        for entry in times.values():
            if entry["compile"] is None:
                entry["error"] = entry["error"] or one_line(error)
    return times


def _measure_batches(task, model, request: BaselineRequest) -> list:
    """A dynamic candidate's baselines at every point it is checked at (evaluate.dynamic_points), under each
    setting: [{batch (or sizes), settings: {name: {eager, compile, compile_s, error}}}] (inputs of the request's
    seed at that point)."""
    own = loader.make_inputs(task, request.seed, request.device)
    batches = {point: point_inputs(task, request.seed, request.device, request.dynamic, point)
               for point in dynamic_points(request.dynamic, own)}
    by_setting = {}
    for name in request.settings:
        with precision.applied(precision.get(name)):
            by_setting[name] = _time_dynamic(model, batches, request)
    return [{**point_entry(point), "settings": {name: by_setting[name][point] for name in request.settings}}
            for point in batches]


def _measure(task, request: BaselineRequest) -> dict:
    model = loader.reference_model(task, request.device, request.init_seed)
    inputs = loader.make_inputs(task, request.seed, request.device)
    try:
        with precision.applied(precision.get("strict")):
            reference = [_clone(value) if isinstance(value, torch.Tensor) else value
                         for value in flatten(model(*_cloned(inputs)))]
    except Exception as error:
        return {"status": "runtime_error", "reason": f"reference forward failed: {one_line(error)}",
                "settings": {}}
    settings = {name: _measure_setting(model, inputs, reference, request, name) for name in request.settings}
    result = {"status": "ok", "reason": "", "tol": request.tol, "settings": settings}
    if request.dynamic and request.device.type == "cuda" and request.timing.enabled:
        result["by_batch"] = _measure_batches(task, model, request)
    return result


def handle_baseline(request: dict) -> dict:
    parsed = parse_request(request)
    task = loader.load_task(parsed.task, parsed.precision)
    key = (task.path, task.sha256, parsed)
    if key not in _results:
        with torch.no_grad():
            _results[key] = _measure(task, parsed)
    return dict(_results[key])
