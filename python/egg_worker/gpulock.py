"""One GPU, several workers: a cross-process lock around everything a worker runs on the GPU.

`egg bench --per-gpu K` starts K workers on each GPU so that one task's CPU work (capture, Triton and
torch.compile builds, planning in the C++ process) overlaps another task's GPU work. Timings stay clean because
every section that launches GPU work holds the GPU's lock, an exclusive flock(2) on the file named by
EGG_GPU_LOCK (set by the bench for every worker of that GPU): a GPU runs one worker's kernels at a time.
Without EGG_GPU_LOCK (one worker per GPU, `egg optimize`, the CPU) `held()` does nothing.

Memory is shared too: before a worker lets go of the lock it frees what PyTorch's caching allocator holds
(`release_memory`), and a worker that shares its GPU keeps no tensors on it between requests (evaluate's cache of
reference outputs stays off), so the worker holding the lock may use the GPU's memory in full.

Each outermost section of a shared GPU logs one line to the worker's stderr (its log under $EGG_HOME/logs):
`egg-gpulock: <what> waited W s, held H s`, which shows where a bench's GPU time goes.

The lock is re-entrant within a process (a section may call another) and is released by the kernel when the
process dies, so a crashed worker never leaves its GPU locked.
"""

import contextlib
import fcntl
import gc
import os
import sys
import threading
import time

ENV = "EGG_GPU_LOCK"

_state = threading.local()


def shared() -> bool:
    """True when this worker shares its GPU with others (EGG_GPU_LOCK is set)."""
    return bool(os.environ.get(ENV))


def release_memory() -> None:
    """Give the CUDA caching allocator's free blocks back to the GPU, when the GPU is shared."""
    torch = sys.modules.get("torch")
    if shared() and torch is not None and torch.cuda.is_initialized():
        gc.collect()
        torch.cuda.empty_cache()


@contextlib.contextmanager
def held(what: str = "gpu work"):
    """Hold the GPU lock named by EGG_GPU_LOCK for the body (a no-op when it is unset); `what` names it in the
    log line."""
    path = os.environ.get(ENV)
    depth = getattr(_state, "depth", 0)
    if not path or depth:
        _state.depth = depth + 1
        try:
            yield
        finally:
            _state.depth -= 1
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        started = time.perf_counter()
        fcntl.flock(fd, fcntl.LOCK_EX)
        acquired = time.perf_counter()
        _state.depth = 1
        try:
            yield
        finally:
            _state.depth = 0
            try:
                release_memory()
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                print(f"egg-gpulock: {what} waited {acquired - started:.2f} s, held "
                      f"{time.perf_counter() - acquired:.2f} s", file=sys.stderr, flush=True)
    finally:
        os.close(fd)


def locked(handler, what: str):
    """`handler` with the whole call under the GPU lock."""
    def call(request):
        with held(what):
            return handler(request)
    return call
