"""Loading a KernelBench task file and a candidate file as fresh, uniquely named modules, and building models.

`load_task(path)` -> Task (module, content hash), cached per (path, content hash); raises TaskError for an
unusable task. A `.pt2` path (a torch.export program) is loaded as the task file egg_worker.program writes for it. `load_candidate(path)` -> the candidate module, or raises CandidateError with a one-line reason (the
import failed, or it defines no ModelNew). The file's directory is on sys.path only while it is imported.
`build_model` builds a model KernelBench-style (seeded, under the device context, moved, eval);
`reference_model` caches the task's Model per (task, device, init_seed, dtype). `make_inputs` builds a trial's inputs.
A task loaded at a half precision (`load_task(path, "bf16")`, KernelBench's manner) casts its models' floating
parameters and buffers and the floating tensors of its inputs and init inputs to that dtype.
"""

import dataclasses
import hashlib
import importlib.util
import itertools
import os
import sys
import types
from collections import OrderedDict

import torch

from egg_worker import program

MAX_CACHED_TASKS = 8

_module_numbers = itertools.count()

TASK_NAMES = ("Model", "get_inputs", "get_init_inputs")

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


class RequestError(Exception):
    """The request cannot be served as asked (answered ok:false)."""


class TaskError(RequestError):
    """The task file or its reference model is unusable (the request is bad, not the candidate)."""


class CandidateError(Exception):
    """The candidate could not be imported or has no ModelNew; str() is the one-line reason."""


ONE_LINE_HEAD = 160


