"""Exploit defences that do not depend on how an evaluation is sequenced.

- `take_snapshot` / `find_patches` / `restore`: identity snapshot of the functions a candidate could replace to
  fool the harness (torch, torch.Tensor, torch.cuda, torch.cuda.Event, torch.nn.functional, torch.nn.Module,
  time, builtins, triton.testing, triton's launch classes, json/os/struct/math/numpy, every egg_worker module and
  its classes, plus caller-given namespaces) and of the TF32/cuDNN flags. In modules only callables, classes and
  submodules are compared and additions are ignored (importing a submodule adds attributes legitimately); in
  classes every entry counts, additions included.
- `clone_inputs` / `modified_input`: bitwise check that a call left its inputs as they were.
- `aliasing`: an output whose storage overlaps the storage of a tensor it must not share memory with.
- `kernel_trace`: run a call under torch.profiler (CUDA) and read each GPU kernel's name, stream and duration,
  with a marker kernel launched first on the caller's stream so that the trace names that stream.
"""

import builtins
import dataclasses
import json
import math
import os
import struct
import sys
import tempfile
import time
import types
import warnings

import numpy
import torch
import torch.nn.functional

_equal = torch.equal
_clone = torch.Tensor.clone

_ABSENT = object()

FLAG_PATHS = (
    "torch.backends.cuda.matmul.allow_tf32",
    "torch.backends.cuda.matmul.fp32_precision",
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "torch.backends.cudnn.allow_tf32",
    "torch.backends.cudnn.fp32_precision",
    "torch.backends.cudnn.enabled",
    "torch.backends.cudnn.benchmark",
    "torch.backends.cudnn.deterministic",
    "torch.backends.fp32_precision",
)
# restored in this order: the legacy TF32 switches last, so that they win over the fp32_precision settings
_FLAG_RESTORE_ORDER = tuple(path for path in FLAG_PATHS if not path.endswith(".allow_tf32")) + (
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32")
_MATMUL_PRECISION = "torch.get_float32_matmul_precision()"


@dataclasses.dataclass
class _Namespace:
    label: str
    owner: object
    is_class: bool
    entries: dict


@dataclasses.dataclass
class Snapshot:
    namespaces: list
    flags: dict


def _settle_lazy_patches() -> None:
    # torch._dynamo wraps torch.manual_seed when first imported; import it before any snapshot so that a candidate
    # that happens to import it first is not taken for a patcher
    import torch._dynamo  # noqa: F401


def _module_namespaces():
    import triton.testing

    modules = [torch, torch.cuda, torch.nn.functional, time, builtins, triton.testing, json, os, struct, math, numpy]
    modules += [module for name, module in sorted(sys.modules.items()) if name.split(".")[0] == "egg_worker"]
    return modules


def _class_namespaces(modules):
    from egg_worker import launches

    classes = [torch.Tensor, torch.cuda.Event, torch.nn.Module] + launches.launch_classes()
    for module in modules:
        if module.__name__.split(".")[0] == "egg_worker":
            classes += [value for value in vars(module).values()
                        if isinstance(value, type) and value.__module__ == module.__name__]
    return classes


def _is_guarded_value(value) -> bool:
    return callable(value) or isinstance(value, types.ModuleType)


def _label(owner) -> str:
    if isinstance(owner, types.ModuleType):
        return owner.__name__
    return f"{owner.__module__}.{owner.__qualname__}"


def _snapshot_namespace(owner) -> _Namespace:
    is_class = isinstance(owner, type)
    entries = dict(vars(owner))
    if not is_class:
        entries = {name: value for name, value in entries.items() if _is_guarded_value(value)}
    return _Namespace(_label(owner), owner, is_class, entries)


def _read_path(path: str):
    owner_path, _, name = path.rpartition(".")
    owner = sys.modules.get(owner_path) or _resolve(owner_path)
    try:
        return getattr(owner, name, _ABSENT)
    except Exception as error:  # torch refuses to read allow_tf32 after a mix of the legacy and new TF32 APIs
        return f"unreadable ({type(error).__name__})"


def _resolve(dotted: str):
    head, *rest = dotted.split(".")
    value = sys.modules[head]
    for name in rest:
        value = getattr(value, name)
    return value


def _read_flags() -> dict:
    flags = {path: _read_path(path) for path in FLAG_PATHS}
    flags[_MATMUL_PRECISION] = torch.get_float32_matmul_precision()
    return flags


def take_snapshot(extra=()) -> Snapshot:
    """Snapshot the guarded namespaces (plus `extra` modules or classes) and the numeric flags."""
    _settle_lazy_patches()
    modules = _module_namespaces()
    owners = modules + _class_namespaces(modules) + list(extra)
    return Snapshot([_snapshot_namespace(owner) for owner in owners], _read_flags())


def _namespace_changes(namespace: _Namespace) -> list:
    current = vars(namespace.owner)
    changes = [f"{namespace.label}.{name}" for name, value in namespace.entries.items()
               if current.get(name, _ABSENT) is not value]
    if namespace.is_class:
        changes += [f"{namespace.label}.{name} (added)" for name in current if name not in namespace.entries]
    return changes


def find_patches(snapshot: Snapshot) -> list:
    """Names of everything that differs from the snapshot, in snapshot order."""
    changes = []
    for namespace in snapshot.namespaces:
        changes += _namespace_changes(namespace)
    current_flags = _read_flags()
    changes += [path for path, value in snapshot.flags.items() if current_flags[path] != value]
    return changes


def _restore_namespace(namespace: _Namespace) -> None:
    current = vars(namespace.owner)
    for name, value in namespace.entries.items():
        if current.get(name, _ABSENT) is not value:
            setattr(namespace.owner, name, value)
    if namespace.is_class:
        for name in [name for name in current if name not in namespace.entries]:
            delattr(namespace.owner, name)


def _restore_flags(flags: dict) -> None:
    """Set back the flags that differ (best effort: a tainted worker is restarted by the C++ side anyway)."""
    if torch.get_float32_matmul_precision() != flags[_MATMUL_PRECISION]:
        torch.set_float32_matmul_precision(flags[_MATMUL_PRECISION])
    for path in _FLAG_RESTORE_ORDER:
        value = flags[path]
        if value is _ABSENT or isinstance(value, str) and value.startswith("unreadable") or _read_path(path) == value:
            continue
        owner_path, _, name = path.rpartition(".")
        try:
            setattr(_resolve(owner_path), name, value)
        except Exception:
            pass


def restore(snapshot: Snapshot) -> None:
    for namespace in snapshot.namespaces:
        _restore_namespace(namespace)
    _restore_flags(snapshot.flags)


def clone_inputs(inputs) -> list:
    """Detached clones of the tensor inputs (None for the others), for `modified_input`."""
    return [_clone(value.detach()) if isinstance(value, torch.Tensor) else None for value in inputs]


def _same_bits(tensor: torch.Tensor, reference: torch.Tensor) -> bool:
    if tensor.shape != reference.shape or tensor.dtype != reference.dtype or tensor.device != reference.device:
        return False
    if tensor.numel() == 0:
        return True
    as_bytes = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    return _equal(as_bytes, reference.contiguous().reshape(-1).view(torch.uint8))


def modified_input(inputs, clones):
    """Index of the first tensor input whose shape, dtype or bits differ from its clone, else None."""
    for index, (value, clone) in enumerate(zip(inputs, clones)):
        if clone is not None and not _same_bits(value, clone):
            return index
    return None


def _storage_span(tensor: torch.Tensor):
    storage = tensor.untyped_storage()
    start = storage.data_ptr()
    return tensor.device, start, start + storage.nbytes()


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    device_a, start_a, end_a = _storage_span(a)
    device_b, start_b, end_b = _storage_span(b)
    if device_a != device_b or start_a == end_a or start_b == end_b:
        return False
    return start_a < end_b and start_b < end_a


def aliasing(outputs, forbidden):
    """(output index, label) of the first output sharing storage with a tensor of `forbidden`
    (a list of (label, tensor)), else None."""
    for index, output in enumerate(outputs):
        if not isinstance(output, torch.Tensor):
            continue
        for label, tensor in forbidden:
            if _overlaps(output, tensor):
                return index, label
    return None


@dataclasses.dataclass
class KernelRecord:
    name: str
    stream: int
    duration_us: float
    start_us: float = 0.0


def _kernel_records(trace_path: str) -> list:
    """The trace's GPU kernels in order of start time."""
    with open(trace_path, encoding="utf-8") as trace_file:
        trace = json.load(trace_file)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    records = [KernelRecord(str(event.get("name", "")), int(event.get("args", {}).get("stream", -1)),
                            float(event.get("dur", 0.0)), float(event.get("ts", 0.0)))
               for event in events if event.get("cat") == "kernel"]
    return sorted(records, key=lambda record: record.start_us)


MARKER_KERNEL = "FillFunctor"  # the kernel of Tensor.fill_, launched by kernel_trace before the call
_markers: dict = {}


def _launch_marker() -> None:
    device = torch.cuda.current_device()
    if device not in _markers:
        _markers[device] = torch.empty(1, dtype=torch.float32, device=torch.device("cuda", device))
    _markers[device].fill_(1.0)


def split_marker(records: list) -> tuple:
    """(the caller's stream, the other records): the first fill kernel of a kernel_trace is its marker, run on
    the caller's stream before the call. (None, records) when no marker is in the trace."""
    for index, record in enumerate(records):
        if MARKER_KERNEL in record.name:
            return record.stream, records[:index] + records[index + 1:]
    return None, records


def _quietly(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler warns about cycles we do not use
        return fn(*args)


def _start_profiler():
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    profiler = torch.profiler.profile(activities=activities)
    _quietly(profiler.start)
    return profiler


def _export_records(profiler) -> list:
    descriptor, trace_path = tempfile.mkstemp(prefix="egg_trace_", suffix=".json")
    os.close(descriptor)
    try:
        _quietly(profiler.export_chrome_trace, trace_path)
        return _kernel_records(trace_path)
    finally:
        os.unlink(trace_path)


def _problem(error: Exception) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:300]


def kernel_trace(fn, args):
    """Call fn(*args) under torch.profiler with CUDA activity: (its result, list of KernelRecord, None), or
    (its result, None, problem) when the profiler could not start or deliver a trace."""
    try:
        profiler = _start_profiler()
    except Exception as error:
        return fn(*args), None, _problem(error)
    try:
        _launch_marker()
        result = fn(*args)
        torch.cuda.synchronize()
    finally:
        try:
            _quietly(profiler.stop)
        except Exception:
            pass  # reported below as a missing trace
    try:
        return result, _export_records(profiler), None
    except Exception as error:
        return result, None, _problem(error)


KERNEL_TIMES_KEPT = 12  # kernels named in an evaluation's kernel_times; the rest summed into one entry
KERNEL_NAME_CHARS = 120  # library kernels' mangled names are long: their head says what they are


def kernel_times(records, triton_names, kept: int = KERNEL_TIMES_KEPT) -> list:
    """The traced call's GPU time per kernel name, the longest first: [{name, launches, us, share, triton}],
    `triton` where a launched Triton kernel has that name (a library kernel, a copy or a fill otherwise). Beyond
    the `kept` longest, one entry "(N other kernels)" sums the rest. Empty when the trace has no kernel time."""
    total_us = sum(record.duration_us for record in records)
    if total_us <= 0:
        return []
    names = set(triton_names)
    by_name: dict = {}
    for record in records:
        entry = by_name.setdefault(record.name, [0, 0.0])
        entry[0] += 1
        entry[1] += record.duration_us
    ordered = sorted(by_name.items(), key=lambda item: (-item[1][1], item[0]))

    def entry(name, launches, us, triton):
        return {"name": name[:KERNEL_NAME_CHARS], "launches": launches, "us": round(us, 3),
                "share": round(us / total_us, 4), "triton": triton}

    times = [entry(name, launches, us, name in names) for name, (launches, us) in ordered[:kept]]
    rest = ordered[kept:]
    if rest:
        times.append(entry(f"({len(rest)} other kernels)", sum(launches for _, (launches, _) in rest),
                           sum(us for _, (_, us) in rest), False))
    return times


def triton_time_share(records, triton_names) -> float | None:
    """Share of the total kernel time spent in kernels named after launched Triton kernels (None: no kernels)."""
    total_us = sum(record.duration_us for record in records)
    if total_us <= 0:
        return None
    names = set(triton_names)
    return sum(record.duration_us for record in records if record.name in names) / total_us
