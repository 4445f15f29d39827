"""The `evaluate` op: correctness, exploit checks and timing of one candidate against one task.

`handle_evaluate(request)` returns the EvalResult of docs/protocol.md. Sequence: load the task (cached) and its
reference model (cached); snapshot the guarded namespaces; import the candidate and build ModelNew; run `trials`
trials on fresh inputs (trial i: seed + i; on odd trials the candidate runs before the reference, on the others
after it, once the reference's own output block has been filled with NaN and freed; before every call, freed
blocks of the reference outputs' sizes are filled with NaN, so that no stale answer sits where the candidate's
torch.empty would land); after every call of
candidate code check for patching, Triton launches, modified inputs and aliased outputs; on cuda run the last
trial under the profiler to catch side streams; then the optional robustness trial and the timing.
Candidate code runs inside fence.watching(): an attempt to leave the sandbox, or a process left running at the end,
makes the candidate rejected and the worker tainted (egg_worker.fence).
Request errors (bad task, bad fields) raise loader.RequestError; everything the candidate does becomes a status.
"""

import copy
import dataclasses
import gc
import math
import threading
from collections import OrderedDict

import torch

from egg_worker import fence, gpulock, guards, launches, loader, precision, timing, variants
from egg_worker.loader import CandidateError, RequestError, TaskError, one_line

DEFAULT_TOL = 1e-4
DEFAULT_TRIALS = 5
DEFAULT_SEED = 42
DEFAULT_INIT_SEED = 42
ROBUST_SEED_OFFSET = 1000
BATCH_SEED_OFFSET = 2000  # a dynamic-batch candidate's checks at other batches draw from seed + this + i
FINGERPRINT_ELEMENTS = 64
# No reference outputs stay on a GPU that other workers share (gpulock).
REFERENCE_CACHE_BYTES = {"cuda": 0 if gpulock.shared() else 4 << 30, "cpu": 1 << 30}
COMPARE_CHUNK_ELEMENTS = 1 << 24
POISON_COPIES = 4
PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)  # subclasses could override torch functions

_clone = torch.Tensor.clone
_empty_like = torch.empty_like
_isfinite = torch.isfinite
_allclose = torch.allclose
_equal = torch.equal
_synchronize = torch.cuda.synchronize


class Rejected(Exception):
    """An exploit check failed; str() is the reason."""


class CandidateFailed(Exception):
    """Candidate code raised; carries the status (compile_error / runtime_error) and the one-line reason."""

    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclasses.dataclass(frozen=True)
class EvalRequest:
    task: str
    candidate: str
    device: torch.device
    tol: float
    trials: int
    seed: int
    init_seed: int
    timing: timing.TimingSettings
    robust_trial: bool
    variants: bool = False
    precision: str = "fp32"  # fp32, bf16 or fp16: the task's inputs and the models cast (loader.load_task)
    dynamic: tuple = ()  # dynamic sizes (--dynamic): ((dim, largest size, 0 the task's own), ...); () none


def _required_path(request: dict, field: str) -> str:
    value = request.get(field)
    if not isinstance(value, str) or not value:
        raise RequestError(f"{field} must be a file path")
    return value


def parse_request(request: dict) -> EvalRequest:
    try:
        parsed = EvalRequest(
            task=_required_path(request, "task"),
            candidate=_required_path(request, "candidate"),
            device=loader.resolve_device(request.get("device")),
            tol=float(request.get("tol", DEFAULT_TOL)),
            trials=int(request.get("trials", DEFAULT_TRIALS)),
            seed=int(request.get("seed", DEFAULT_SEED)),
            init_seed=int(request.get("init_seed", DEFAULT_INIT_SEED)),
            timing=timing.parse_settings(request.get("timing")),
            robust_trial=bool(request.get("robust_trial", False)),
            variants=bool(request.get("variants", False)),
            precision=loader.precision_name(request.get("precision")),
            dynamic=tuple(loader.dynamic_fields(request)),
        )
    except (TypeError, ValueError) as error:
        raise RequestError(f"bad evaluate request: {one_line(error)}") from None
    if not parsed.tol > 0 or parsed.trials < 1:
        raise RequestError("evaluate needs tol > 0 and trials >= 1")
    return parsed


# ---------------------------------------------------------------- outputs and their comparison

