"""The plain attributes a forward reads (docs/expert.md, "Settings"): torch.export bakes their values into the
graph (`x * self.scale` becomes `mul(x, 0.125)`), so a candidate checks at call time that they still hold them.

`recording(model)` is a context in which every read of a plain attribute (a number, string, bool, None, or a
tuple or list of those) from the instance dictionary of the model or a submodule is recorded; `entries()` gives
them as IR entries {"path": "norm.eps", "literal": "1e-05"} (a Python literal of the value), first read first.
"""

import contextlib
import math

import torch

PLAIN_TYPES = (bool, int, float, str, type(None))
MAX_LITERAL_CHARS = 1000
# nn.Module's own bookkeeping (_parameters, _forward_hooks, ...); `training` is a setting (dropout, batch norm)
_INTERNAL = frozenset(vars(torch.nn.Module())) - {"training"}


def _plain(value) -> bool:
    if isinstance(value, (tuple, list)):
        return all(_plain(item) for item in value)
    if isinstance(value, float):
        return math.isfinite(value)  # nan is never equal to itself, and inf has no literal
    return isinstance(value, PLAIN_TYPES)


class Reads:
    def __init__(self):
        self.values = {}  # path -> value at its first read

    def entries(self) -> list:
        entries = []
        for path, value in self.values.items():
            literal = repr(value)
            if len(literal) <= MAX_LITERAL_CHARS:
                entries.append({"path": path, "literal": literal})
        return entries


def _recording_class(cls, prefix: str, reads: Reads):
    def __getattribute__(self, name):
        value = cls.__getattribute__(self, name)
        if name not in _INTERNAL and name in object.__getattribute__(self, "__dict__") and _plain(value):
            reads.values.setdefault(f"{prefix}.{name}" if prefix else name, value)
        return value

    return type(cls.__name__, (cls,), {"__getattribute__": __getattribute__, "__module__": cls.__module__})


@contextlib.contextmanager
def recording(model: torch.nn.Module):
    """Records the plain attributes read inside the context (each module's class swapped for the duration)."""
    reads = Reads()
    swapped = []
    try:
        for prefix, module in model.named_modules(remove_duplicate=False):
            if any(module is other for other, _ in swapped):
                continue
            original = type(module)
            module.__class__ = _recording_class(original, prefix, reads)
            swapped.append((module, original))
        yield reads
    finally:
        for module, original in swapped:
            module.__class__ = original