def one_line(error: BaseException, limit: int = 500) -> str:
    """'Type: message' on one line, at most `limit` characters. A longer one keeps its head and its tail, where
    Triton's CompilationError puts the actual error after the source excerpt."""
    message = " ".join(str(error).split())
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    if len(text) <= limit:
        return text
    head = min(ONE_LINE_HEAD, limit // 3)
    return text[:head] + " ... " + text[len(text) - (limit - head - 5):]


@dataclasses.dataclass
class Task:
    path: str
    sha256: str
    module: object
    source: str = ""  # the task's Python source, which candidates embed
    dtype: torch.dtype | None = None  # a half precision: floating inputs, parameters and buffers cast to it

    @property
    def Model(self):
        return self.module.Model

    def get_inputs(self):
        return self.module.get_inputs()

    def get_init_inputs(self):
        return self.module.get_init_inputs()


def file_sha256(path: str) -> str:
    with open(path, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def import_fresh(path: str, prefix: str):
    """Execute `path` as a new module named `<prefix>_<n>`, registered in sys.modules."""
    name = f"{prefix}_{next(_module_numbers)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        sys.path.remove(directory)
    return module


def forget(module) -> None:
    sys.modules.pop(module.__name__, None)


class _BoundedCache:
    """The most recently stored `capacity` entries of a dict; `on_evict` sees each value dropped."""

    def __init__(self, capacity: int, on_evict=None):
        self.capacity = capacity
        self.on_evict = on_evict
        self.entries = OrderedDict()

    def get(self, key):
        return self.entries.get(key)

    def put(self, key, value) -> None:
        self.entries[key] = value
        while len(self.entries) > self.capacity:
            _, evicted = self.entries.popitem(last=False)
            if self.on_evict is not None:
                self.on_evict(evicted)


_tasks = _BoundedCache(MAX_CACHED_TASKS, on_evict=lambda task: forget(task.module))
_reference_models = _BoundedCache(MAX_CACHED_TASKS)


def precision_name(precision) -> str:
    """A request's `precision` checked: fp32 (the default, also for None), bf16 or fp16; RequestError otherwise."""
    name = "fp32" if precision is None else precision
    if not isinstance(name, str) or name not in PRECISIONS:
        raise RequestError(f"precision must be one of {', '.join(PRECISIONS)}, not {name!r}")
    return name


def load_task(path: str, precision: str | None = None) -> Task:
    if not os.path.isfile(path):
        raise TaskError(f"task file not found: {path}")
    dtype = PRECISIONS[precision_name(precision)]
    sha256 = file_sha256(path)
    key = (os.path.abspath(path), sha256)
    if _tasks.get(key) is None:
        _tasks.put(key, _import_task(path, sha256))
    task = _tasks.get(key)
    return task if dtype is None else dataclasses.replace(task, dtype=dtype)


def _import_task(path: str, sha256: str) -> Task:
    if program.is_program_path(path):
        return _import_program_task(path)
    try:
        module = import_fresh(path, "egg_task")
    except BaseException as error:
        raise TaskError(f"task import failed: {one_line(error)}") from None
    missing = [name for name in TASK_NAMES if not hasattr(module, name)]
    if missing:
        forget(module)
        raise TaskError(f"task {path} lacks {', '.join(missing)}")
    return Task(os.path.abspath(path), sha256, module)


def _import_program_task(path: str) -> Task:
    try:
        sha256 = program.load_program(path)
    except program.ProgramError as error:
        raise TaskError(str(error)) from None
    source = program.task_source(sha256, os.path.basename(path))
    name = f"egg_task_{next(_module_numbers)}"
    module = types.ModuleType(name)
    module.__file__ = os.path.abspath(path)
    sys.modules[name] = module
    exec(compile(source, f"<task {os.path.basename(path)}>", "exec"), module.__dict__)
    return Task(os.path.abspath(path), sha256, module, source)


def task_source(path: str) -> str:
    """The Python source of the task at `path` (a .pt2's is the task file that stands for it)."""
    task = load_task(path)
    if task.source:
        return task.source
    with open(path, encoding="utf-8") as source:
        return source.read()


def load_candidate(path: str):
    if not os.path.isfile(path):
        raise RequestError(f"candidate file not found: {path}")
    try:
        module = import_fresh(path, "egg_candidate")
    except BaseException as error:
        raise CandidateError(f"import failed: {one_line(error)}") from None
    if not isinstance(getattr(module, "ModelNew", None), type):
        forget(module)
        raise CandidateError("candidate defines no class ModelNew")
    return module


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def skip_interpreter_overflow_checks() -> None:
    """In Triton's interpreter, no int32 overflow check that nothing reads.

    For each int32 add, sub and mul the interpreter redoes the op in int64, compares the result with the int32
    range and hands the verdict to a device_assert, which drops it: asserts run only with the `debug` option, which
    the interpreter never sets. On a kernel's index arithmetic that unread check was most of the interpreter's
    time (a 4x4 max pool over 21600 outputs: 13.5 s a forward with it, 5 s without). Results are the same either
    way; egg's own processes that run kernels in the interpreter (the worker, timeit) skip it. Does nothing when
    the interpreter is off, its debug option is on, or its options have no such field."""
    if not _interpreting():
        return
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if dataclasses.is_dataclass(options) and getattr(options, "sanitize_overflow", False) and \
            not getattr(options, "debug", True):
        builder.options = dataclasses.replace(options, sanitize_overflow=False)


class _NoPatches:
    """The scope of a patch that was already in place: nothing to restore."""

    def restore(self) -> None:
        pass


def skip_repeated_interpreter_patches() -> None:
    """In Triton's interpreter, triton.language patched once per launch, not again at every call of a jit function.

    A kernel launch patches triton.language's builtins for the interpreter and restores them when the grid is
    done; but every call from a kernel into another jit function (tl.max and tl.sum are such functions, as are a
    candidate's helpers) patches the modules again, about 2.6 ms of inspect.getmembers each, and keeps the
    patches until the launch ends. Within one launch a second patch of the same modules changes nothing, so it is
    skipped: on a reduction-heavy candidate that was a third of the interpreter's time. Does nothing when the
    interpreter is off or this Triton lacks the functions it wraps."""
    if not _interpreting():
        return
    import inspect
    import threading
    import weakref

    import triton.language as tl
    from triton.runtime import interpreter

    executor = getattr(interpreter, "GridExecutor", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    if executor is None or patch_lang is None or getattr(patch_lang, "egg_once_per_launch", False):
        return
    launch = executor.__call__
    state = threading.local()  # the modules patched in this thread's running launch; None outside one
    # a function's triton.language modules, from its globals (what _patch_lang patches); weak, so that a
    # candidate module the worker is done with is not kept alive by its kernels' entries
    langs_of = weakref.WeakKeyDictionary()

    def patch_once(fn):
        patched = getattr(state, "patched", None)
        langs = langs_of.get(fn)
        if langs is None:
            langs = frozenset(id(value) for value in fn.__globals__.values()
                              if inspect.ismodule(value) and value in (tl, tl.core))
            langs_of[fn] = langs
        if patched is not None and langs and langs <= patched:
            return _NoPatches()
        scope = patch_lang(fn)
        if patched is not None:
            patched |= langs
        return scope

    def launch_once_patched(self, *args, **kwargs):
        outer = getattr(state, "patched", None)
        state.patched = set()
        try:
            return launch(self, *args, **kwargs)
        finally:
            state.patched = outer

    patch_once.egg_once_per_launch = True
    interpreter._patch_lang = patch_once
    executor.__call__ = launch_once_patched


def quicken_interpreter() -> None:
    """Both of the above: what egg's own processes that run kernels in the interpreter call first."""
    skip_interpreter_overflow_checks()
    skip_repeated_interpreter_patches()


def worker_device_kind() -> str:
    """cpu when the worker runs Triton's interpreter or sees no GPU, else cuda."""
    if _interpreting() or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def resolve_device(name) -> torch.device:
    """The torch.device for a request's `device` (None: the worker's own kind); refuses a device this worker's
    Triton cannot run kernels on."""
    name = worker_device_kind() if name is None else name
    if name == "cpu":
        if not _interpreting():
            raise RequestError("device cpu needs a worker started with TRITON_INTERPRET=1")
        return torch.device("cpu")
    if name == "cuda":
        if _interpreting():
            raise RequestError("device cuda requested from a worker running Triton's interpreter")
        if not torch.cuda.is_available():
            raise RequestError("device cuda requested but no CUDA device is visible")
        return torch.device("cuda", torch.cuda.current_device())
    raise RequestError(f"device must be cuda or cpu, not {name!r}")


def cast_floating(values: list, dtype: torch.dtype | None) -> list:
    """`values` with each floating-point tensor cast to `dtype` (None: unchanged); integer tensors keep theirs."""
    if dtype is None:
        return list(values)
    return [value.to(dtype) if isinstance(value, torch.Tensor) and value.is_floating_point() else value
            for value in values]


def build_model(model_class, task: Task, device: torch.device, init_seed: int, init_inputs=None):
    """KernelBench-style construction: seeded, built under the device context, moved, eval mode, and at a half
    precision cast (`Module.to(dtype)`: floating parameters and buffers); from `init_inputs` when given, else the
    task's get_init_inputs() (their floating tensors cast)."""
    with torch.device(device):
        torch.manual_seed(init_seed)
        arguments = task.get_init_inputs() if init_inputs is None else init_inputs
        model = model_class(*cast_floating(arguments, task.dtype))
    model = model.to(device)
    if task.dtype is not None:
        model = model.to(task.dtype)
    return model.eval()


def reference_model(task: Task, device: torch.device, init_seed: int):
    key = (task.path, task.sha256, str(device), init_seed, str(task.dtype))
    if _reference_models.get(key) is None:
        try:
            model = build_model(task.Model, task, device, init_seed)
        except Exception as error:
            raise TaskError(f"reference Model construction failed: {one_line(error)}") from None
        _reference_models.put(key, model)
    return _reference_models.get(key)


def _on_device(value, device: torch.device):
    if isinstance(value, torch.Tensor) and value.device != device:
        return value.to(device)
    return value


def dynamic_fields(request: dict) -> list:
    """A request's dynamic sizes (egg's --dynamic): [(dim, batch_max), ...] ordered by dim, [] with no "dynamic"
    field. dim is the dimension of every tensor input that is a runtime size (0: the batch; "dim" absent means 0),
    batch_max the range's top (0: the task's own size). One size is {"batch_max", "dim"}, several
    {"dims": [{"dim", "batch_max"}, ...]}."""
    dynamic = request.get("dynamic")
    if not dynamic:
        return []
    if not isinstance(dynamic, dict):
        raise ValueError("dynamic must be an object such as {\"batch_max\": 32, \"dim\": 1}")
    entries = dynamic["dims"] if "dims" in dynamic else [dynamic]
    sizes = [(int(entry.get("dim", 0)), int(entry.get("batch_max", 0))) for entry in entries]
    if any(dim < 0 for dim, _ in sizes) or len({dim for dim, _ in sizes}) != len(sizes) or not sizes:
        raise ValueError(f"dynamic dims must be distinct and 0 or more, not {[dim for dim, _ in sizes]}")
    return sorted(sizes)


def dim_name(dim: int) -> str:
    """A dynamic dimension in messages: "batch" for dim 0, else "dim 1", "dim 2"..."""
    return "batch" if dim == 0 else f"dim {dim}"


def dim_at(dim: int, size: int) -> str:
    """One size of a dynamic dimension in messages: "batch 3", "dim 1 size 3"."""
    return f"batch {size}" if dim == 0 else f"dim {dim} size {size}"


def example_batch(inputs: list, dim: int = 0) -> int:
    """The size of a dynamic dimension in a task's inputs: dim `dim` of its first tensor input that has one (dim 0:
    the batch)."""
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.dim() > dim:
            return int(value.shape[dim])
    raise TaskError("no tensor input has a batch dimension" if dim == 0 else f"no tensor input has a dim {dim}")


def make_batch_inputs(task: Task, seed: int, device: torch.device, batch: int, dim: int = 0) -> list:
    """Inputs at another size of the dynamic dimension `dim` (0: the batch), for a dynamic candidate: get_inputs()
    drawn under seed, seed + 1, ... and every tensor input with that dimension takes its slices along it from the
    draws in turn until there are `batch` of them; the other inputs are the first draw's. Each slice is then one
    the task itself could draw (indices in range, positive values where it draws them positive)."""
    return make_sized_inputs(task, seed, device, [(dim, batch)])


def make_sized_inputs(task: Task, seed: int, device: torch.device, sizes: list) -> list:
    """Inputs at other sizes of several dynamic dimensions [(dim, size), ...], as make_batch_inputs does for one:
    the last dimension's slices come from draws already at the sizes of the ones before it."""
    if not sizes:
        return make_inputs(task, seed, device)
    *before, (dim, batch) = sizes
    first = make_sized_inputs(task, seed, device, before)
    draws, rows = [first], example_batch(first, dim)
    while rows < batch:
        draws.append(make_sized_inputs(task, seed + len(draws), device, before))
        rows += example_batch(draws[-1], dim)
    cut = (slice(None),) * dim + (slice(0, batch),)
    return [torch.cat([draw[i] for draw in draws], dim=dim)[cut].contiguous()
            if isinstance(value, torch.Tensor) and value.dim() > dim else value for i, value in enumerate(first)]


def make_inputs(task: Task, seed: int, device: torch.device) -> list:
    """The inputs of one trial: get_inputs() under torch.manual_seed(seed) and the device context, their floating
    tensors cast to the task's half precision."""
    try:
        torch.manual_seed(seed)
        with torch.device(device):
            inputs = task.get_inputs()
        return cast_floating([_on_device(value, device) for value in inputs], task.dtype)
    except Exception as error:
        raise TaskError(f"get_inputs failed: {one_line(error)}") from None