def flatten(value) -> list:
    """A forward's result as a flat list: tensors and other leaves, nested tuples/lists unrolled."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


@dataclasses.dataclass
class Errors:
    """Worst errors seen so far (None: not computed)."""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    rel_l2_err: float | None = None

    def merge(self, other: "Errors") -> None:
        for field in ("max_abs_err", "max_rel_err", "rel_l2_err"):
            mine, theirs = getattr(self, field), getattr(other, field)
            if theirs is not None and (mine is None or theirs > mine):
                setattr(self, field, theirs)


@dataclasses.dataclass
class Comparison:
    passed: bool
    errors: Errors
    reason: str


def _flat_real(tensor: torch.Tensor) -> torch.Tensor:
    tensor = tensor.detach()
    if tensor.is_complex():
        tensor = torch.view_as_real(tensor)
    return tensor.reshape(-1)


@dataclasses.dataclass
class _Accumulator:
    """Sums and maxima over chunks of one output, so that the working copies stay small."""
    max_abs: float = 0.0
    max_rel: float = 0.0
    diff_sq: float = 0.0
    ref_sq: float = 0.0
    out_sq: float = 0.0
    n_nonfinite: int = 0
    n_unmatched_nonfinite: int = 0
    close: bool = True

    def add(self, out: torch.Tensor, ref: torch.Tensor, tol: float) -> None:
        """One chunk (flat, real). Finite float32 chunks take a short float32 path whose rounding (about 6e-8
        relative) is far below any tolerance; anything else (a NaN or inf on either side, float64 or integer
        data, a statistic that overflows float32) is compared in float64."""
        if out.dtype == torch.float32 and ref.dtype == torch.float32 and self._add_finite_float32(out, ref, tol):
            return
        self._add_float64(out.to(torch.float64), ref.to(torch.float64), tol)

    def _add_finite_float32(self, out: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
        """The statistics of an all-finite float32 chunk in a few passes and one synchronization; False (nothing
        added) when the chunk holds a non-finite value or a statistic is not finite in float32."""
        diff = (out - ref).abs_()
        ref_abs = ref.abs()
        f64 = torch.float64
        stats = torch.stack([
            diff.sum(dtype=f64), ref_abs.sum(dtype=f64), out.abs().sum(dtype=f64),  # all finite <=> sums finite
            diff.max().to(f64), (diff / ref_abs.clamp_min(tol)).max().to(f64),
            diff.square().sum(dtype=f64), ref.square().sum(dtype=f64), out.square().sum(dtype=f64),
            (diff > ref_abs.mul_(tol).add_(tol)).any().to(f64),  # allclose(atol=tol, rtol=tol) violated
        ]).tolist()
        if not all(math.isfinite(value) for value in stats):
            return False
        self.max_abs = max(self.max_abs, stats[3])
        self.max_rel = max(self.max_rel, stats[4])
        self.diff_sq += stats[5]
        self.ref_sq += stats[6]
        self.out_sq += stats[7]
        self.close = self.close and stats[8] == 0.0
        return True

    def _add_float64(self, out64: torch.Tensor, ref64: torch.Tensor, tol: float) -> None:
        out_finite, ref_finite = _isfinite(out64), _isfinite(ref64)
        both_finite = out_finite & ref_finite
        zeros = torch.zeros_like(out64)
        diff = torch.where(both_finite, (out64 - ref64).abs(), zeros)
        finite_ref = torch.where(both_finite, ref64, zeros)
        self.max_abs = max(self.max_abs, diff.max().item())
        self.max_rel = max(self.max_rel, (diff / finite_ref.abs().clamp_min(tol)).max().item())
        self.diff_sq += diff.square().sum().item()
        self.ref_sq += finite_ref.square().sum().item()
        self.out_sq += torch.where(both_finite, out64, zeros).square().sum().item()
        self.n_nonfinite += int((ref_finite & ~out_finite).sum().item())
        same = (out64 == ref64) | (torch.isnan(out64) & torch.isnan(ref64))
        self.n_unmatched_nonfinite += int((~ref_finite & ~same).sum().item())
        self.close = self.close and _allclose(out64, ref64, atol=tol, rtol=tol, equal_nan=True)

    def errors(self) -> Errors:
        if self.ref_sq > 0:
            rel_l2 = math.sqrt(self.diff_sq) / math.sqrt(self.ref_sq)
        else:
            rel_l2 = math.sqrt(self.out_sq)
        return Errors(self.max_abs, self.max_rel, rel_l2)


def _accumulate(out: torch.Tensor, ref: torch.Tensor, tol: float) -> _Accumulator:
    flat_out, flat_ref = _flat_real(out), _flat_real(ref)
    accumulator = _Accumulator()
    for start in range(0, flat_out.numel(), COMPARE_CHUNK_ELEMENTS):
        stop = start + COMPARE_CHUNK_ELEMENTS
        accumulator.add(flat_out[start:stop], flat_ref[start:stop], tol)
    return accumulator


def _describe(errors: Errors, tol: float) -> str:
    return (f"max_abs_err {errors.max_abs_err:.3g}, max_rel_err {errors.max_rel_err:.3g}, "
            f"rel_l2_err {errors.rel_l2_err:.3g} (tol {tol:g})")


def compare_tensor(out: torch.Tensor, ref: torch.Tensor, tol: float, elementwise: bool = True) -> Comparison:
    """Compare one output tensor with its reference (shape, dtype, device, then values in float64). Without
    `elementwise` only the relative L2 criterion (and the non-finite checks) decide: for signed random inputs,
    whose outputs cross zero, an elementwise tolerance is noise (the robustness trial)."""
    for attribute in ("shape", "dtype", "device"):
        got, expected = getattr(out, attribute), getattr(ref, attribute)
        if got != expected:
            if attribute == "shape":
                got, expected = tuple(got), tuple(expected)
            return Comparison(False, Errors(), f"{attribute} {got}, expected {expected}")
    accumulated = _accumulate(out, ref, tol)
    errors = accumulated.errors()
    if not (ref.is_floating_point() or ref.is_complex()):
        passed = _equal(out, ref)
        return Comparison(passed, errors, "" if passed else f"integer values differ: {_describe(errors, tol)}")
    if accumulated.n_nonfinite:
        return Comparison(False, errors,
                          f"{accumulated.n_nonfinite} non-finite values where the reference is finite")
    if accumulated.n_unmatched_nonfinite:
        return Comparison(False, errors,
                          f"{accumulated.n_unmatched_nonfinite} values differ where the reference is NaN or inf")
    problems = []
    if elementwise and not accumulated.close:
        problems.append("not allclose")
    if errors.rel_l2_err > tol:
        problems.append("rel_l2_err over tol")
    reason = f"{' and '.join(problems)}: {_describe(errors, tol)}" if problems else ""
    return Comparison(not problems, errors, reason)


def _compare_leaf(out, ref, tol: float, elementwise: bool) -> Comparison:
    if isinstance(ref, torch.Tensor):
        if not isinstance(out, torch.Tensor):
            return Comparison(False, Errors(), f"is a {type(out).__name__}, expected a tensor")
        return compare_tensor(out, ref, tol, elementwise)
    if isinstance(out, torch.Tensor) or out != ref:
        return Comparison(False, Errors(), f"is {out!r:.80}, expected {ref!r:.80}")
    return Comparison(True, Errors(), "")


def compare_outputs(outputs: list, references: list, tol: float, elementwise: bool = True) -> Comparison:
    """Compare flattened outputs with flattened reference outputs; the reason names the first bad output."""
    if len(outputs) != len(references):
        return Comparison(False, Errors(), f"{len(outputs)} outputs, expected {len(references)}")
    errors = Errors()
    failures = []
    for index, (out, ref) in enumerate(zip(outputs, references)):
        comparison = _compare_leaf(out, ref, tol, elementwise)
        errors.merge(comparison.errors)
        if not comparison.passed:
            failures.append(f"output {index}: {comparison.reason}")
    return Comparison(not failures, errors, "; ".join(failures[:1]))


# ---------------------------------------------------------------- reference outputs

class ReferenceOutputs:
    """Reference outputs per (task, device, init_seed, input kind, seed), bounded in bytes (oldest evicted)."""

    def __init__(self, limit_bytes: int):
        self.limit_bytes = limit_bytes
        self.entries = OrderedDict()
        self.n_bytes = 0

    @staticmethod
    def _size(outputs) -> int:
        return sum(value.numel() * value.element_size() for value in outputs if isinstance(value, torch.Tensor))

    def get(self, key):
        return self.entries.get(key)

    def put(self, key, outputs) -> None:
        size = self._size(outputs)
        if size > self.limit_bytes:
            return
        self.entries[key] = outputs
        self.n_bytes += size
        while self.n_bytes > self.limit_bytes:
            _, evicted = self.entries.popitem(last=False)
            self.n_bytes -= self._size(evicted)
            for value in evicted:
                if isinstance(value, torch.Tensor):
                    _poison(value)


_reference_outputs = {kind: ReferenceOutputs(limit) for kind, limit in REFERENCE_CACHE_BYTES.items()}


def _poison(tensor: torch.Tensor) -> None:
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.fill_(float("nan"))
    elif tensor.dtype != torch.bool:
        tensor.fill_(torch.iinfo(tensor.dtype).max)


def poison_blocks_like(outputs, copies: int = POISON_COPIES) -> None:
    """Leave the freed blocks of the outputs' sizes that an allocator hands out next filled with NaN, where a
    candidate's torch.empty would land (instead of a stale answer, e.g. an earlier candidate's output)."""
    blocks = [_empty_like(value) for value in outputs if isinstance(value, torch.Tensor) for _ in range(copies)]
    for block in blocks:
        _poison(block)
    del blocks


def _run_reference(model, inputs) -> list:
    try:
        return flatten(model(*[_clone(v) if isinstance(v, torch.Tensor) else v for v in inputs]))
    except Exception as error:
        raise TaskError(f"reference forward failed: {one_line(error)}") from None


def _model_tensors(model) -> list:
    return ([(f"reference parameter {name}", value) for name, value in model.named_parameters()]
            + [(f"reference buffer {name}", value) for name, value in model.named_buffers()])


def reference_outputs(context, key_suffix, inputs, poison: bool) -> list:
    """The reference's (kept, cached) outputs for these inputs; with `poison`, when the reference runs, the memory
    it wrote its answer to is filled with NaN and freed before returning."""
    key = context.reference_key + key_suffix
    cache = _reference_outputs[context.device.type]
    kept = cache.get(key)
    if kept is not None:
        return kept
    produced = _run_reference(context.reference, inputs)
    kept = [_clone(v) if isinstance(v, torch.Tensor) else v for v in produced]
    if poison:
        owned = _model_tensors(context.reference)
        for value in produced:
            if isinstance(value, torch.Tensor) and guards.aliasing([value], owned) is None:
                _poison(value)
    del produced
    cache.put(key, kept)
    return kept


# ---------------------------------------------------------------- running candidate code

def _exception_chain(error: BaseException):
    seen = []
    while error is not None and len(seen) < 8 and all(error is not other for other in seen):
        seen.append(error)
        error = error.__cause__ or error.__context__
    return seen


def _is_triton_compile_failure(error: BaseException) -> bool:
    module = type(error).__module__
    if module.startswith("triton.compiler"):
        return True
    # the interpreter reports faults of a @triton.jit body as InterpreterError; ptxas and resource failures
    # are failures to build the kernel
    return module.startswith("triton.runtime") and type(error).__name__ in (
        "InterpreterError", "PTXASError", "OutOfResources")


class HarnessOutOfMemory(Exception):
    """Out of memory in the harness's own checks, not in candidate code: answered as a failed request (ok:false),
    so that the run counts an error to retry, never a wrong candidate."""


def _is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.cuda.OutOfMemoryError) or "can't allocate memory" in str(error)


def classify(error: BaseException) -> CandidateFailed:
    chain = _exception_chain(error)
    if any(_is_out_of_memory(link) for link in chain):
        return CandidateFailed("runtime_error", "out of memory: " + one_line(error))
    if any(_is_triton_compile_failure(link) for link in chain):
        return CandidateFailed("compile_error", one_line(error))
    return CandidateFailed("runtime_error", one_line(error))


@dataclasses.dataclass
class Context:
    """What one evaluation holds while it runs."""
    request: EvalRequest
    task: loader.Task
    reference: torch.nn.Module
    reference_key: tuple
    snapshot: guards.Snapshot | None = None
    expected_outputs: list = dataclasses.field(default_factory=list)  # the latest reference outputs
    tainted: bool = False
    flags: list = dataclasses.field(default_factory=list)
    side_streams: list = dataclasses.field(default_factory=list)  # streams other than the caller's, if any
    reference_fingerprints: set = dataclasses.field(default_factory=set)  # one per distinct reference answer
    io_bytes: int | None = None  # inputs, outputs, parameters and buffers: what any implementation must move
    half_rule_used: bool = False  # a trial passed only against the float32 answer (compare_against_float32)

    @property
    def device(self) -> torch.device:
        return self.request.device


def _check_patches(context: Context, when: str) -> None:
    """Rejects (and taints the worker) after candidate code that tried to leave the sandbox or patched what the
    snapshot guards (which is then restored)."""
    violations = fence.take_violations()
    if violations:
        context.tainted = True
        if guards.find_patches(context.snapshot):
            guards.restore(context.snapshot)
        raise Rejected(fence.describe(violations, when))
    patches = guards.find_patches(context.snapshot)
    if patches:
        guards.restore(context.snapshot)
        context.tainted = True
        shown = ", ".join(patches[:5]) + (f" and {len(patches) - 5} more" if len(patches) > 5 else "")
        raise Rejected(f"candidate patched {shown} ({when})")


def _cuda_still_usable(device: torch.device) -> bool:
    if device.type != "cuda":
        return True
    try:
        _synchronize(device)
        return True
    except Exception:
        return False


def run_candidate_code(context: Context, when: str, fn, *args):
    """Run candidate code: its result, or CandidateFailed / Rejected (patching is checked either way)."""
    try:
        with fence.watching():
            result = fn(*args)
            if context.device.type == "cuda":
                _synchronize(context.device)
    except BaseException as error:
        failure = classify(error)
        if _is_out_of_memory(error) and context.device.type == "cuda":
            torch.cuda.empty_cache()
        if not _cuda_still_usable(context.device):
            context.tainted = True
        _check_patches(context, when)
        raise failure from None
    _check_patches(context, when)
    return result


# ---------------------------------------------------------------- one trial

@dataclasses.dataclass
class CallRecord:
    outputs: list
    launches: list
    kernel_records: list | None = None  # the call's GPU kernels (the trace's marker left out)
    trace_problem: str | None = None
    caller_stream: int | None = None  # the trace's id of the stream the harness called on


def _forward(model, inputs, profile: bool):
    caller_stream = None
    with launches.count_launches() as launched:
        if profile:
            result, records, problem = guards.kernel_trace(model, inputs)
            if records is not None:
                caller_stream, records = guards.split_marker(records)
        else:
            result, records, problem = model(*inputs), None, None
    return CallRecord(flatten(result), list(launched), records, problem, caller_stream)


def _call_candidate(context: Context, model, inputs, when: str, profile: bool = False) -> CallRecord:
    poison_blocks_like(context.expected_outputs)
    if profile:
        _synchronize(context.device)
    return run_candidate_code(context, when, _forward, model, inputs, profile)


def _forbidden_storage(context: Context, inputs, references) -> list:
    forbidden = [(f"input {i}", value) for i, value in enumerate(inputs) if isinstance(value, torch.Tensor)]
    forbidden += [(f"reference output {i}", value) for i, value in enumerate(references)
                  if isinstance(value, torch.Tensor)]
    return forbidden + _model_tensors(context.reference)


def _tensor_subclass_output(outputs):
    """Why an output is a tensor subclass (which could override the torch functions the checks use), or None."""
    for index, output in enumerate(outputs):
        if isinstance(output, torch.Tensor) and type(output) not in PLAIN_TENSOR_TYPES:
            return f"output {index} is a {type(output).__qualname__}, not a plain torch.Tensor"
    return None


def _check_call(context: Context, call: CallRecord, inputs, pristine, references, trial: int) -> None:
    if not call.launches:
        raise Rejected(f"no Triton kernel launched in the forward call of trial {trial}")
    subclass = _tensor_subclass_output(call.outputs)
    if subclass is not None:
        raise Rejected(f"{subclass} in trial {trial}")
    modified = guards.modified_input(inputs, pristine)
    if modified is not None:
        raise Rejected(f"candidate modified input {modified} in trial {trial}")
    aliased = guards.aliasing(call.outputs, _forbidden_storage(context, inputs, references))
    if aliased is not None:
        raise Rejected(f"output {aliased[0]} shares storage with {aliased[1]} in trial {trial}")


def _check_streams(context: Context, call: CallRecord, trial: int) -> None:
    """Work the CUDA-event timer on the caller's stream would not wait for. The candidate's own Triton kernels
    must run on the caller's stream (else rejected). Other kernels on other streams (cuDNN runs some
    convolutions on internal streams it joins back) are allowed, but the candidate is then timed with a
    device-wide synchronize around every call, which counts all streams' work (and the launch overhead)."""
    streams = sorted({record.stream for record in call.kernel_records})
    if call.caller_stream is None:  # no marker in the trace: any second stream is refused
        if len(streams) > 1:
            raise Rejected(f"candidate kernels ran on {len(streams)} CUDA streams {streams} in trial {trial}")
        return
    triton = set(call.launches)
    side = sorted({record.stream for record in call.kernel_records if record.stream != call.caller_stream})
    side_triton = sorted({record.stream for record in call.kernel_records
                          if record.name in triton and record.stream != call.caller_stream})
    if side_triton:
        raise Rejected(f"candidate's Triton kernels ran on CUDA streams {side_triton} beside the caller's stream "
                       f"{call.caller_stream} in trial {trial}")
    if side and not context.side_streams:
        context.side_streams = side
        context.flags.append(f"library kernels ran on CUDA streams {side} beside the caller's stream "
                             f"{call.caller_stream}: timed with a device-wide synchronize around every call")


