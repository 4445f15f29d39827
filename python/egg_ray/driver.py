"""The driver: submits one Ray task per suite task, runs a task again when its node or worker dies (at most
job["retries"] more times), writes each finished task's files under OUT/tasks/<task>/ and its store under
OUT/.ray/, and reports it as one event line (see src/cli/bench_ray.h)."""
import json
import pathlib
import sys
import time

from . import task as task_module


def resources(job: dict) -> dict:
    """One GPU (a 1/per_gpu share of one) per task, or one CPU core with --device cpu."""
    if job["device"] == "cuda":
        return {"num_cpus": 1, "num_gpus": 1.0 / max(1, job["per_gpu"])}
    return {"num_cpus": 1, "num_gpus": 0}


def connect(ray, address: str) -> None:
    """local: a Ray instance started on this host for this run; auto or an address: an existing cluster."""
    options = {"log_to_driver": False, "include_dashboard": False}
    if address == "local":
        ray.init(**options)
    else:
        ray.init(address=address, **options)


def describe(error: Exception) -> str:
    """A Ray error in one line (its text runs to many)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    first = lines[0].split(". ")[0].rstrip(".") if lines else ""
    return f"{type(error).__name__}: {first}"


def error_row(spec: dict, state: dict) -> dict:
    """The row of a task that never finished: an error row, which --resume runs again."""
    return {"task": spec["name"], "path": spec["path"], "level": spec["level"], "status": "error",
            "correct": False, "reason": "every attempt failed: " + "; ".join(state["failures"]),
            "wall_s": time.monotonic() - state["start"]}


class Driver:
    def __init__(self, ray, job: dict, emit):
        self.ray = ray
        self.job = job
        self.emit = emit
        self.out = pathlib.Path(job["out"])
        self.remote = ray.remote(task_module.run_task).options(max_retries=0, **resources(job))
        self.specs = {item["path"]: self.spec(item) for item in job["tasks"]}
        self.states = {path: {"attempts": 0, "failures": [], "start": time.monotonic()} for path in self.specs}
        self.running = {}

    def spec(self, item: dict) -> dict:
        path = pathlib.Path(item["path"])
        return {"name": path.name, "path": item["path"], "level": item["level"], "source": path.read_text(),
                "egg": self.job["egg"], "egg_args": self.job["egg_args"]}

    def submit(self, path: str) -> None:
        self.states[path]["attempts"] += 1
        self.running[self.remote.remote(self.specs[path])] = path

    def run(self) -> None:
        for path in self.specs:
            self.submit(path)
        while self.running:
            ready, _ = self.ray.wait(list(self.running), num_returns=1)
            for ref in ready:
                self.settle(self.running.pop(ref), ref)

    def settle(self, path: str, ref) -> None:
        state = self.states[path]
        try:
            result = self.ray.get(ref)
        except self.ray.exceptions.RayError as error:  # the node or the worker died, or the task raised
            result = {"failure": describe(error), "node": "?"}
        if "failure" not in result:
            self.finish(path, result)
            return
        state["failures"].append(f"attempt {state['attempts']} on node {result['node']}: {result['failure']}")
        if state["attempts"] <= self.job["retries"]:
            self.emit({"event": "retry", "task": path, "attempt": state["attempts"], "reason": result["failure"]})
            self.submit(path)
            return
        row = error_row(self.specs[path], state)
        row["ray"] = {"node": result["node"], "attempts": state["attempts"], "failures": state["failures"]}
        self.emit({"event": "finished", "task": path, "row": row, "store": None})

    def finish(self, path: str, result: dict) -> None:
        state = self.states[path]
        stem = pathlib.Path(path).stem
        folder = self.out / "tasks" / stem
        for name, data in result["files"].items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        store = None
        if result["store"] is not None:
            store = self.out / ".ray" / f"{stem}.db"
            store.parent.mkdir(parents=True, exist_ok=True)
            store.write_bytes(result["store"])
        row = result["row"]
        row["ray"] = {"node": result["node"], "attempts": state["attempts"], "failures": state["failures"]}
        self.emit({"event": "finished", "task": path, "row": row, "store": str(store) if store else None})


def run(job_path: str, emit) -> int:
    """The whole job; 2 (after an error event) when Ray is missing or the cluster cannot be reached."""
    job = json.loads(pathlib.Path(job_path).read_text())
    try:
        import ray
        from ray import cloudpickle
    except ImportError:
        emit({"event": "error", "message": f"--ray needs the ray package in {sys.executable} "
                                           "(pip install ray)"})
        return 2
    cloudpickle.register_pickle_by_value(task_module)  # nodes need egg, not this package
    try:
        connect(ray, job["address"])
    except Exception as error:  # ConnectionError, RuntimeError, ValueError for a bad address
        emit({"event": "error", "message": f"cannot reach the Ray cluster at {job['address']}: {describe(error)}"})
        return 2
    try:
        Driver(ray, job, emit).run()
    finally:
        ray.shutdown()
    return 0
