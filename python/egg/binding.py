"""A candidate's ModelNew bound to a user's module: egg's kernels reading that module's tensors.

`bind(candidate, module, settings)` returns an instance of a subclass of the candidate's ModelNew that shares
the module's parameter, buffer and submodule dictionaries (a later load_state_dict, in-place update or replaced
tensor is seen) and reads any other attribute from the module. Its forward runs the kernels only when they are
valid for the module as it is now, else the module's own forward (a correct result, without the speedup):
- the inputs have the shapes, dtypes and strides the kernels were made for (the candidate's own guard);
- every parameter and buffer has the shape, stride and dtype it was exported with;
- every plain attribute the forward read at export (numbers, strings, tuples: values torch.export bakes into the
  graph; egg_worker.settings records them) still has its value then;
- the module is in eval mode (the program is the eval-mode forward), no keyword arguments, and no input needs
  a gradient (the kernels have no backward; parameters' gradients are not tracked in eval mode);
- no input is a CPU tensor unless Triton's interpreter is on.
The checks run as two functions generated at bind time (the tensors gathered through the module dictionaries
and compared by identity, the attributes one tuple per module); only a replaced tensor is checked in full. A
forward captured in a CUDA graph (the candidate's `_egg_graphs`) reads the tensors where they were at capture:
when a parameter or buffer has been replaced by another tensor since, the graphs are dropped and captured again.
"""

import ast
import os
import warnings

import torch

PLAIN_TYPES = (bool, int, float, str, type(None))
SKIPPED_ATTRIBUTES = ("training",)


def _plain(value) -> bool:
    if isinstance(value, (list, tuple)):
        return all(_plain(item) for item in value)
    return isinstance(value, PLAIN_TYPES)


def module_attributes(module: torch.nn.Module) -> list:
    """{"path": "norm.eps", "literal": "1e-05"} for every plain public attribute of the module and its
    submodules (what a forward may read, where the reads themselves were not recorded)."""
    entries = []
    for prefix, submodule in module.named_modules(remove_duplicate=False):
        for name, value in vars(submodule).items():
            if name.startswith("_") or name in SKIPPED_ATTRIBUTES or not _plain(value):
                continue
            entries.append({"path": f"{prefix}.{name}" if prefix else name, "literal": repr(value)})
    return entries


def _split(dotted: str) -> tuple:
    *path, name = dotted.split(".")
    return tuple(path), name


def _owner(path: tuple) -> str:
    return "root" + "".join(f"._modules[{part!r}]" for part in path)


def _grouped(items) -> dict:
    """(owner path, name, payload) -> {owner path: [(name, payload), ...]}, in first-seen order."""
    groups = {}
    for path, name, payload in items:
        groups.setdefault(path, []).append((name, payload))
    return groups


def _compile(lines: list, name: str, namespace: dict):
    exec(compile("\n".join(lines), f"<egg binding {name}>", "exec"), namespace)
    return namespace[name]


def compile_gather(module: torch.nn.Module, state: dict):
    """gather(root): the module's tensors at the state's names, as a tuple (KeyError where one is gone), read
    through the module dictionaries in one generated function."""
    items = []
    for dotted in state:
        path, name = _split(dotted)
        owner = module.get_submodule(".".join(path)) if path else module
        items.append((path, name, "_parameters" if name in owner._parameters else "_buffers"))
    lines = ["def gather(root):", "    tensors = []"]
    for path, reads in _grouped(items).items():
        lines.append(f"    o = {_owner(path)}")
        lines += [f"    tensors.append(o.{table}[{name!r}])" for name, table in reads]
    lines.append("    return tuple(tensors)")
    return _compile(lines, "gather", {})


def compile_settings_hold(settings: list):
    """settings_hold(root): whether every recorded attribute still has its value, one tuple per module."""
    items = [(*_split(entry["path"]), ast.literal_eval(entry["literal"])) for entry in settings]
    groups = _grouped(items)
    if not groups:  # a forward that reads no plain attribute: nothing can change under the kernels
        return _compile(["def settings_hold(root):", "    return True"], "settings_hold", {})
    lines = ["def settings_hold(root):", "    try:"]
    for index, (path, reads) in enumerate(groups.items()):
        names = "".join(f"o.{name}, " for name, _ in reads)
        lines += [f"        o = {_owner(path)}", f"        if ({names}) != expected[{index}]:",
                  "            return False"]
    lines += ["    except (KeyError, AttributeError):", "        return False", "    return True"]
    expected = tuple(tuple(value for _, value in reads) for reads in groups.values())
    return _compile(lines, "settings_hold", {"expected": expected})


_MISSING = object()


def _mismatch(module: torch.nn.Module, state: dict) -> str:
    """Why the module's tensors do not fit the exported ones ('' when they do)."""
    for name, (shape, stride, dtype) in state.items():
        path, leaf = _split(name)
        try:
            owner = module.get_submodule(".".join(path)) if path else module
        except AttributeError:
            owner = None
        tensor = _MISSING if owner is None else owner._parameters.get(leaf, owner._buffers.get(leaf, _MISSING))
        if tensor is _MISSING or tensor is None:
            return f"the module has no parameter or buffer {name}, which the kernels read"
        have = (tuple(tensor.shape), tuple(tensor.stride()), str(tensor.dtype).replace("torch.", ""))
        if have != (tuple(shape), tuple(stride), dtype):
            return f"{name} is {have} in the module, {(tuple(shape), tuple(stride), dtype)} as exported"
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
        mismatch = self._egg_check_tensors(own)
        if mismatch:
            return mismatch
        if not self.__dict__["_egg_settings_hold"](own):
            return "an attribute the forward reads has changed since export"
        return ""

    def _egg_check_tensors(self, own) -> str:
        """'' when the module holds the tensors last checked, or others that fit the kernels (then a CUDA-graph
        candidate's graphs, which read the old ones, are dropped); else why not."""
        try:
            identities = tuple(map(id, self.__dict__["_egg_gather"](own)))
        except (KeyError, AttributeError):
            identities = None
        if identities is not None and identities == self.__dict__["_egg_identities"]:
            return ""
        mismatch = _mismatch(own, self.__dict__["_egg_state"])
        if not mismatch:
            self.__dict__.pop("_egg_graphs", None)
            self.__dict__["_egg_identities"] = identities
        return mismatch

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


def bind(candidate, module: torch.nn.Module, settings: list) -> torch.nn.Module:
    """The candidate module's ModelNew bound to `module` (see the module docstring); `settings` are the plain
    attributes whose values the kernels hold ({"path", "literal"} entries). Raises ValueError when the module
    lacks a tensor the kernels read or has it in another shape, stride or dtype."""
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
    gather = compile_gather(module, state)
    bound.__dict__.update(_egg_module=module, _egg_state=state, _egg_gather=gather,
                          _egg_identities=tuple(map(id, gather(module))),
                          _egg_settings_hold=compile_settings_hold(settings), _egg_warned=set(),
                          training=module.training)
    return bound