def run_trial(context: Context, model, trial: int, profile: bool) -> tuple:
    """(CallRecord, Comparison) of trial `trial`; raises Rejected / CandidateFailed."""
    inputs = loader.make_inputs(context.task, context.request.seed + trial, context.device)
    pristine = guards.clone_inputs(inputs)
    key = ("trial", context.request.seed + trial)
    candidate_first = trial % 2 == 1
    if candidate_first:
        call = _call_candidate(context, model, inputs, f"trial {trial}", profile)
        references = reference_outputs(context, key, inputs, poison=False)
    else:
        references = reference_outputs(context, key, inputs, poison=True)
        context.expected_outputs = references
        call = _call_candidate(context, model, inputs, f"trial {trial}", profile)
    context.expected_outputs = references
    _check_call(context, call, inputs, pristine, references, trial)
    if call.kernel_records is not None:
        _check_streams(context, call, trial)
    comparison = judge_outputs(context, call.outputs, references, lambda: pristine)
    context.reference_fingerprints.add(fingerprint(references))
    if trial == 0:
        context.io_bytes = _tensor_bytes(pristine) + _tensor_bytes(references) + _tensor_bytes(
            [value for _, value in _model_tensors(context.reference)])
    return call, comparison


def _tensor_bytes(values) -> int:
    return sum(value.numel() * value.element_size() for value in values if isinstance(value, torch.Tensor))


