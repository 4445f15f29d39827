"""Check the hand-written KernelBench candidates against their tasks at reduced sizes.

    TRITON_INTERPRET=1 .venv/bin/python examples/check_reduced.py [--pass NAME ...] [CANDIDATE.py ...]

For each candidate examples/kernelbench/levelN/X.py the task <kernelbench root>/levelN/X.py is loaded, its
module-level size globals are shrunk, then Model and ModelNew are built the KernelBench way (same seed
before each constructor) and run on fresh inputs for two seeds. A candidate passes when every output has
the reference's shape and dtype, is allclose at atol = rtol = 1e-2, has relative L2 error <= 1e-2, and at
least one Triton kernel was launched. Passes (all by default):
  aligned  the task's distinct integers > 16 (alone or inside a tuple/list) are shrunk, the same value
           everywhere it occurs (so bias_shape still matches out_features), order kept: the largest two
           become 48 and 64, the rest 2, 3, 5, ...; small values (dims, kernel sizes, strides) are kept.
           When the inputs would then exceed ELEMENT_BUDGET elements (the interpreter is slow), only the
           largest one keeps a big size, then none.
  odd      the same with big sizes 37 and 45 and the rest 3, 5, 7, ...: edges that are not tile multiples.
  long     named per-task sizes (LONG_SIZES below) that make the loops of the kernels run several tiles
           with a ragged tail; tasks not listed there are skipped.
The candidate sees the reduced sizes only through its inputs and init arguments.
Exit status: 0 when every candidate passes every pass it ran, 1 otherwise.
"""
import argparse
import importlib.util
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402
import triton  # noqa: E402

EXAMPLES_DIR = Path(__file__).resolve().parent
CANDIDATES_DIR = EXAMPLES_DIR / "kernelbench"
DEFAULT_KERNELBENCH_ROOT = Path(os.environ.get("KERNELBENCH_ROOT", "/work/shared/kernelbench"))
TOLERANCE = 1e-2
INIT_SEED = 42
INPUT_SEEDS = (1, 2)
KEEP_AT_MOST = 16
ELEMENT_BUDGET = 65536
BIG_SIZES = {"aligned": (48, 64), "odd": (37, 45)}
TINY_SIZES = {"aligned": (2, 3, 5, 7, 11), "odd": (3, 5, 7, 11, 13)}
LONG_SIZES = {
    "level1/19_ReLU.py": {"batch_size": 3, "dim": 9001},
    "level1/26_GELU_.py": {"batch_size": 3, "dim": 9001},
    "level1/23_Softmax.py": {"batch_size": 3, "dim": 40009},
    "level1/89_cumsum.py": {"batch_size": 3, "input_shape": (20011,)},
    "level1/94_MSELoss.py": {"batch_size": 5, "input_shape": (30011,)},
    "level1/47_Sum_reduction_over_a_dimension.py": {"batch_size": 3, "dim1": 301, "dim2": 301},
    "level1/4_Matrix_vector_multiplication_.py": {"M": 5, "K": 70001},
    "level1/42_Max_Pooling_2D.py": {"batch_size": 1, "channels": 2, "height": 20, "width": 301},
    "level1/1_Square_matrix_multiplication_.py": {"N": 256},
    "level2/12_Gemm_Multiply_LeakyReLU.py": {"batch_size": 129, "in_features": 256, "out_features": 200},
    "level2/76_Gemm_Add_ReLU.py": {"batch_size": 129, "in_features": 256, "out_features": 200,
                                   "bias_shape": (200,)},
    "level3/1_MLP.py": {"batch_size": 130, "input_size": 96, "layer_sizes": [200, 136], "output_size": 72},
    "level3/2_ShallowWideMLP.py": {"batch_size": 130, "input_size": 96, "hidden_layer_sizes": [264, 136],
                                   "output_size": 72},
}
PASSES = ("aligned", "odd", "long")


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def size_globals(task) -> dict:
    """Module globals that are ints or non-empty tuples/lists of ints (the task's sizes)."""
    sizes = {}
    for name, value in vars(task).items():
        if name.startswith("_"):
            continue
        if is_int(value) or (isinstance(value, (tuple, list)) and value and all(is_int(v) for v in value)):
            sizes[name] = value
    return sizes


def value_mapping(sizes: dict, pass_name: str, n_big: int) -> dict:
    """Maps each distinct integer > KEEP_AT_MOST to a reduced size, keeping their order."""
    values = set()
    for value in sizes.values():
        values.update(value if isinstance(value, (tuple, list)) else [value])
    large = sorted(v for v in values if v > KEEP_AT_MOST)
    n_big = min(n_big, len(large))
    big = BIG_SIZES[pass_name][len(BIG_SIZES[pass_name]) - n_big:]
    tiny = TINY_SIZES[pass_name][:len(large) - n_big]
    if len(tiny) < len(large) - n_big:
        raise ValueError(f"{len(large)} distinct sizes: too many to reduce")
    return dict(zip(large, tiny + big))


def reduced_globals(sizes: dict, mapping: dict) -> dict:
    def shrink(v):
        return mapping.get(v, v)

    reduced = {}
    for name, value in sizes.items():
        if isinstance(value, (tuple, list)):
            reduced[name] = type(value)(shrink(v) for v in value)
        else:
            reduced[name] = shrink(value)
    return reduced


def input_elements(task) -> int:
    return sum(v.numel() for v in task.get_inputs() if isinstance(v, torch.Tensor))


