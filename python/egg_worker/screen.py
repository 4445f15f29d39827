"""The `screen` op: a fast first cut over many candidates of one task, for egg's measured search.

`handle_screen(request)` returns {results, compile_s, screen_s, worker_tainted}: one result per entry of
`candidates`, in their order, {candidate, status, reason, time_ms: Stats or null, max_abs_err, screened}.
1. Precompile (cuda only, outside the GPU lock of egg_worker.gpulock; the rest holds it): the candidates whose file defines egg_precompile() have it run in a pool of
   `compile_workers` fresh processes (egg_worker.precompile), so that their first launch here hits Triton's disk
   cache. An import or egg_precompile that raises is compile_error, one past compile_timeout_s is timeout; neither
   is run further.
2. Screen, here, one candidate at a time: import, build ModelNew (init_seed), one forward call on trial 0's inputs
   (seed) judged against the reference's outputs (run once per request) by evaluate.judge_outputs, the
   function evaluate's trials use: allclose at `tol`, the float64 noise-floor check, and at bf16/fp16 the
   float32 answer (a pass there is not marked here; evaluate marks it) -> mismatch; no Triton launch ->
   rejected; then on cuda timing.time_cuda with the request's (small) timing settings. On cpu nothing is timed
   unless timing.cpu_wall asks for the interpreter's wall clock. Any exception is runtime_error (compile_error
   for a Triton compile failure), as in `evaluate`.

Not a verdict: the exploit guards of `evaluate` (several trials with the candidate first on odd ones, the checks for
modified inputs, aliased outputs, side streams and tensor subclasses, the robustness trial) are not applied here,
because the search always re-evaluates the candidate it keeps with the full `evaluate`. Only the worker itself is
protected: a candidate that patches what guards.take_snapshot covers is rejected and the snapshot restored, and
worker_tainted asks the C++ side for a fresh worker (as do leftover threads). After a candidate leaves the CUDA
context unusable the rest are not run: they come back as runtime_error with screened: false, for a fresh worker.
A candidate never makes the op fail; a bad request or a broken task raises loader.RequestError.
"""

import dataclasses
import gc
import math
import os
import threading
import time

import torch

from egg_worker import evaluate, fence, gpulock, guards, launches, loader, precompile, timing
from egg_worker.evaluate import CandidateFailed, Rejected
from egg_worker.loader import RequestError, one_line

DEFAULT_COMPILE_TIMEOUT_S = 300.0


@dataclasses.dataclass(frozen=True)
class ScreenRequest:
    task: str
    candidates: tuple
    device: torch.device
    tol: float
    seed: int
    init_seed: int
    timing: timing.TimingSettings
    compile_workers: int
    compile_timeout_s: float
    precision: str = "fp32"


def _candidate_paths(value) -> tuple:
    if not isinstance(value, list) or not all(isinstance(path, str) and path for path in value):
        raise RequestError("candidates must be a list of file paths")
    return tuple(value)


def parse_request(request: dict) -> ScreenRequest:
    task = request.get("task")
    if not isinstance(task, str) or not task:
        raise RequestError("task must be a file path")
    try:
        parsed = ScreenRequest(
            task=task,
            candidates=_candidate_paths(request.get("candidates")),
            device=loader.resolve_device(request.get("device")),
            tol=float(request.get("tol", evaluate.DEFAULT_TOL)),
            seed=int(request.get("seed", evaluate.DEFAULT_SEED)),
            init_seed=int(request.get("init_seed", evaluate.DEFAULT_INIT_SEED)),
            timing=timing.parse_settings(request.get("timing")),
            compile_workers=int(request.get("compile_workers", 0)),
            compile_timeout_s=float(request.get("compile_timeout_s", DEFAULT_COMPILE_TIMEOUT_S)),
            precision=loader.precision_name(request.get("precision")),
        )
    except (TypeError, ValueError) as error:
        raise RequestError(f"bad screen request: {one_line(error)}") from None
    if not parsed.tol > 0 or parsed.compile_workers < 0 or not parsed.compile_timeout_s > 0:
        raise RequestError("screen needs tol > 0, compile_workers >= 0 and compile_timeout_s > 0")
    return parsed