NOISE_FACTOR = 10.0


def _only_relative_l2_failed(comparison: Comparison) -> bool:
    return (not comparison.passed and "rel_l2_err over tol" in comparison.reason
            and "not allclose" not in comparison.reason and "non-finite" not in comparison.reason)


def _reference_in(context: Context, inputs, dtype: torch.dtype) -> list | None:
    """The reference computed again in `dtype` (a copy of the model and the floating inputs cast to it; TF32 off),
    or None where the task cannot run in that dtype."""
    try:
        model = copy.deepcopy(context.reference).to(dtype)
        wide = [value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
                for value in inputs]
        with torch.no_grad(), precision.applied(precision.get("strict")):
            return flatten(model(*wide))
    except Exception:
        return None


def _float64_reference(context: Context, inputs) -> list | None:
    """The reference computed in float64 on the same inputs, or None where the task cannot run in float64."""
    return _reference_in(context, inputs, torch.float64)


def compare_at_noise_floor(context: Context, outputs: list, references: list, inputs, comparison: Comparison):
    """Allclose passed but the relative L2 error did not: decide against float64. A reference that is zero up
    to rounding (the mean of a normalized tensor) makes any relative error noise; the candidate passes when its
    distance to the float64 answer is within tol of that answer or within NOISE_FACTOR times the distance of
    PyTorch's own float32 reference to it. An answer that is merely small (zeros for tiny outputs) stays wrong."""
    exact = _float64_reference(context, inputs)
    if exact is None or len(exact) != len(outputs):
        return comparison
    for out, ref, ref64 in zip(outputs, references, exact):
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            continue
        own_error, error, scale = _distances(ref, ref64)[0], _distances(out, ref64)[0], _norm(ref64)
        if error > max(context.request.tol * scale, NOISE_FACTOR * own_error):
            return comparison
    return Comparison(True, comparison.errors, "")


