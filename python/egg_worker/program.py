"""A torch.export program saved as `.pt2` (torch.export.save, with its example inputs) as a KernelBench task.

`load_program(path)` loads and checks the archive once per content hash and returns that hash; it raises
ProgramError with a one-line reason for a file that is not such a program. `task_source(sha256, name)` is the
task file egg uses in its place: `Model` (a ProgramModel: the program's module with the parameters and buffers at
their original names, no init arguments), `get_inputs` (fresh inputs shaped like the example inputs) and
`get_init_inputs` (none). The worker imports that source as the task, and every candidate embeds it, so a
candidate's `ModelNew` inherits `Model` and reads the parameters by their names, as for a task file.
"""

import hashlib
import os
import zipfile

import torch

PROGRAM_SUFFIX = ".pt2"
ProgramState = dict  # parameter or buffer name -> (shape, stride, dtype name)

_programs = {}  # sha256 -> ExportedProgram, loaded in this process


class ProgramError(Exception):
    """The file is not a usable torch.export program; str() is one line."""


def is_program_path(path: str) -> bool:
    return path.endswith(PROGRAM_SUFFIX)


def _one_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def _sha256(path: str) -> str:
    with open(path, "rb") as source:
        return hashlib.sha256(source.read()).hexdigest()


def _check_example_inputs(program, name: str) -> None:
    examples = getattr(program, "example_inputs", None)
    if examples is None:
        raise ProgramError(f"{name} holds no example inputs (export with example arguments and save with "
                           "torch.export.save, which keeps them)")
    args, kwargs = examples
    if kwargs:
        raise ProgramError(f"{name} takes keyword inputs ({', '.join(sorted(kwargs))}); egg takes positional ones")
    for position, value in enumerate(args):
        if not isinstance(value, (torch.Tensor, bool, int, float)):
            raise ProgramError(f"{name}: input {position} is a {type(value).__name__}; egg takes tensors and "
                               "numbers")


def load_program(path: str) -> str:
    """Loads the .pt2 at `path` (once per content) and returns its sha256."""
    name = os.path.basename(path)
    if not os.path.isfile(path):
        raise ProgramError(f"program file not found: {path}")
    sha256 = _sha256(path)
    if sha256 in _programs:
        return sha256
    if not zipfile.is_zipfile(path):
        raise ProgramError(f"{name} is not a .pt2 archive (torch.export.save writes one)")
    try:
        program = torch.export.load(path)
    except Exception as error:
        raise ProgramError(f"{name} is not a torch.export program: {_one_line(error)}") from None
    _check_example_inputs(program, name)
    _programs[sha256] = program
    return sha256


def program(sha256: str):
    """The ExportedProgram with this content hash, loaded earlier in this process."""
    loaded = _programs.get(sha256)
    if loaded is None:
        raise ProgramError(f"program {sha256[:16]} is not loaded in this process: the task must be its .pt2")
    return loaded


def _state_tensors(module) -> list:
    return list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))


def program_state(sha256: str) -> ProgramState:
    """Every parameter and buffer of the program: name -> (shape, stride, dtype name)."""
    state = {}
    for name, tensor in _state_tensors(program(sha256).module()):
        state[name] = (tuple(tensor.shape), tuple(tensor.stride()), str(tensor.dtype).replace("torch.", ""))
    return state


def _holder(root: torch.nn.Module, path: list) -> torch.nn.Module:
    module = root
    for part in path:
        if part not in module._modules:
            module.add_module(part, torch.nn.Module())
        module = module._modules[part]
    return module


class ProgramModel(torch.nn.Module):
    """The program's module with copies of its parameters and buffers registered here under their original
    names (`conv.weight` is `self.conv.weight`); forward runs the exported graph on them."""

    def __init__(self, sha256: str):
        super().__init__()
        graph_module = program(sha256).module()
        object.__setattr__(self, "_egg_graph", graph_module)  # not a child: its own tensors are never read
        for name, tensor in _state_tensors(graph_module):
            *path, leaf = name.split(".")
            holder = _holder(self, path)
            if isinstance(tensor, torch.nn.Parameter):
                holder.register_parameter(leaf, torch.nn.Parameter(tensor.detach().clone(), tensor.requires_grad))
            else:
                holder.register_buffer(leaf, tensor.detach().clone())

    def forward(self, *inputs):
        state = dict(_state_tensors(self))
        return torch.func.functional_call(self._egg_graph, state, inputs)


def program_inputs(sha256: str) -> list:
    """Fresh inputs like the example inputs: floating tensors drawn anew (uniform in [0, 1) where every example
    value is non-negative, else normal), other tensors (indices, masks) and numbers as in the example."""
    args, _ = program(sha256).example_inputs
    inputs = []
    for value in args:
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            draw = torch.rand if value.numel() and bool((value >= 0).all()) else torch.randn
            inputs.append(draw(tuple(value.shape), dtype=value.dtype))
        elif isinstance(value, torch.Tensor):
            inputs.append(value.clone())
        else:
            inputs.append(value)
    return inputs


TASK_TEMPLATE = '''"""The torch.export program {name} as a KernelBench task (egg_worker.program; sha256 {sha256})."""
from egg_worker.program import ProgramModel, program_inputs

PROGRAM_SHA256 = "{sha256}"
# Parameters and buffers as exported: name -> (shape, stride, dtype); egg.load checks a module against them.
PROGRAM_STATE = {state!r}


class Model(ProgramModel):
    def __init__(self):
        super().__init__(PROGRAM_SHA256)


def get_inputs():
    return program_inputs(PROGRAM_SHA256)


def get_init_inputs():
    return []
'''


def task_source(sha256: str, name: str) -> str:
    """The task file that stands for the loaded program `sha256` (named `name` in its docstring)."""
    return TASK_TEMPLATE.format(name=name, sha256=sha256, state=program_state(sha256))
