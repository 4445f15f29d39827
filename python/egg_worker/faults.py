"""The `fault` op (for tests of the C++ side): make this worker fail in a chosen way.

hang: sleep forever; crash: SIGSEGV to itself; abort: os.abort(); exit: os._exit(3); exception: raise FaultError
(answered ok:false); oom: on cuda allocate until torch raises OutOfMemoryError, free it all and raise FaultError
(ok:false); on cpu raise FaultError('oom fault needs cuda').
"""

import os
import signal
import time

import torch

from egg_worker.loader import RequestError, worker_device_kind

EXIT_CODE = 3
_OOM_CHUNK_BYTES = 1 << 30


class FaultError(Exception):
    """The failure a fault of kind exception or oom produces."""


def _hang() -> None:
    while True:
        time.sleep(3600)


def _crash() -> None:
    os.kill(os.getpid(), signal.SIGSEGV)
    _hang()  # the signal is delivered asynchronously; never answer in the meantime


def _abort() -> None:
    os.abort()


def _exit() -> None:
    os._exit(EXIT_CODE)


def _exception() -> None:
    raise FaultError("fault: exception requested")


def _oom() -> None:
    if worker_device_kind() != "cuda":
        raise FaultError("oom fault needs cuda")
    blocks = []
    try:
        while True:
            blocks.append(torch.empty(_OOM_CHUNK_BYTES, dtype=torch.uint8, device="cuda"))
    except torch.cuda.OutOfMemoryError as error:
        held_bytes = len(blocks) * _OOM_CHUNK_BYTES
        message = f"fault: out of memory after {held_bytes} bytes: {' '.join(str(error).split())[:200]}"
    blocks.clear()
    torch.cuda.empty_cache()
    raise FaultError(message)


KINDS = {"hang": _hang, "crash": _crash, "abort": _abort, "exit": _exit, "exception": _exception, "oom": _oom}


def handle_fault(request: dict) -> dict:
    kind = request.get("kind")
    if kind not in KINDS:
        raise RequestError(f"fault kind must be one of {', '.join(KINDS)}, not {kind!r}")
    KINDS[kind]()
    return {}