HALF_MAX_ABS_FACTOR = 2.0  # the worst element may be this much further from float32 than PyTorch's own


def _half_rule_applies(context: Context, comparison: Comparison) -> bool:
    return (context.task.dtype is not None and not comparison.passed
            and "non-finite" not in comparison.reason and "shape" not in comparison.reason)


def _float32_reference(context: Context, inputs) -> list | None:
    """The half-precision reference computed again in float32 from the same (already rounded) parameters and
    inputs: the answer both PyTorch's half result and the candidate approximate."""
    return _reference_in(context, inputs, torch.float32)


def _float64_chunks(*tensors: torch.Tensor):
    """Equally sized tensors, flat, COMPARE_CHUNK_ELEMENTS at a time in float64: no whole float64 copy of an
    output (1_63's is 8.5 GB in float32) is ever made beside the float64 answer."""
    flats = [_flat_real(tensor) for tensor in tensors]
    for start in range(0, flats[0].numel(), COMPARE_CHUNK_ELEMENTS):
        yield [flat[start:start + COMPARE_CHUNK_ELEMENTS].to(torch.float64) for flat in flats]


def _distances(out: torch.Tensor, exact: torch.Tensor) -> tuple:
    """The L2 and the largest elementwise distance of `out` from `exact`, in float64."""
    squares, worst = 0.0, 0.0
    for chunk, answer in _float64_chunks(out, exact):
        diff = (chunk - answer).abs_()
        squares += diff.square().sum().item()
        worst = max(worst, diff.max().item())
    return math.sqrt(squares), worst


def _norm(tensor: torch.Tensor) -> float:
    return math.sqrt(sum(chunk.square().sum().item() for (chunk,) in _float64_chunks(tensor)))


def compare_against_float32(context: Context, outputs: list, references: list, inputs, comparison: Comparison):
    """At bf16/fp16, a candidate that is not close to PyTorch's half-precision output may be closer to the true
    answer than that output is: PyTorch rounds every intermediate to the half type (and some of its kernels, such
    as CUDA's half cumsum, accumulate in it), while a fused kernel rounds once. Both are measured against the
    float32 answer on the same rounded parameters and inputs; the candidate passes when, for every floating
    output, it is at least as accurate as PyTorch's half result in L2 (and its worst element within
    HALF_MAX_ABS_FACTOR of PyTorch's worst) and within tol of that answer in relative L2. The pass is flagged
    (KernelBench's own rule compares with the half output only), so a count by that rule stays possible."""
    exact = _float32_reference(context, inputs)
    if exact is None or len(exact) != len(outputs):
        return comparison
    notes = []
    for out, ref, ref32 in zip(outputs, references, exact):
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            continue
        own_l2, own_max = _distances(ref, ref32)
        l2, worst = _distances(out, ref32)
        scale = _norm(ref32)
        if l2 > own_l2 or worst > HALF_MAX_ABS_FACTOR * own_max or l2 > context.request.tol * scale:
            return comparison
        notes.append(f"L2 error {l2:.3g} against PyTorch's {own_l2:.3g}, worst {worst:.3g} against {own_max:.3g}")
    flag = ("half-precision check passed against the float32 answer, not KernelBench's rule (" + comparison.reason
            + "; against float32: " + "; ".join(notes) + ")")
    if not any(existing.startswith("half-precision check passed") for existing in context.flags):
        context.flags.append(flag)
    context.half_rule_used = True
    return Comparison(True, comparison.errors, "")


def judge_outputs(context: Context, outputs: list, references: list, inputs_of, elementwise: bool = True):
    """The one verdict on a call's outputs, shared by evaluate's trials, its robust trial and screen: KernelBench's
    check at tol (compare_outputs), then where it failed the two second looks, each on the inputs the call was
    given (`inputs_of()`, asked for only when one is needed): the float64 noise floor when only the relative L2
    error failed (compare_at_noise_floor), and at bf16/fp16 the float32 answer (compare_against_float32, which
    marks `context`). `context` needs request.tol, task, reference, flags and half_rule_used."""
    comparison = compare_outputs(outputs, references, context.request.tol, elementwise)
    if _only_relative_l2_failed(comparison):
        comparison = compare_at_noise_floor(context, outputs, references, inputs_of(), comparison)
    if _half_rule_applies(context, comparison):
        comparison = compare_against_float32(context, outputs, references, inputs_of(), comparison)
    return comparison


