"""The request loop: read frames, dispatch each request to its op, write one response frame per request.

`serve(frames_in, frames_out)` runs until EOF or `shutdown` and returns the exit status. A malformed frame or an
unknown op is answered ok:false (id null when the frame had none) and serving goes on; a truncated frame ends
the loop. An op that raises is answered ok:false with a one-line error (evaluate turns everything the candidate
does into a result status itself). `profile` and `peaks` live in egg_worker.profile, imported on first use.
"""

import cProfile
import os
import platform
import sys
import time

import torch
import triton

from egg_worker import HARNESS_VERSION, baseline, capture, evaluate, faults, fence, gpulock, launches, loader, screen
from egg_worker.protocol import FrameError, TruncatedFrame, encode_frame, read_frame


def configure_torch() -> None:
    """Process-wide settings the reference runs under: no TF32."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def _cpu_name() -> str:
    return platform.processor() or platform.machine() or "cpu"


def _cpu_memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def device_info() -> dict:
    if loader.worker_device_kind() == "cuda":
        properties = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {"kind": "cuda", "name": properties.name, "sm_count": properties.multi_processor_count,
                "l2_bytes": properties.L2_cache_size, "total_memory_bytes": properties.total_memory}
    return {"kind": "cpu", "name": _cpu_name(), "sm_count": None, "l2_bytes": None,
            "total_memory_bytes": _cpu_memory_bytes()}


def handle_hello(_request: dict) -> dict:
    versions = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
                "cuda": torch.version.cuda}
    return {"worker_version": HARNESS_VERSION, "pid": os.getpid(), "versions": versions, "device": device_info()}


def handle_task_source(request: dict) -> dict:
    path = request.get("task")
    if not isinstance(path, str) or not path:
        raise loader.RequestError("task_source needs a string field 'task'")
    return {"source": loader.task_source(path)}


def _with_result(handler):
    return lambda request: {"result": handler(request)}


def _profile_op(name: str):
    def handle(request: dict) -> dict:
        try:
            from egg_worker import profile
        except Exception as error:
            raise loader.RequestError(f"{name} unavailable: {loader.one_line(error)}") from None
        with gpulock.held(name):
            return {"result": getattr(profile, name)(request)}
    return handle


OPS = {
    "hello": handle_hello,
    "baseline": _with_result(gpulock.locked(baseline.handle_baseline, "baseline")),
    "evaluate": _with_result(gpulock.locked(evaluate.handle_evaluate, "evaluate")),
    "screen": _with_result(screen.handle_screen),
    "capture": _with_result(capture.handle_capture),
    "task_source": handle_task_source,
    "profile": _profile_op("handle_profile"),
    "peaks": _profile_op("measure_peaks"),
    "fault": faults.handle_fault,
}


def error_response(request_id, message: str) -> dict:
    return {"id": request_id, "ok": False, "error": " ".join(message.split())[:2000] or "error"}


def _request_id(request: dict):
    request_id = request.get("id")
    return request_id if isinstance(request_id, int) and not isinstance(request_id, bool) else None


class RequestTrace:
    """EGG_WORKER_PROFILE=DIR: every request runs under cProfile, the process's accumulated statistics are
    rewritten to DIR/worker-<pid>.pstats after each request (so a worker that is killed keeps all but its last
    request), and one line per request goes to stderr: `egg-worker: <op> took S s`. For finding where a bench's
    time goes (`python -m pstats`); off by default."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, f"worker-{os.getpid()}.pstats")
        os.makedirs(directory, exist_ok=True)
        self.profiler = cProfile.Profile()

    def respond(self, request: dict) -> dict:
        started = time.perf_counter()
        self.profiler.enable()
        try:
            return respond(request)
        finally:
            self.profiler.disable()
            self.profiler.dump_stats(self.path)
            print(f"egg-worker: {request.get('op')} took {time.perf_counter() - started:.2f} s", file=sys.stderr,
                  flush=True)


def respond(request: dict) -> dict:
    """The response to one decoded request other than shutdown."""
    request_id = _request_id(request)
    if request_id is None:
        return error_response(None, "request needs an integer id")
    op = request.get("op")
    handler = OPS.get(op) if isinstance(op, str) else None
    if handler is None:
        return error_response(request_id, f"unknown op {op!r}")
    try:
        body = handler(request)
    except loader.RequestError as error:
        return error_response(request_id, str(error))
    except Exception as error:
        return error_response(request_id, loader.one_line(error))
    return {"id": request_id, "ok": True, **body}


def send(frames_out, response: dict) -> None:
    """Write a response; one that cannot be encoded (non-finite number, oversize) becomes an ok:false one."""
    try:
        frame = encode_frame(response)
    except (ValueError, TypeError, FrameError) as error:
        frame = encode_frame(error_response(response.get("id"), f"response not encodable: {loader.one_line(error)}"))
    frames_out.write(frame)
    frames_out.flush()


def _is_shutdown(request: dict) -> bool:
    return request.get("op") == "shutdown" and _request_id(request) is not None


def serve(frames_in, frames_out) -> int:
    configure_torch()
    loader.quicken_interpreter()
    launches.install()
    fence.install()
    trace_dir = os.environ.get("EGG_WORKER_PROFILE")
    answer = RequestTrace(trace_dir).respond if trace_dir else respond
    while True:
        try:
            request = read_frame(frames_in)
        except FrameError as error:
            send(frames_out, error_response(None, str(error)))
            continue
        except TruncatedFrame as error:
            print(f"egg_worker: {error}", file=sys.stderr)
            return 1
        if request is None:
            return 0
        if _is_shutdown(request):
            send(frames_out, {"id": request["id"], "ok": True})
            return 0
        send(frames_out, answer(request))
