"""Counting Triton kernel launches.

`install()` wraps `run` of triton's JITFunction (and of the interpreter's InterpretedFunction) at class level,
once, before any candidate is imported: every real (non-warm-up) launch of any @triton.jit kernel, including those
made through autotuners and heuristics, passes through it. `count_launches()` is a context manager that yields the
list of kernel names launched while it is active (in launch order, one entry per launch).
"""

import contextlib

_active_records = []  # stack of lists; launches are appended to the innermost one
_installed_classes = []


def _kernel_name(function) -> str:
    inner = getattr(function, "fn", None)
    return getattr(inner, "__name__", None) or type(function).__name__


def _wrap_run(original_run):
    def run(self, *args, grid, warmup, **kwargs):
        if not warmup and _active_records:
            _active_records[-1].append(_kernel_name(self))
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


def install() -> None:
    """Wrap the launch entry points (idempotent)."""
    if _installed_classes:
        return
    for cls in launch_classes():
        cls.run = _wrap_run(cls.run)
        _installed_classes.append(cls)


@contextlib.contextmanager
def count_launches():
    install()
    record = []
    _active_records.append(record)
    try:
        yield record
    finally:
        _active_records.pop()