def fingerprint(outputs: list) -> tuple:
    """A cheap identity of a list of outputs: shapes, dtypes, float64 sums and a few elements. Two different
    answers share one only by a coincidence no task produces (used to spot a reference that never changes)."""
    parts = []
    for value in outputs:
        if not isinstance(value, torch.Tensor):
            parts.append(("value", repr(value)))
            continue
        flat = _flat_real(value)
        wide = flat.to(torch.float64) if flat.is_floating_point() else flat.to(torch.int64).to(torch.float64)
        ends = torch.cat([wide[:FINGERPRINT_ELEMENTS], wide[-FINGERPRINT_ELEMENTS:]]) if flat.numel() else wide
        parts.append((tuple(value.shape), str(value.dtype), wide.nansum().item(), wide.abs().nansum().item(),
                      tuple(ends.tolist())))
    return tuple(parts)


def robust_inputs(task: loader.Task, seed: int, device: torch.device) -> list:
    """Trial inputs for seed + 1000 with every floating tensor replaced by torch.randn_like (same RNG stream)."""
    inputs = loader.make_inputs(task, seed + ROBUST_SEED_OFFSET, device)
    return [torch.randn_like(value) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
            for value in inputs]


def _failed_robust_trial(reason: str) -> dict:
    return {"correct": False, "max_abs_err": None, "max_rel_err": None, "rel_l2_err": None, "reason": reason}


def run_robust_trial(context: Context, model) -> dict:
    inputs = robust_inputs(context.task, context.request.seed, context.device)
    references = reference_outputs(context, ("robust", context.request.seed), inputs, poison=True)
    context.expected_outputs = references
    try:
        outputs = _call_candidate(context, model, inputs, "robust trial").outputs
    except CandidateFailed as failure:
        return _failed_robust_trial(f"{failure.status}: {failure.reason}")
    subclass = _tensor_subclass_output(outputs)
    if subclass is not None:
        return _failed_robust_trial(subclass)
    comparison = judge_outputs(context, outputs, references, lambda: inputs, elementwise=False)
    return {"correct": comparison.passed, **dataclasses.asdict(comparison.errors), "reason": comparison.reason}


# ---------------------------------------------------------------- variants of the configuration

def _variant(applicable: bool, correct: bool, reason: str, max_abs_err=None) -> dict:
    return {"applicable": applicable, "correct": correct, "reason": reason, "max_abs_err": max_abs_err}


def _variant_check(context: Context, module, build, what: str) -> dict:
    """Reference and candidate built by `build(model_class)`, compared on trial 0's inputs. Not applicable where
    the task's own Model cannot be built or run so."""
    inputs = loader.make_inputs(context.task, context.request.seed, context.device)
    try:
        reference = build(context.task.Model)
        with torch.no_grad():
            expected = flatten(reference(*[_clone(v) if isinstance(v, torch.Tensor) else v for v in inputs]))
    except Exception as error:
        return _variant(False, True, f"the task's Model does not run {what}: {one_line(error)}")
    del reference
    try:
        model = run_candidate_code(context, f"ModelNew {what}", build, module.ModelNew)
        outputs = _call_candidate(context, model, inputs, f"forward {what}").outputs
    except CandidateFailed as failure:
        return _variant(True, False, f"{what}: {failure.status}: {failure.reason}")
    comparison = compare_outputs(outputs, expected, context.request.tol)
    reason = f"{what}: {comparison.reason}" if not comparison.passed else ""
    return _variant(True, comparison.passed, reason, comparison.errors.max_abs_err)


def check_variants(context: Context, module) -> dict:
    """ModelNew against Model when both are built from other init arguments (every float one changed) and when
    every plain float attribute of both is changed after construction: a value baked into a kernel fails."""
    task, device, init_seed = context.task, context.device, context.request.init_seed
    init_inputs = variants.float_init_variant(list(task.get_init_inputs()))
    if init_inputs is None:
        init_check = _variant(False, True, "no float init argument")
    else:
        init_check = _variant_check(
            context, module, lambda cls: loader.build_model(cls, task, device, init_seed, init_inputs),
            f"with init arguments {init_inputs!r}")
    names = variants.float_attributes(context.reference)
    if not names:
        attribute_check = _variant(False, True, "no float attribute")
    else:
        attribute_check = _variant_check(
            context, module,
            lambda cls: variants.change_float_attributes(loader.build_model(cls, task, device, init_seed), names),
            f"with the attributes {', '.join(names)} changed after construction")
    return {"init_arguments": init_check, "attributes": attribute_check}


# ---------------------------------------------------------------- the whole evaluation

def _empty_result(request: EvalRequest) -> dict:
    return {
        "status": "ok", "reason": "", "correct": False, "trials": request.trials, "trials_passed": 0,
        "max_abs_err": None, "max_rel_err": None, "rel_l2_err": None, "tol": request.tol, "robust": None,
        "time_ms": {"candidate": None}, "triton_launches": 0, "triton_kernels": [], "triton_time_share": None,
        "kernel_times": [], "flags": [], "worker_tainted": False, "vacuous": False, "float32_answer": False, "io_bytes": None, "variants": None,
    }


def _unique(names) -> list:
    return list(dict.fromkeys(names))


def _import_candidate(context: Context):
    try:
        with fence.watching():
            module = loader.load_candidate(context.request.candidate)
    except CandidateError as error:
        _check_patches(context, "import")
        raise CandidateFailed("compile_error", str(error)) from None
    _check_patches(context, "import")
    return module


def _build_candidate(context: Context, module):
    return run_candidate_code(context, "ModelNew construction", loader.build_model, module.ModelNew,
                              context.task, context.device, context.request.init_seed)


def _record_launches(result: dict, call: CallRecord) -> None:
    result["triton_launches"] = len(call.launches)
    result["triton_kernels"] = _unique(call.launches)


def _warm_call(context: Context, model) -> CallRecord:
    """One more call on the inputs of trial 0, for a launch count of a warm call when there was a single trial."""
    inputs = loader.make_inputs(context.task, context.request.seed, context.device)
    call = _call_candidate(context, model, inputs, "warm call")
    if not call.launches:
        raise Rejected("no Triton kernel launched in the warm forward call")
    return call


