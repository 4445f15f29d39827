"""Compiling candidates' Triton kernels in parallel, before the worker first launches them.

A candidate file may define a module-level `egg_precompile()` that compiles all its Triton kernels for the current
CUDA device without launching them (`kernel.warmup(torch.float32, ..., BLOCK=..., grid=(1,))`). `precompile(paths,
workers, timeout_s)` imports each file as a fresh module in a pool of `workers` processes and calls its
egg_precompile(); Triton's on-disk cache then makes the worker's own first launch cheap. It returns
{index in paths: (status, reason)} for the files that failed: compile_error when the import or egg_precompile
raised or its process died, timeout when it ran past `timeout_s` (its process is killed and replaced). A file
without egg_precompile is imported and nothing else.

Within a process, egg_precompile() runs under Triton's AsyncCompileMode: each warmup hands its compile to a pool of
threads (the CPUs shared among the processes at work), and the call returns once all are built. Triton's passes
and ptxas run outside the GIL, so a network of a hundred kernels (ResNet-101: 108) builds in a fraction of the
serial time (on 2 cores, 12 of ResNet-18's kernels for sm_90: 10.5 s serially, 5.8 s in 2 threads).

The processes come from multiprocessing's forkserver: a fresh interpreter spawned once per worker (the worker's
environment, none of its descriptors but stdin/stdout/stderr, so never the frame pipes; it never touches CUDA) that
imports torch and triton once and then forks each pool process. A pool then starts in milliseconds instead of a
torch import per process and request (seconds each). A pool that cannot start leaves the files uncompiled (the
worker compiles them on first launch) and says so on stderr.
"""

import collections
import concurrent.futures
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import sys
import time

from egg_worker import fence, loader

PRECOMPILE_FUNCTION = "egg_precompile"
START_METHOD = "forkserver"
PRELOADED_MODULES = ["torch", "triton", "egg_worker.precompile"]
STARTUP_TIMEOUT_S = 300.0  # a child's start (the forkserver's own start and torch import, the first time)
STOP_TIMEOUT_S = 10.0
_READY = "ready"


def defines_precompile(path: str) -> bool:
    """Whether the file's text mentions egg_precompile at all (the others need no process of the pool)."""
    try:
        with open(path, "rb") as source:
            return PRECOMPILE_FUNCTION.encode() in source.read()
    except OSError:
        return False


def precompile_one(path: str, threads: int = 1) -> tuple:
    """(status, reason) of importing `path` and calling its egg_precompile(), if it defines one, its compiles
    spread over `threads` threads; rejected when it tried to leave the sandbox (egg_worker.fence)."""
    with fence.watching():
        status, reason = _precompile_one(path, threads)
    violations = fence.take_violations()
    if violations:
        return "rejected", fence.describe(violations, "precompile")
    return status, reason


def _compiling_in_threads(function, threads: int) -> None:
    """Call `function`, its Triton warmups compiled by `threads` threads; returns when every compile has ended
    (the first compile error raised)."""
    try:
        from triton.runtime._async_compile import AsyncCompileMode  # Triton 3.4 and later
    except ImportError:
        AsyncCompileMode = None
    if threads <= 1 or AsyncCompileMode is None:
        function()
        return
    with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="egg-compile") as pool:
        with AsyncCompileMode(pool):
            function()


def _precompile_one(path: str, threads: int) -> tuple:
    try:
        module = loader.import_fresh(path, "egg_precompile")
    except BaseException as error:
        return "compile_error", f"import failed: {loader.one_line(error)}"
    try:
        function = getattr(module, PRECOMPILE_FUNCTION, None)
        if function is None:
            return "ok", ""
        if not callable(function):
            return "compile_error", f"{PRECOMPILE_FUNCTION} is not callable"
        _compiling_in_threads(function, threads)
    except BaseException as error:
        return "compile_error", f"{PRECOMPILE_FUNCTION} failed: {loader.one_line(error)}"
    finally:
        loader.forget(module)
    return "ok", ""


def _child_main(connection) -> None:
    """A pool process: announce readiness, then precompile each (path, threads) received until None or EOF."""
    fence.install()
    connection.send(_READY)
    while True:
        try:
            work = connection.recv()
        except (EOFError, OSError):
            return
        if work is None:
            return
        connection.send(precompile_one(*work))


@dataclasses.dataclass
class _Child:
    process: multiprocessing.process.BaseProcess
    connection: multiprocessing.connection.Connection
    deadline_s: float
    ready: bool = False
    index: int | None = None  # the path it is compiling


def _death(process) -> str:
    process.join(1.0)
    code = process.exitcode
    if code is None:
        return "its process stopped answering"
    return f"its process died ({f'signal {-code}' if code < 0 else f'exit code {code}'})"


