"""The program Nsight Compute profiles, and the task/candidate loading `egg profile` shares with it.

As a program:

    python -m egg_worker.ncu_target --task T --candidate C --device cuda --seed S --init-seed I --names-out FILE
        [--dtype fp32|bf16|fp16]

builds the models and inputs, runs the candidate's forward twice (compile, warm), then one forward between
torch.cuda.profiler.start() and stop(): under ncu's --profile-from-start off those are the only launches
profiled. FILE receives JSON {"names": Triton kernel names launched in that forward, first launch first,
"launches": their launch count}. Everything the program or the candidate prints goes to stderr, so ncu's
CSV has stdout to itself. Exit status 0 on success; 1 with one line on stderr otherwise. The program exits
when its parent (ncu) dies.

As a library: load_module(path), build(...) -> Built (KernelBench's seeding convention),
TritonLaunchRecorder (names of the Triton kernels launched inside a `with` block).
"""

import argparse
import hashlib
import importlib.util
import json
import os
import sys
import threading
import time
from dataclasses import dataclass

import torch

PARENT_POLL_S = 1.0
DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}  # egg's --precision (loader.PRECISIONS)


def load_module(path, role):
    """Import the Python file at `path` under a unique module name."""
    path = os.path.abspath(path)
    digest = hashlib.sha1(path.encode()).hexdigest()[:12]
    name = f"egg_profile_{role}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def move_to(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, (list, tuple)):
        return type(obj)(move_to(item, device) for item in obj)
    return obj


@dataclass
class Built:
    reference: torch.nn.Module
    candidate: torch.nn.Module
    inputs: list


def _cast(values, dtype):
    return [value.to(dtype) if dtype is not None and isinstance(value, torch.Tensor) and value.is_floating_point()
            else value for value in values]


def build(task_path, candidate_path, device, seed, init_seed, precision="fp32"):
    """Model, ModelNew and inputs, seeded as KernelBench does, created on `device`; at a half `precision` the
    floating inputs and the models' parameters and buffers cast to it."""
    task = load_module(task_path, "task")
    candidate_module = load_module(candidate_path, "candidate")
    dtype = DTYPES[precision]
    with torch.device(device), torch.no_grad():
        torch.manual_seed(init_seed)
        reference = task.Model(*_cast(task.get_init_inputs(), dtype)).to(device)
        torch.manual_seed(init_seed)
        candidate = candidate_module.ModelNew(*_cast(task.get_init_inputs(), dtype)).to(device)
        if dtype is not None:
            reference, candidate = reference.to(dtype), candidate.to(dtype)
        torch.manual_seed(seed)
        inputs = _cast(move_to(list(task.get_inputs()), device), dtype)
    return Built(reference, candidate, inputs)


def run_forward(model, inputs, device):
    with torch.device(device), torch.no_grad():
        return model(*inputs)


def launch_classes():
    """Triton's kernel classes whose `run` every launch goes through (autotuned ones included)."""
    from triton.runtime.jit import JITFunction

    classes = [JITFunction]
    interpreter = sys.modules.get("triton.runtime.interpreter")
    if interpreter is not None:
        classes.append(interpreter.InterpretedFunction)
    return classes


def kernel_name(kernel):
    fn = getattr(kernel, "fn", None)
    return getattr(fn, "__name__", None) or getattr(kernel, "__name__", None) or type(kernel).__name__


class TritonLaunchRecorder:
    """Records `names` (one entry per launch) while active; wraps `run` at class level and restores it."""

    def __init__(self):
        self.names = []
        self._saved = []

    def _wrap(self, original):
        names = self.names

        def run(kernel, *args, **kwargs):
            if not kwargs.get("warmup", False):
                names.append(kernel_name(kernel))
            return original(kernel, *args, **kwargs)

        return run

    def __enter__(self):
        for cls in launch_classes():
            self._saved.append((cls, cls.__dict__.get("run")))
            cls.run = self._wrap(cls.run)
        return self

    def __exit__(self, *exc_info):
        for cls, saved in reversed(self._saved):
            if saved is None:
                del cls.run
            else:
                cls.run = saved
        self._saved = []
        return False

    def unique_names(self):
        return list(dict.fromkeys(self.names))


def exit_when_orphaned():
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def profile_once(args):
    built = build(args.task, args.candidate, args.device, args.seed, args.init_seed, args.dtype)
    for _ in range(2):
        run_forward(built.candidate, built.inputs, args.device)
    torch.cuda.synchronize()
    with TritonLaunchRecorder() as recorder:
        torch.cuda.profiler.start()
        run_forward(built.candidate, built.inputs, args.device)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    with open(args.names_out, "w") as out:
        json.dump({"names": recorder.unique_names(), "launches": len(recorder.names)}, out)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="egg_worker.ncu_target")
    parser.add_argument("--task", required=True)
    parser.add_argument("--candidate", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--init-seed", type=int, required=True)
    parser.add_argument("--names-out", required=True)
    parser.add_argument("--dtype", default="fp32", choices=tuple(DTYPES))
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sys.stdout.flush()
    os.dup2(2, 1)
    exit_when_orphaned()
    try:
        profile_once(args)
    except Exception as error:  # the candidate's failure, reported as one line
        message = " ".join(str(error).split())
        print(f"ncu_target: {type(error).__name__}: {message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