def _run_trials(context: Context, model, result: dict) -> None:
    errors = Errors()
    failures = []
    request = context.request
    for trial in range(request.trials):
        profile = context.device.type == "cuda" and trial == request.trials - 1
        call, comparison = run_trial(context, model, trial, profile)
        errors.merge(comparison.errors)
        if comparison.passed:
            result["trials_passed"] += 1
        else:
            failures.append(f"trial {trial} {comparison.reason}")
        _record_launches(result, call)
        if call.kernel_records is not None:
            result["triton_time_share"] = guards.triton_time_share(call.kernel_records, call.launches)
            result["kernel_times"] = guards.kernel_times(call.kernel_records, call.launches)
        if call.trace_problem is not None:
            context.flags.append(f"side-stream check skipped, no kernel trace: {call.trace_problem}")
    result.update(dataclasses.asdict(errors))
    result["float32_answer"] = context.half_rule_used
    if request.trials > 1 and len(context.reference_fingerprints) == 1:
        result["vacuous"] = True
        context.flags.append(f"vacuous: the reference output was the same for all {request.trials} trials' "
                             "inputs, so the trials cannot tell a right kernel from a constant one")
    if failures:
        result["status"], result["reason"] = "mismatch", failures[0]
    elif request.trials == 1:
        _record_launches(result, _warm_call(context, model))


# A dynamic-batch candidate is also checked at these batches (those within its range), the task's own aside:
# one, an odd one below a tile of 4 and one past 16 rows, and the range's top.
DYNAMIC_BATCHES = (1, 3, 17)


def dynamic_batches(batch_max: int, example: int) -> list:
    """The batches a dynamic-batch candidate is checked (and on a GPU timed) at: DYNAMIC_BATCHES within its range
    and the range's top (batch_max, 0: the task's own batch `example`)."""
    top = batch_max or example
    return sorted({b for b in DYNAMIC_BATCHES if b <= top} | {top})


def dynamic_points(dynamic: tuple, inputs: list) -> list:
    """The points (one size per dynamic dimension, in `dynamic`'s order) a dynamic candidate is checked and timed
    at, `inputs` the task's own: for one size, dynamic_batches'; for several, each size's list walked side by
    side (the shorter held at its top), then each size at 1 with the others at their tops."""
    lists = [dynamic_batches(batch_max, loader.example_batch(inputs, dim)) for dim, batch_max in dynamic]
    if len(lists) == 1:
        return [(size,) for size in lists[0]]
    points = {tuple(sizes[min(j, len(sizes) - 1)] for sizes in lists) for j in range(max(map(len, lists)))}
    for i in range(len(lists)):
        points.add(tuple(1 if k == i else sizes[-1] for k, sizes in enumerate(lists)))
    return sorted(points)


def point_text(dynamic: tuple, point: tuple) -> str:
    """One point in messages: "batch 3", "dim 1 size 3", "sizes 3x5"."""
    if len(point) == 1:
        return loader.dim_at(dynamic[0][0], point[0])
    return "sizes " + "x".join(map(str, point))


def point_entry(point: tuple) -> dict:
    """A point's key in by_batch rows: {"batch": 3} for one dynamic size, {"sizes": [3, 5]} for several."""
    return {"batch": point[0]} if len(point) == 1 else {"sizes": list(point)}


def point_inputs(task, seed: int, device, dynamic: tuple, point: tuple) -> list:
    return loader.make_sized_inputs(task, seed, device, [(dim, size) for (dim, _), size in zip(dynamic, point)])


def _run_batch_trials(context: Context, model, result: dict) -> list:
    """A dynamic candidate at other sizes (dynamic_points, inputs from loader.make_sized_inputs): each must launch
    its kernels (no fallback to the task's forward inside the range) and pass the trials' comparison. Returns the
    points checked."""
    request = context.request
    checked = []
    points = dynamic_points(request.dynamic, loader.make_inputs(context.task, request.seed, context.device))
    for index, point in enumerate(points):
        seed = request.seed + BATCH_SEED_OFFSET + index
        inputs = point_inputs(context.task, seed, context.device, request.dynamic, point)
        pristine = guards.clone_inputs(inputs)
        references = reference_outputs(context, ("batch", request.dynamic, point, seed), inputs, poison=True)
        context.expected_outputs = references
        where = point_text(request.dynamic, point)
        call = _call_candidate(context, model, inputs, where)
        _check_call(context, call, inputs, pristine, references, f"{index} at {where}")
        comparison = judge_outputs(context, call.outputs, references, lambda: pristine)
        checked.append(point)
        if not comparison.passed:
            result["status"], result["reason"] = "mismatch", f"{where}: {comparison.reason}"
            break
    result["batch_sizes"] = [point[0] if len(point) == 1 else list(point) for point in checked]
    dims = [dim for dim, _ in request.dynamic]
    if len(dims) > 1:
        result["batch_dims"] = dims
    elif dims[0]:
        result["batch_dim"] = dims[0]
    return checked


def _time_candidate(context: Context, model, inputs=None, when: str = "timing") -> dict:
    """The candidate timed on `inputs` (default: the request seed's), under the fence as every call of it."""
    if inputs is None:
        inputs = loader.make_inputs(context.task, context.request.seed, context.device)
    timer = timing.time_cuda_synchronized if context.side_streams else timing.time_cuda
    return run_candidate_code(context, when, timer, model, inputs, context.request.timing, context.device)


def _time_batches(context: Context, model, points: list) -> list:
    """A dynamic candidate timed at each point it was checked at (on inputs of the request's seed there, as the
    baseline op times the task's Model on): [{batch or sizes, time_ms}]. The C++ side divides the baseline op's
    times at each point by these (harness/baselines.cpp, AddSpeedups)."""
    request = context.request
    return [{**point_entry(point),
             "time_ms": _time_candidate(context, model,
                                        point_inputs(context.task, request.seed, context.device, request.dynamic,
                                                     point),
                                        f"timing at {point_text(request.dynamic, point)}")}
            for point in points]


