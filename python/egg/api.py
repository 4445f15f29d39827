"""egg.optimize and egg.load: export a module, run the egg binary on the program, bind the result to the module.

The binary is $EGG_BINARY, else the repository's ./egg beside this package, else `egg` on PATH. Its worker runs
on this interpreter ($EGG_PYTHON, when set, wins), so the program is loaded by the torch that exported it.
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import torch

from egg.binding import bind, module_attributes

PROGRAM_FILE = "program.pt2"
CANDIDATE_FILE = "model_new.py"
SETTINGS_FILE = "module.json"
STDERR_TAIL_LINES = 20
EXIT_NO_VERIFIED_KERNEL = 1
ERROR_PREFIX = "egg: error: "


class EggError(Exception):
    """What egg could not do, in one line."""


def _one_line(error: BaseException, limit: int = 400) -> str:
    text = " ".join(f"{type(error).__name__}: {error}".split())
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def binary() -> str:
    """The egg executable this API drives."""
    named = os.environ.get("EGG_BINARY")
    if named:
        return named
    repository = Path(__file__).resolve().parents[2] / "egg"
    if repository.is_file():
        return str(repository)
    found = shutil.which("egg")
    if found is None:
        raise EggError("cannot find the egg binary: set EGG_BINARY (or run from egg's repository, ./egg)")
    return found


def export(module: torch.nn.Module, example_inputs, path: str, max_batch: int = 0, dim: int = 0,
           sizes=()) -> list:
    """Saves the module's eval-mode forward on `example_inputs` as a torch.export program (.pt2) at `path`;
    returns the plain attributes that forward reads (egg_worker.settings: values the program holds). `max_batch`
    > 0: dim `dim` (0: the batch) of every tensor input that has it is one dynamic size, 1..max_batch (egg's
    --dynamic batch or dimN); `sizes` [(dim, max), ...] gives several instead."""
    sizes = list(sizes) or ([(dim, max_batch)] if max_batch else [])
    from egg_worker import capture, settings

    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            shapes = capture.batch_shapes(module, list(example_inputs), sizes) if sizes else None
            program = torch.export.export(module, tuple(example_inputs), dynamic_shapes=shapes, strict=False)
            with settings.recording(module) as reads:
                module(*example_inputs)
    except Exception as error:
        raise EggError(f"torch.export cannot export {type(module).__name__}: {_one_line(error)}") from None
    finally:
        module.train(was_training)
    torch.export.save(program, path)
    return reads.entries()


def _command(program_path: str, out: str, tol, backend: str, device, quick: bool, options) -> list:
    command = [binary(), "optimize", program_path, "--out", out, "--backend", backend]
    if tol is not None:
        command += ["--tol", repr(float(tol))]
    if device is not None:
        command += ["--device", device]
    if quick:
        command.append("--quick")
    return command + [str(option) for option in options]


def _run(command: list, verbose: bool) -> tuple:
    """Runs the binary; its stderr goes through when verbose. Returns (exit status, the last stderr lines)."""
    environment = dict(os.environ)
    environment.setdefault("EGG_PYTHON", sys.executable)
    if not verbose:
        command = command + ["--quiet"]
    tail = collections.deque(maxlen=STDERR_TAIL_LINES)
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          env=environment) as process:
        for line in process.stderr:
            tail.append(line.rstrip("\n"))
            if verbose:
                sys.stderr.write(line)
    return process.returncode, list(tail)


def _failure(status: int, tail: list, out: str) -> str:
    for line in reversed(tail):
        if line.startswith(ERROR_PREFIX):
            return line[len(ERROR_PREFIX):]
    if status == EXIT_NO_VERIFIED_KERNEL:
        return f"egg found no kernel that passed verification ({os.path.join(out, 'report.json')})"
    last = tail[-1] if tail else "no output"
    return f"egg optimize exited with status {status}: {last}"


def _dynamic_dims(dynamic) -> list:
    """The dimensions `dynamic` names ("batch" is dim 0, "dim2" dim 2, "batch,dim1" both), [] for None; EggError
    for anything else."""
    if dynamic is None:
        return []
    dims = []
    for name in dynamic.split(",") if isinstance(dynamic, str) else [None]:
        if name == "batch":
            dims.append(0)
        elif isinstance(name, str) and name.startswith("dim") and name[3:].isdigit():
            dims.append(int(name[3:]))
        else:
            raise EggError(f"egg.optimize's dynamic is None, 'batch' or 'dimN' (dim1, dim2..., several with "
                           f"commas), not {dynamic!r}")
    if len(set(dims)) != len(dims):
        raise EggError(f"egg.optimize's dynamic names a dimension twice: {dynamic!r}")
    return dims


def optimize(module: torch.nn.Module, example_inputs, *, tol=None, backend: str = "expert", out=None,
             device=None, quick: bool = False, verbose: bool = False, options=(), dynamic=None,
             max_batch=None) -> torch.nn.Module:
    """Optimizes `module`'s forward for inputs like `example_inputs` and returns a module bound to `module`
    (egg.load). `tol` (default the binary's, 1e-4), `backend` (expert or hybrid), `device` (cuda or cpu),
    `quick` and the extra command-line `options` go to `egg optimize`; `out` is its output folder (default
    egg-out/<class name>); `verbose` shows its progress on stderr. `dynamic="batch"`: one compiled module for
    every batch (dim 0 of each tensor input) up to `max_batch` (default: the example's), egg's --dynamic batch;
    `dynamic="dim1"` (or dim2, ...) the same for the sizes of that dimension of each tensor input that has it (a
    sequence length), egg's --dynamic dim1; `dynamic="batch,dim1"` both, each its own size (`max_batch` then a
    tuple, one largest size per dimension in that order). Raises EggError."""
    if not isinstance(module, torch.nn.Module):
        raise EggError(f"egg.optimize takes a torch.nn.Module, not {type(module).__name__}")
    dims = _dynamic_dims(dynamic)
    maxima = [] if max_batch is None else list(max_batch) if isinstance(max_batch, (tuple, list)) else [max_batch]
    if maxima and (not dims or len(maxima) > len(dims) or min(int(m) for m in maxima) < 1):
        raise EggError("egg.optimize's max_batch needs dynamic ('batch' or 'dimN'), one size of at least 1 per "
                       "dynamic dimension")
    out = out or os.path.join("egg-out", type(module).__name__)
    os.makedirs(out, exist_ok=True)
    program_path = os.path.join(out, PROGRAM_FILE)
    sizes = []
    if dims:
        from egg_worker import loader

        try:
            sizes = [(dim, int(maxima[i]) if i < len(maxima) else loader.example_batch(list(example_inputs), dim))
                     for i, dim in enumerate(dims)]
        except loader.TaskError as error:
            raise EggError(f"egg.optimize's dynamic={dynamic!r}: {error}") from None
        options = ("--dynamic", dynamic, "--max-size", ",".join(str(m) for _, m in sizes), *options)
    read_settings = export(module, example_inputs, program_path, sizes=sizes)
    with open(os.path.join(out, SETTINGS_FILE), "w", encoding="utf-8") as record:
        json.dump({"class": type(module).__qualname__, "settings": read_settings}, record, indent=1)
    status, tail = _run(_command(program_path, out, tol, backend, device, quick, options), verbose)
    if status != 0:
        raise EggError(_failure(status, tail, out))
    return load(out, module)


def _recorded_settings(out: str):
    path = os.path.join(out, SETTINGS_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as record:
        return json.load(record).get("settings")


def load(out: str, module: torch.nn.Module) -> torch.nn.Module:
    """`module` bound to the kernels egg stored in `out` (model_new.py of a .pt2 task): a module that shares
    module's parameters, buffers and submodules and runs egg's kernels where their guards hold (else module's
    own forward). Raises EggError when `out` holds no such result or module does not fit it."""
    path = os.path.join(out, CANDIDATE_FILE)
    if not os.path.isfile(path):
        raise EggError(f"{out} holds no {CANDIDATE_FILE} (egg.optimize or `egg optimize PROGRAM.pt2` writes it)")
    from egg_worker import loader, program

    try:
        candidate = loader.import_fresh(path, "egg_optimized")
    except BaseException as error:
        raise EggError(f"cannot import {path}: {_one_line(error)}") from None
    model_new = getattr(candidate, "ModelNew", None)
    if not (isinstance(model_new, type) and issubclass(model_new, program.ProgramModel)):
        raise EggError(f"{path} was not made from a torch.export program: egg.load binds results of "
                       "egg.optimize or `egg optimize PROGRAM.pt2`")
    read_settings = _recorded_settings(out)
    if read_settings is None:
        warnings.warn(f"egg: {out} records no settings ({SETTINGS_FILE}); every plain attribute of the module as "
                      "it is now is taken for a value the kernels hold", stacklevel=2)
        read_settings = module_attributes(module)
    try:
        return bind(candidate, module, read_settings)
    except ValueError as error:
        raise EggError(str(error)) from None
