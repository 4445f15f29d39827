"""Named float32 precision settings of PyTorch, under which the timing baselines run.

The reference output that decides correctness is always computed under `strict` (the worker's process-wide
setting, server.configure_torch). Baselines are timed under each requested setting, side by side:

- `default`: what a fresh `import torch` gives and what KernelBench measures: cuBLAS float32 matmuls exact
  (`torch.backends.cuda.matmul.allow_tf32 = False`, matmul precision "highest"), cuDNN convolutions allowed
  TF32 (`torch.backends.cudnn.allow_tf32 = True`);
- `strict`: TF32 off everywhere (the like-for-like baseline for a candidate held to tol 1e-4);
- `tf32`: TF32 allowed everywhere (`torch.set_float32_matmul_precision("high")` and cuDNN TF32): the
  precision-matched baseline for a candidate that uses tf32 products.

Only the legacy switches are used (`allow_tf32`, `set_float32_matmul_precision`), as users set them; torch refuses
to read them after a mix with the newer `fp32_precision` API, which egg never touches.
"""

import contextlib
import dataclasses

import torch


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str
    matmul_precision: str  # torch.set_float32_matmul_precision: "highest" (no TF32) or "high" (TF32 allowed)
    cudnn_tf32: bool
    description: str


SETTINGS = {
    "default": Setting("default", "highest", True,
                       "PyTorch's defaults: matmul TF32 off, cuDNN TF32 on (KernelBench's baseline)"),
    "strict": Setting("strict", "highest", False, "TF32 off everywhere (matmul and cuDNN)"),
    "tf32": Setting("tf32", "high", True, "TF32 allowed everywhere (matmul precision 'high' and cuDNN)"),
}
DEFAULT_ORDER = ("default", "strict", "tf32")


def get(name: str) -> Setting:
    """The setting called `name`; ValueError for any other name."""
    if name not in SETTINGS:
        raise ValueError(f"unknown precision setting {name!r} (known: {', '.join(SETTINGS)})")
    return SETTINGS[name]


def _current() -> tuple:
    return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32)


def _set(matmul_precision: str, matmul_tf32: bool, cudnn_tf32: bool) -> None:
    torch.set_float32_matmul_precision(matmul_precision)
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
    torch.backends.cudnn.allow_tf32 = cudnn_tf32


def apply(setting: Setting) -> None:
    """Switch the process to `setting` (no restore: for a fresh process such as egg_worker.timeit)."""
    _set(setting.matmul_precision, setting.matmul_precision != "highest", setting.cudnn_tf32)


@contextlib.contextmanager
def applied(setting: Setting):
    """Run a block under `setting`, restoring the process's switches after it (also when it raises)."""
    saved = _current()
    try:
        apply(setting)
        yield setting
    finally:
        _set(*saved)


def describe_current() -> dict:
    """The switches as they are now (for reports: what a baseline actually ran under)."""
    matmul_precision, matmul_tf32, cudnn_tf32 = _current()
    return {"matmul_precision": matmul_precision, "matmul_allow_tf32": bool(matmul_tf32),
            "cudnn_allow_tf32": bool(cudnn_tf32)}