@dataclasses.dataclass
class Session:
    """What one screen request holds; `device`, `snapshot`, `tainted`, `task`, `reference`, `request.tol`,
    `flags` and `half_rule_used` are what evaluate.run_candidate_code and evaluate.judge_outputs read and set
    (the last two are not reported: screening only says ok or mismatch)."""
    request: ScreenRequest
    task: loader.Task
    reference: torch.nn.Module
    snapshot: guards.Snapshot
    references: list  # its outputs on trial 0's inputs
    tainted: bool = False
    flags: list = dataclasses.field(default_factory=list)  # set by evaluate.compare_against_float32, unreported
    half_rule_used: bool = False
    cuda_lost_after: str | None = None  # the candidate after which the CUDA context was unusable

    @property
    def device(self) -> torch.device:
        return self.request.device


def _entry(path: str) -> dict:
    return {"candidate": path, "status": "ok", "reason": "", "time_ms": None, "max_abs_err": None,
            "screened": True}


def _finite_or_none(value):
    return value if value is not None and math.isfinite(value) else None


def _forward(model, inputs) -> tuple:
    with launches.count_launches() as launched:
        outputs = evaluate.flatten(model(*inputs))
    return outputs, list(launched)


def _import(session: Session, path: str):
    if not os.path.isfile(path):
        raise CandidateFailed("compile_error", f"candidate file not found: {path}")
    try:
        with fence.watching():
            return loader.load_candidate(path)
    except (loader.CandidateError, RequestError) as error:
        evaluate._check_patches(session, "import")
        raise CandidateFailed("compile_error", str(error)) from None


def _fresh_inputs(session: Session):
    """Trial 0's inputs made again (the candidate's call may have written to its own), once and only if asked."""
    made = []

    def inputs_of() -> list:
        if not made:
            made.append(loader.make_inputs(session.task, session.request.seed, session.device))
        return made[0]
    return inputs_of


def _check(session: Session, outputs, launched, entry: dict) -> bool:
    """Fill in the comparison; False when the candidate is wrong or launched no Triton kernel."""
    try:
        comparison = evaluate.judge_outputs(session, outputs, session.references, _fresh_inputs(session))
    except BaseException as error:  # an output's own __eq__ may raise anything
        if evaluate._is_out_of_memory(error):
            raise evaluate.HarnessOutOfMemory(f"the harness ran out of memory checking a candidate's outputs: "
                                              f"{one_line(error)}") from None
        raise CandidateFailed("runtime_error", f"checking the candidate's outputs failed: {one_line(error)}") from None
    entry["max_abs_err"] = _finite_or_none(comparison.errors.max_abs_err)
    if not comparison.passed:
        entry.update(status="mismatch", reason=comparison.reason)
        return False
    if not launched:
        entry.update(status="rejected", reason="no Triton kernel launched in the forward call")
        return False
    return True


def _time(session: Session, model):
    settings = session.request.timing
    if not settings.enabled:
        return None
    inputs = loader.make_inputs(session.task, session.request.seed, session.device)
    if session.device.type == "cuda":
        return evaluate.run_candidate_code(session, "timing", timing.time_cuda, model, inputs, settings,
                                           session.device)
    if settings.cpu_wall:
        return evaluate.run_candidate_code(session, "timing", timing.time_cpu_wall, model, inputs, settings)
    return None


def _screen_module(session: Session, module, entry: dict) -> None:
    request = session.request
    model = evaluate.run_candidate_code(session, "ModelNew construction", loader.build_model, module.ModelNew,
                                        session.task, session.device, request.init_seed)
    inputs = loader.make_inputs(session.task, request.seed, session.device)
    evaluate.poison_blocks_like(session.references)
    outputs, launched = evaluate.run_candidate_code(session, "forward", _forward, model, inputs)
    passed = _check(session, outputs, launched, entry)
    del outputs, inputs
    if passed:
        entry["time_ms"] = _time(session, model)


