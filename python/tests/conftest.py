"""Shared helpers: fixture paths and a client that talks frames to a `python -m egg_worker` subprocess."""

import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tests" / "fixtures" / "tasks"
CANDIDATES = REPO / "tests" / "fixtures" / "candidates"

if os.environ.get("TRITON_INTERPRET") == "1":  # kernels run in this process too: as the worker runs them
    from egg_worker import loader

    loader.quicken_interpreter()


def task_path(name: str) -> str:
    return str(TASKS / f"{name}.py")


def candidate_path(name: str) -> str:
    return str(CANDIDATES / f"{name}.py")


def worker_env(device: str = "cpu") -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    return env


class Worker:
    """One worker subprocess; `request` sends a frame and returns the decoded response."""

    def __init__(self, device: str = "cpu"):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen([sys.executable, "-m", "egg_worker"], cwd=REPO, env=worker_env(device),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.next_id = 1

    def stderr_text(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode("utf-8", "replace")

    def send_bytes(self, data: bytes) -> None:
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def send(self, message: dict) -> None:
        payload = json.dumps(message).encode("utf-8")
        self.send_bytes(struct.pack(">I", len(payload)) + payload)

    def receive(self) -> dict:
        header = self.process.stdout.read(4)
        assert len(header) == 4, f"worker closed its frame pipe (rc {self.process.poll()})"
        (length,) = struct.unpack(">I", header)
        return json.loads(self.process.stdout.read(length))

    def request(self, op: str, **fields) -> dict:
        request_id = self.next_id
        self.next_id += 1
        self.send({"id": request_id, "op": op, **fields})
        response = self.receive()
        assert response["id"] == request_id
        return response

    def evaluate(self, task: str, candidate: str, **fields) -> dict:
        request = {"task": task_path(task), "candidate": candidate_path(candidate), "device": "cpu",
                   "tol": 1e-4, "trials": 3, "seed": 42, "init_seed": 42, "robust_trial": False, **fields}
        response = self.request("evaluate", **request)
        assert response["ok"], response
        return response["result"]

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            stream.close()
        return self.process.returncode


class SpareWorkers:
    """Workers started together (their start-up, mostly importing torch, overlaps); `take` hands one out."""

    def __init__(self, count: int):
        self.spares = [Worker() for _ in range(count)]
        self.taken = []

    def take(self) -> Worker:
        worker = self.spares.pop() if self.spares else Worker()
        self.taken.append(worker)
        return worker

    def close(self) -> None:
        for worker in self.spares + self.taken:
            worker.close()


@pytest.fixture(scope="module")
def spare_workers(request):
    spares = SpareWorkers(getattr(request.module, "SPARE_WORKERS", 1))
    yield spares
    spares.close()


@pytest.fixture
def fresh_worker(spare_workers):
    return spare_workers.take()


@pytest.fixture(scope="session")
def worker():
    """One worker shared by the evaluate tests, as the C++ side shares one across a batch."""
    shared = Worker()
    yield shared
    shared.close()