def _time_candidate_cpu_wall(context: Context, model) -> dict:
    inputs = loader.make_inputs(context.task, context.request.seed, context.device)
    return run_candidate_code(context, "timing", timing.time_cpu_wall, model, inputs, context.request.timing)


def _evaluate(context: Context, result: dict) -> None:
    module = _import_candidate(context)
    try:
        model = _build_candidate(context, module)
        _run_trials(context, model, result)
        points = []
        if result["status"] == "ok" and context.request.dynamic:
            points = _run_batch_trials(context, model, result)
        if result["status"] != "ok":
            return
        result["correct"] = True
        if context.request.robust_trial:
            result["robust"] = run_robust_trial(context, model)
        if context.request.variants:
            result["variants"] = check_variants(context, module)
            failed = [check["reason"] for check in result["variants"].values() if not check["correct"]]
            if failed:
                result.update(status="mismatch", correct=False, reason=failed[0])
                return
        if context.device.type == "cuda" and context.request.timing.enabled:
            result["time_ms"]["candidate"] = _time_candidate(context, model)
            if points:
                result["by_batch"] = _time_batches(context, model, points)
        elif context.request.timing.enabled and context.request.timing.cpu_wall:
            result["time_ms"]["candidate"] = _time_candidate_cpu_wall(context, model)
        _check_patches(context, "end of evaluation")
    finally:
        loader.forget(module)


def _started_by_torch(thread: threading.Thread) -> bool:
    """torch's own helpers (inductor's compile-worker timer, started lazily after a torch.compile baseline)."""
    target = getattr(thread, "_target", None)
    module = getattr(target, "__module__", None) or ""
    return module == "torch" or module.startswith("torch.")


def _flag_new_threads(context: Context, threads_before: set) -> None:
    """A thread the candidate left running could change state while the harness checks: flag it, restart."""
    new_threads = [thread for thread in threading.enumerate()
                   if thread not in threads_before and thread.is_alive() and not _started_by_torch(thread)]
    if new_threads:
        names = ", ".join(thread.name for thread in new_threads[:3])
        context.flags.append(f"candidate left {len(new_threads)} Python threads running ({names})")
        context.tainted = True


EVALUATE_PROCESS = ("egg's worker (python -m egg_worker, one long-lived process per GPU): the candidate timed right "
                    "after its correctness trials; the baselines timed once per task and settings, by the worker "
                    "that evaluated its first candidate, before that candidate")


def timing_protocol(request: EvalRequest, result: dict) -> dict:
    """The `timing_protocol` of this evaluation (timing.protocol): the candidate ran under the worker's setting; the
    C++ side adds the baselines' (they come from the `baseline` op)."""
    stats = result["time_ms"]["candidate"]
    timer = "none" if stats is None else stats.get("timer", timing.CUDA_EVENTS_TIMER)
    precisions = {"candidate": timing.precision_name()}
    if request.precision != "fp32":
        precisions["dtype"] = request.precision  # the task's inputs and both models cast to it
    return timing.protocol(request.timing, request.device, timer, EVALUATE_PROCESS, request.seed, request.init_seed,
                           precisions)


def _fail(result: dict, status: str, reason: str) -> None:
    result.update(status=status, reason=reason, correct=False)


def end_stray_processes(processes_before: set) -> str | None:
    """Kill what candidate code left running since `processes_before` (fence.descendants()); the reason, or None."""
    strays = fence.stray_processes(processes_before)
    if not strays:
        return None
    fence.kill(strays)
    return fence.describe_strays(strays)


def handle_evaluate(request: dict) -> dict:
    parsed = parse_request(request)
    result = _empty_result(parsed)
    with torch.no_grad():
        task = loader.load_task(parsed.task, parsed.precision)
        reference = loader.reference_model(task, parsed.device, parsed.init_seed)
        launches.install()
        context = Context(parsed, task, reference, (task.path, task.sha256, str(parsed.device), parsed.init_seed,
                                                  str(task.dtype)))
        context.snapshot = guards.take_snapshot(extra=[task.module, task.Model])
        threads_before = set(threading.enumerate())
        processes_before = fence.descendants()
        for attempt in (1, 2):
            no_memory = None
            try:
                _evaluate(context, result)
            except Rejected as rejection:
                _fail(result, "rejected", str(rejection))
            except CandidateFailed as failure:
                _fail(result, failure.status, failure.reason)
            except RequestError:
                raise
            except Exception as error:  # raised by the checks on what the candidate returned
                if _is_out_of_memory(error):  # the harness's own work did not fit: no verdict on the candidate
                    no_memory = HarnessOutOfMemory(f"the harness ran out of memory checking a candidate's outputs "
                                                   f"(other workers on the GPU? fewer per GPU): {one_line(error)}")
                _fail(result, "runtime_error", f"checking the candidate's outputs failed: {one_line(error)}")
                if guards.find_patches(context.snapshot):
                    guards.restore(context.snapshot)
                    context.tainted = True
            if no_memory is None or attempt == 2 or context.tainted:
                break
            # Once more from the start with the allocator's cached blocks given back: a worker sharing the GPU
            # often has the memory reserved but unallocated (fragmented), not used.
            gc.collect()
            if parsed.device.type == "cuda":
                torch.cuda.empty_cache()
            result = _empty_result(parsed)
    _flag_new_threads(context, threads_before)
    strays = end_stray_processes(processes_before)
    if strays is not None:
        context.tainted = True
        if result["status"] != "rejected":
            _fail(result, "rejected", strays)
    if no_memory is not None:
        gc.collect()
        if parsed.device.type == "cuda":
            torch.cuda.empty_cache()
        raise no_memory
    result["flags"] = context.flags
    result["worker_tainted"] = context.tainted
    result["io_bytes"] = context.io_bytes
    result["timing_protocol"] = timing_protocol(parsed, result)
    # On the GPU, the candidate's reference cycles and the CUDA memory they hold go before the next request; on the
    # CPU, Python's own collections see to them (a full one here took 0.2 s once capture's imports are in).
    if parsed.device.type == "cuda":
        gc.collect()
    return result
