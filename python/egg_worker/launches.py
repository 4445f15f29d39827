"""Counting Triton kernel launches.

`install()` wraps `run` of triton's JITFunction (and of the interpreter's InterpretedFunction) at class level,
once, before any candidate is imported: every real (non-warm-up) launch of any @triton.jit kernel, including those
made through autotuners and heuristics, passes through it. `count_launches()` is a context manager that yields the
list of kernel names launched while it is active (in launch order, one entry per launch). `paused()` puts the
original entry points back for a block (timing.py's timed loops: no wrapper's cost inside a timed region, as in a
process that never installed them).

A forward replayed from a CUDA graph (stage2.memory's launch-overhead move) launches its Triton kernels
through the graph, not through `run`: `install()` also wraps torch.cuda.CUDAGraph, so that the launches made
while a graph was captured are recorded on it and every replay counts them again, as launches of the call
that replays it.
"""

import contextlib

_active_records = []  # stack of lists; launches are appended to the innermost one
_capturing = []  # the records of the CUDA graphs being captured: every launch goes to each as well
_installed_classes = []
_wrapped = []  # (class, attribute, original, wrapper) of every entry point install() replaced
_paused = []  # depth of paused() blocks
_INHERITED = object()  # an entry point the class did not define itself


def _kernel_name(function) -> str:
    inner = getattr(function, "fn", None)
    return getattr(inner, "__name__", None) or type(function).__name__


def _wrap_run(original_run):
    def run(self, *args, grid, warmup, **kwargs):
        if not warmup:
            name = _kernel_name(self)
            if _active_records:
                _active_records[-1].append(name)
            for record in _capturing:
                record.append(name)
        return original_run(self, *args, grid=grid, warmup=warmup, **kwargs)

    run.__wrapped__ = original_run
    run.__name__ = "run"
    return run


def launch_classes():
    from triton.runtime.jit import JITFunction

    classes = [JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return classes
    classes.append(InterpretedFunction)
    return classes


GRAPH_LAUNCHES = "_egg_triton_launches"  # the attribute of a captured graph that lists its Triton launches


def wrap_graph_class(cls) -> None:
    """Record on each graph of `cls` (torch.cuda.CUDAGraph) the Triton launches of its capture; count them
    at every replay."""
    original_begin, original_end, original_replay = cls.capture_begin, cls.capture_end, cls.replay

    def capture_begin(self, *args, **kwargs):
        record = []
        setattr(self, GRAPH_LAUNCHES, record)
        _capturing.append(record)
        try:
            return original_begin(self, *args, **kwargs)
        except BaseException:
            _capturing.remove(record)
            raise

    def capture_end(self, *args, **kwargs):
        record = getattr(self, GRAPH_LAUNCHES, None)
        _capturing[:] = [r for r in _capturing if r is not record]
        return original_end(self, *args, **kwargs)

    def replay(self, *args, **kwargs):
        result = original_replay(self, *args, **kwargs)
        if _active_records:
            _active_records[-1].extend(getattr(self, GRAPH_LAUNCHES, []))
        return result

    for name, wrapper in (("capture_begin", capture_begin), ("capture_end", capture_end), ("replay", replay)):
        _replace(cls, name, wrapper)


def _replace(cls, name: str, wrapper) -> None:
    _wrapped.append((cls, name, cls.__dict__.get(name, _INHERITED), wrapper))
    setattr(cls, name, wrapper)


def _put(cls, name: str, value) -> None:
    if value is _INHERITED:
        delattr(cls, name)
    else:
        setattr(cls, name, value)


def install() -> None:
    """Wrap the launch entry points (idempotent)."""
    if _installed_classes:
        return
    for cls in launch_classes():
        _replace(cls, "run", _wrap_run(cls.run))
        _installed_classes.append(cls)
    import torch

    graph_class = getattr(torch.cuda, "CUDAGraph", None)
    if graph_class is not None:
        wrap_graph_class(graph_class)
        _installed_classes.append(graph_class)


@contextlib.contextmanager
def count_launches():
    install()
    record = []
    _active_records.append(record)
    try:
        yield record
    finally:
        _active_records.pop()


@contextlib.contextmanager
def paused():
    """The entry points as they were before install() for the block (nothing counted), the wrappers back after it.
    An entry point replaced by someone else meanwhile is left as that one found it, for the patch checks to see."""
    if _paused or not _wrapped:
        yield
        return
    _paused.append(True)
    for cls, name, original, _ in _wrapped:
        _put(cls, name, original)
    try:
        yield
    finally:
        _paused.pop()
        for cls, name, original, wrapper in _wrapped:
            if cls.__dict__.get(name, _INHERITED) is original:
                setattr(cls, name, wrapper)
