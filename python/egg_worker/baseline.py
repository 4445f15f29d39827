"""The `baseline` op: the task's reference Model timed eager and under torch.compile (inductor, default mode).

Both are timed like candidates (timing.time_cuda) on the inputs of trial 0 (`seed`). compile_s is the wall time
of the first compiled call. A torch.compile failure gives compile=null and compile_error (one line); a failing
reference forward gives status runtime_error. Nothing is timed on cpu or with timing disabled (all Stats null).
Results are cached per (task, content hash, device, seeds, timing settings).
"""

import time

import torch

from egg_worker import loader, timing
from egg_worker.evaluate import DEFAULT_INIT_SEED, DEFAULT_SEED
from egg_worker.loader import RequestError, one_line

_results = {}


def _result(status="ok", reason="") -> dict:
    return {"status": status, "reason": reason, "eager": None, "compile": None, "compile_error": "",
            "compile_s": None}


def _time_compiled(model, inputs, settings: timing.TimingSettings, device: torch.device, result: dict) -> None:
    try:
        compiled = torch.compile(model)
        started_s = time.perf_counter()
        compiled(*inputs)
        torch.cuda.synchronize(device)
        result["compile_s"] = time.perf_counter() - started_s
        result["compile"] = timing.time_cuda(compiled, inputs, settings, device)
    except Exception as error:
        result["compile"] = None
        result["compile_error"] = one_line(error)


def _measure(task, device, seed: int, init_seed: int, settings: timing.TimingSettings) -> dict:
    model = loader.reference_model(task, device, init_seed)
    inputs = loader.make_inputs(task, seed, device)
    try:
        model(*inputs)
    except Exception as error:
        return _result("runtime_error", f"reference forward failed: {one_line(error)}")
    result = _result()
    if device.type != "cuda" or not settings.enabled:
        return result
    try:
        result["eager"] = timing.time_cuda(model, inputs, settings, device)
    except Exception as error:
        return _result("runtime_error", f"eager timing failed: {one_line(error)}")
    _time_compiled(model, inputs, settings, device, result)
    return result


def handle_baseline(request: dict) -> dict:
    task_path = request.get("task")
    if not isinstance(task_path, str) or not task_path:
        raise RequestError("task must be a file path")
    try:
        device = loader.resolve_device(request.get("device"))
        seed = int(request.get("seed", DEFAULT_SEED))
        init_seed = int(request.get("init_seed", DEFAULT_INIT_SEED))
        settings = timing.parse_settings(request.get("timing"))
    except (TypeError, ValueError) as error:
        raise RequestError(f"bad baseline request: {one_line(error)}") from None
    task = loader.load_task(task_path)
    key = (task.path, task.sha256, str(device), seed, init_seed, settings)
    if key not in _results:
        with torch.no_grad():
            _results[key] = _measure(task, device, seed, init_seed, settings)
    return dict(_results[key])