def overrides_for(pass_name: str, task, task_key: str):
    """The globals to set on the task for this pass, or None when the pass does not apply to it."""
    if pass_name == "long":
        return LONG_SIZES.get(task_key)
    sizes = size_globals(task)
    for n_big in range(len(BIG_SIZES[pass_name]), -1, -1):
        reduced = reduced_globals(sizes, value_mapping(sizes, pass_name, n_big))
        for name, value in reduced.items():
            setattr(task, name, value)
        if input_elements(task) <= ELEMENT_BUDGET:
            break
    return reduced


class LaunchCounter:
    """Counts Triton kernel launches by wrapping the run method of jitted (or interpreted) kernels."""

    def __init__(self):
        self.count = 0
        self._originals = []

    def __enter__(self):
        classes = [triton.runtime.jit.JITFunction]
        if hasattr(triton.runtime, "interpreter"):
            classes.append(triton.runtime.interpreter.InterpretedFunction)
        for cls in classes:
            original = cls.run
            self._originals.append((cls, original))
            cls.run = self._wrap(original)
        return self

    def _wrap(self, original):
        def run(fn_self, *args, **kwargs):
            if not kwargs.get("warmup", False):
                self.count += 1
            return original(fn_self, *args, **kwargs)

        return run

    def __exit__(self, *exc):
        for cls, original in self._originals:
            cls.run = original


def to_device(values, device):
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def compare(out, ref) -> tuple:
    """(problem or '', max abs err) for one output against the reference."""
    if not isinstance(out, torch.Tensor):
        return f"output is {type(out).__name__}, not a tensor", math.inf
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return f"got {tuple(out.shape)} {out.dtype}, want {tuple(ref.shape)} {ref.dtype}", math.inf
    out64, ref64 = out.detach().cpu().double(), ref.detach().cpu().double()
    max_abs = (out64 - ref64).abs().max().item() if out64.numel() else 0.0
    if not torch.allclose(out64, ref64, atol=TOLERANCE, rtol=TOLERANCE):
        return "not allclose", max_abs
    rel_l2 = ((out64 - ref64).norm() / ref64.norm().clamp_min(1e-30)).item()
    if rel_l2 > TOLERANCE:
        return f"relative L2 error {rel_l2:.2e}", max_abs
    return "", max_abs


def check(candidate_path: Path, task_path: Path, task_key: str, pass_name: str, device: str) -> dict:
    started_s = time.monotonic()
    task = load_module(task_path, f"task_{pass_name}_{task_path.stem}")
    overrides = overrides_for(pass_name, task, task_key)
    if overrides is None:
        return {"status": "skip", "max_abs": None, "launches": None, "reason": "no sizes for this pass"}
    for name, value in overrides.items():
        setattr(task, name, value)
    candidate = load_module(candidate_path, f"candidate_{pass_name}_{candidate_path.stem}")

    init_inputs = task.get_init_inputs()
    torch.manual_seed(INIT_SEED)
    model = task.Model(*init_inputs).to(device)
    torch.manual_seed(INIT_SEED)
    model_new = candidate.ModelNew(*init_inputs).to(device)

    worst_abs, launches, problems = 0.0, 0, []
    for seed in INPUT_SEEDS:
        torch.manual_seed(seed)
        inputs = to_device(task.get_inputs(), device)
        with torch.no_grad():
            ref = model(*[v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
            with LaunchCounter() as counter:
                out = model_new(*inputs)
        launches = max(launches, counter.count)
        problem, max_abs = compare(out, ref)
        worst_abs = max(worst_abs, max_abs)
        if problem:
            problems.append(f"seed {seed}: {problem}")
    if launches == 0:
        problems.append("no Triton kernel launched")
    sizes = " ".join(f"{k}={v}" for k, v in overrides.items())
    return {"status": "FAIL" if problems else "ok", "max_abs": worst_abs, "launches": launches,
            "reason": "; ".join(problems) or f"{sizes} ({time.monotonic() - started_s:.1f} s)"}


def candidate_files(args) -> list:
    if args.files:
        return [Path(f).resolve() for f in args.files]
    return sorted(CANDIDATES_DIR.glob("level*/*.py"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="candidate files (default: all under examples/kernelbench)")
    parser.add_argument("--pass", dest="passes", action="append", choices=PASSES,
                        help="size pass to run (repeatable; default: all)")
    parser.add_argument("--kernelbench-root", type=Path, default=DEFAULT_KERNELBENCH_ROOT)
    args = parser.parse_args()
    interpreting = os.environ.get("TRITON_INTERPRET") == "1"
    device = "cpu" if interpreting else "cuda"

    failures = 0
    print(f"{'candidate':<50} {'pass':<8} {'result':<6} {'max_abs_err':>11} {'launches':>8}  detail")
    for path in candidate_files(args):
        task_key = f"{path.parent.name}/{path.name}"
        for pass_name in args.passes or PASSES:
            try:
                row = check(path, args.kernelbench_root / task_key, task_key, pass_name, device)
            except Exception as exc:  # a crashing candidate is a failed row, not a crashed checker
                row = {"status": "FAIL", "max_abs": None, "launches": None,
                       "reason": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
            failures += row["status"] == "FAIL"
            max_abs = "-" if row["max_abs"] is None else f"{row['max_abs']:.3e}"
            launches = "-" if row["launches"] is None else str(row["launches"])
            print(f"{task_key:<50} {pass_name:<8} {row['status']:<6} {max_abs:>11} {launches:>8}  "
                  f"{row['reason']}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