class _Pool:
    """The pool's processes and the bookkeeping of one precompile() call."""

    def __init__(self, paths, timeout_s: float, threads: int):
        self.context = multiprocessing.get_context(START_METHOD)
        if START_METHOD == "forkserver":
            self.context.set_forkserver_preload(PRELOADED_MODULES)
        self.paths = paths
        self.timeout_s = timeout_s
        self.threads = threads
        self.pending = collections.deque(range(len(paths)))
        self.children = []
        self.failures = {}
        self.startup_problem = None

    def start_child(self) -> None:
        ours, theirs = self.context.Pipe()
        process = self.context.Process(target=_child_main, args=(theirs,), name="egg-precompile", daemon=True)
        process.start()
        theirs.close()
        self.children.append(_Child(process, ours, time.monotonic() + STARTUP_TIMEOUT_S))

    def busy(self) -> bool:
        return any(child.index is not None for child in self.children)

    def dispatch(self) -> None:
        for child in list(self.children):
            if not (child.ready and child.index is None and self.pending):
                continue
            index = self.pending.popleft()
            try:
                child.connection.send((self.paths[index], self.threads))
            except (OSError, ValueError):
                self.pending.appendleft(index)
                self.drop(child, "it refused work")
                continue
            child.index, child.deadline_s = index, time.monotonic() + self.timeout_s

    def drop(self, child: _Child, why: str) -> None:
        """Kill and forget a child; one lost for a candidate's sake is replaced while work remains."""
        self.children.remove(child)
        _kill(child)
        if child.index is None:
            self.startup_problem = self.startup_problem or why
        elif self.pending:
            self.start_child()

    def receive(self, child: _Child) -> None:
        try:
            message = child.connection.recv()
        except (EOFError, OSError):
            death = _death(child.process)
            if child.index is not None:
                self.failures[child.index] = ("compile_error", f"precompiling failed: {death}")
            self.drop(child, death)
            return
        if message == _READY:
            child.ready = True
            return
        status, reason = message
        if status != "ok":
            self.failures[child.index] = (status, reason)
        child.index = None

    def expire(self, child: _Child) -> None:
        if child.index is not None:
            self.failures[child.index] = (
                "timeout", f"precompiling took over {self.timeout_s:g} s; its process was killed")
        self.drop(child, f"it did not start within {STARTUP_TIMEOUT_S:g} s")

    def step(self) -> None:
        """Wait for the next message or deadline and handle what arrived."""
        deadlines_s = [child.deadline_s for child in self.children if _waited_for(child)]
        timeout_s = max(0.0, min(deadlines_s) - time.monotonic()) if deadlines_s else None
        waiting = [child.connection for child in self.children]
        arrived = multiprocessing.connection.wait(waiting, timeout=timeout_s)
        now_s = time.monotonic()
        for child in list(self.children):
            if child.connection in arrived:
                self.receive(child)
            elif _waited_for(child) and now_s > child.deadline_s:
                self.expire(child)

    def stop(self) -> None:
        for child in self.children:
            try:
                child.connection.send(None)
            except (OSError, ValueError):
                pass
        deadline_s = time.monotonic() + STOP_TIMEOUT_S
        for child in self.children:
            child.process.join(max(0.0, deadline_s - time.monotonic()))
            _kill(child)
        self.children = []


def _waited_for(child: _Child) -> bool:
    """Starting up or compiling: its deadline counts."""
    return child.index is not None or not child.ready


def _kill(child: _Child) -> None:
    if child.process.is_alive():
        child.process.kill()
    child.process.join()
    child.connection.close()


def precompile(paths, workers: int, timeout_s: float, threads: int | None = None) -> dict:
    """{index: (status, reason)} of the paths whose precompilation failed; see the module docstring. `threads`
    compile each file's kernels (default: the CPUs over the processes started)."""
    if not paths:
        return {}
    processes = max(1, min(workers, len(paths)))
    threads = threads or max(1, (os.cpu_count() or 1) // processes)
    pool = _Pool(list(paths), timeout_s, threads)
    try:
        for _ in range(processes):
            pool.start_child()
        while pool.children and (pool.pending or pool.busy()):
            pool.dispatch()
            if pool.children:
                pool.step()
    except Exception as error:  # the pool itself broke: what is left compiles on first launch
        pool.startup_problem = loader.one_line(error)
        for child in list(pool.children):
            if child.index is not None:
                pool.pending.append(child.index)
    finally:
        pool.stop()
    if pool.pending:
        print(f"egg_worker: {len(pool.pending)} candidates not precompiled: the pool's processes failed "
              f"({pool.startup_problem or 'unknown'})", file=sys.stderr)
    return pool.failures
