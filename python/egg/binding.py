"""A candidate's ModelNew bound to a user's module: egg's kernels reading that module's tensors.

`bind(candidate, module, attributes)` returns an instance of a subclass of the candidate's ModelNew that shares
the module's parameter, buffer and submodule dictionaries (a later load_state_dict, in-place update or replaced
tensor is seen) and reads any other attribute from the module. Its forward runs the kernels only when they are
valid for the module as it is now, else the module's own forward (a correct result, without the speedup):
- the inputs have the shapes, dtypes and strides the kernels were made for (the candidate's own guard);
- every parameter and buffer has the shape, stride and dtype it was exported with;
- every plain attribute of the module and its submodules (numbers, strings, tuples: values torch.export bakes
  into the graph) still has its value at export (`attributes`, from `module_attributes`);
- the module is in eval mode (the program is the eval-mode forward), no keyword arguments, and no input needs
  a gradient (the kernels have no backward; parameters' gradients are not tracked in eval mode);
- no input is a CPU tensor unless Triton's interpreter is on.
A forward captured in a CUDA graph (the candidate's `_egg_graphs`) reads the tensors where they were at capture:
when a parameter or buffer has been replaced by another tensor since, the graphs are dropped and captured again.
"""

import os
import warnings

import torch

PLAIN_TYPES = (bool, int, float, str, type(None))
SKIPPED_ATTRIBUTES = ("training",)


def _plain(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    return isinstance(value, PLAIN_TYPES)


def _as_json(value):
    return [_as_json(item) for item in value] if isinstance(value, (list, tuple)) else value


def module_attributes(module: torch.nn.Module) -> dict:
    """'path.name' -> value for every plain public attribute of the module and its submodules (JSON values)."""
    attributes = {}
    for prefix, submodule in module.named_modules(remove_duplicate=False):
        for name, value in vars(submodule).items():
            if name.startswith("_") or name in SKIPPED_ATTRIBUTES or not _plain(value):
                continue
            attributes[f"{prefix}.{name}" if prefix else name] = _as_json(value)
    return attributes


def _resolve(module: torch.nn.Module, dotted: str):
    """(owner, name) of a dotted attribute path, or None where a step is missing."""
    *path, name = dotted.split(".")
    owner = module
    for part in path:
        owner = owner._modules.get(part) if isinstance(owner, torch.nn.Module) else None
        if owner is None:
            return None
    return owner, name


_MISSING = object()


def _tensor_at(module: torch.nn.Module, dotted: str):
    place = _resolve(module, dotted)
    if place is None:
        return _MISSING
    owner, name = place
    return owner._parameters.get(name, owner._buffers.get(name, _MISSING))


def _mismatch(module: torch.nn.Module, state: dict) -> str:
    """Why the module's tensors do not fit the exported ones ('' when they do)."""
    for name, (shape, stride, dtype) in state.items():
        tensor = _tensor_at(module, name)
        if tensor is _MISSING or tensor is None:
            return f"the module has no parameter or buffer {name}, which the kernels read"
        have = (tuple(tensor.shape), tuple(tensor.stride()), str(tensor.dtype).replace("torch.", ""))
        if have != (tuple(shape), tuple(stride), dtype):
            return f"{name} is {have} in the module, {(tuple(shape), tuple(stride), dtype)} as exported"
    return ""


def _state_pointers(module: torch.nn.Module, state: dict) -> tuple:
    return tuple(_tensor_at(module, name).data_ptr() for name in state)


def _changed_attribute(module: torch.nn.Module, attributes: dict) -> str:
    for dotted, value in attributes.items():
        place = _resolve(module, dotted)
        current = getattr(place[0], place[1], _MISSING) if place is not None else _MISSING
        if current is _MISSING or not _plain(current) or _as_json(current) != value:
            return dotted
    return ""


class _Bound:
    """Mixed in before ModelNew: the checks above, then ModelNew.forward (whose fallback is the module's)."""

    def forward(self, *args, **kwargs):
        own = self.__dict__["_egg_module"]
        reason = self._egg_fallback_reason(args, kwargs)
        if reason:
            if reason not in self.__dict__["_egg_warned"]:
                self.__dict__["_egg_warned"].add(reason)
                warnings.warn(f"egg: running {type(own).__name__}'s own forward: {reason}", stacklevel=4)
            return own(*args, **kwargs)
        return super().forward(*args)

    def _egg_fallback_reason(self, args, kwargs) -> str:
        own = self.__dict__["_egg_module"]
        if own.training:
            return "the module is in training mode (egg's kernels are its eval-mode forward)"
        if kwargs:
            return "keyword arguments"
        if torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return "an input requires grad (egg's kernels have no backward)"
        if os.environ.get("TRITON_INTERPRET") != "1" and any(
                isinstance(a, torch.Tensor) and a.device.type == "cpu" for a in args):
            return "CPU inputs (egg's kernels run on the GPU, or in Triton's interpreter with TRITON_INTERPRET=1)"
        mismatch = _mismatch(own, self.__dict__["_egg_state"])
        if mismatch:
            return mismatch
        self._egg_forget_stale_graphs(own)
        changed = _changed_attribute(own, self.__dict__["_egg_attributes"])
        if changed:
            return f"attribute {changed} changed since export"
        return ""

    def _egg_forget_stale_graphs(self, own) -> None:
        pointers = _state_pointers(own, self.__dict__["_egg_state"])
        if pointers != self.__dict__.get("_egg_pointers"):
            self.__dict__.pop("_egg_graphs", None)
            self.__dict__["_egg_pointers"] = pointers

    def train(self, mode: bool = True):
        self.__dict__["_egg_module"].train(mode)
        return torch.nn.Module.train(self, mode)

    def __getattr__(self, name):
        try:
            return torch.nn.Module.__getattr__(self, name)
        except AttributeError:
            own = self.__dict__.get("_egg_module")
            if own is None:
                raise
            return getattr(own, name)


def _own_forward(self, *args):
    return self.__dict__["_egg_module"](*args)


_SHARED = ("_parameters", "_buffers", "_modules", "_non_persistent_buffers_set")


def bind(candidate, module: torch.nn.Module, attributes: dict) -> torch.nn.Module:
    """The candidate module's ModelNew bound to `module` (see the module docstring). Raises ValueError when the
    module lacks a tensor the kernels read or has it in another shape, stride or dtype."""
    state = candidate.PROGRAM_STATE
    mismatch = _mismatch(module, state)
    if mismatch:
        raise ValueError(mismatch)
    # ModelNew's fallback (super().forward in ModelNew) reaches the module's own forward: this class sits
    # between ModelNew and the program's Model in the method order.
    own_forward = type("EggOwnForward", (candidate.Model,), {"forward": _own_forward})
    bound_class = type(f"Egg{type(module).__name__}", (_Bound, candidate.ModelNew, own_forward), {})
    bound = bound_class.__new__(bound_class)
    torch.nn.Module.__init__(bound)
    for name in _SHARED:
        bound.__dict__[name] = getattr(module, name)
    bound.__dict__.update(_egg_module=module, _egg_state=state, _egg_attributes=dict(attributes),
                          _egg_warned=set(), _egg_pointers=_state_pointers(module, state),
                          training=module.training)
    return bound