def screen_one(session: Session, path: str, entry: dict) -> None:
    """Screen one candidate into `entry`; never raises for what the candidate does."""
    processes_before = fence.descendants()
    _screen_one(session, path, entry)
    strays = evaluate.end_stray_processes(processes_before)
    if strays is not None:
        session.tainted = True
        if entry["status"] != "rejected":
            entry.update(status="rejected", reason=strays, time_ms=None)


def _screen_one(session: Session, path: str, entry: dict) -> None:
    try:
        module = _import(session, path)
        try:
            evaluate._check_patches(session, "import")
            _screen_module(session, module, entry)
        finally:
            loader.forget(module)
    except Rejected as rejection:
        entry.update(status="rejected", reason=str(rejection))
    except CandidateFailed as failure:
        entry.update(status=failure.status, reason=failure.reason)
    except (RequestError, evaluate.HarnessOutOfMemory):  # the task or the harness broke, not the candidate
        raise
    except BaseException as error:
        entry.update(status="runtime_error", reason=one_line(error))
    if entry["status"] != "ok":
        entry["time_ms"] = None
        if not evaluate._cuda_still_usable(session.device):
            session.cuda_lost_after = path
            session.tainted = True


def _free_memory(session: Session, path: str) -> None:
    gc.collect()
    if session.device.type == "cuda" and session.cuda_lost_after is None:
        try:
            torch.cuda.empty_cache()
        except Exception:  # a context lost in a way the synchronize did not show
            session.cuda_lost_after, session.tainted = path, True


def _precompile(request: ScreenRequest, results: list) -> float:
    """Run the precompile step on cuda; mark the candidates it failed; its wall time in seconds."""
    if request.device.type != "cuda":
        return 0.0
    started_s = time.perf_counter()
    indices = [i for i, path in enumerate(request.candidates) if precompile.defines_precompile(path)]
    workers = request.compile_workers or os.cpu_count() or 1
    failures = precompile.precompile([request.candidates[i] for i in indices], workers, request.compile_timeout_s)
    for position, (status, reason) in failures.items():
        results[indices[position]].update(status=status, reason=reason)
    return time.perf_counter() - started_s




def _left_threads(threads_before: set) -> bool:
    return any(thread not in threads_before and thread.is_alive() and not evaluate._started_by_torch(thread)
               for thread in threading.enumerate())


def handle_screen(request: dict) -> dict:
    started_s = time.perf_counter()
    parsed = parse_request(request)
    results = [_entry(path) for path in parsed.candidates]
    task = loader.load_task(parsed.task, parsed.precision)
    launches.install()
    threads_before = set(threading.enumerate())
    compile_s = _precompile(parsed, results)  # CPU work: outside the GPU lock
    with torch.no_grad(), gpulock.held(f"screen of {len(parsed.candidates)}"):
        reference = loader.reference_model(task, parsed.device, parsed.init_seed)
        references = evaluate._run_reference(reference, loader.make_inputs(task, parsed.seed, parsed.device))
        session = Session(parsed, task, reference, guards.take_snapshot(extra=[task.module, task.Model]), references)
        gc.freeze()  # the collections between candidates then skip everything older (~0.1 s each otherwise)
        try:
            for path, entry in zip(parsed.candidates, results):
                if entry["status"] != "ok":
                    continue
                if session.cuda_lost_after is not None:
                    entry.update(status="runtime_error", screened=False,
                                 reason=f"not screened: the CUDA context was lost after {session.cuda_lost_after}")
                    continue
                screen_one(session, path, entry)
                _free_memory(session, path)
        finally:
            gc.unfreeze()
    if _left_threads(threads_before):
        session.tainted = True
    return {"results": results, "compile_s": compile_s, "screen_s": time.perf_counter() - started_s,
            "worker_tainted": session.tainted}
