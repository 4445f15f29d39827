"""One suite task on a Ray node: the node's egg runs it in a scratch folder; the row, files and store come back.

Runs inside a Ray worker; `run_task` returns {"row", "files", "store", "node"} or, when egg ended without a row
(it crashed or was killed), {"failure", "node"}. The egg process dies with the Ray worker (PR_SET_PDEATHSIG), so a
lost worker leaves nothing running.
"""
import ctypes
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile

PR_SET_PDEATHSIG = 1
EGG_ENV = "EGG_RAY_EGG"  # a node's egg when it is not where the driver's is, nor on PATH


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def egg_binary(driver_egg: str) -> str:
    """The node's egg: $EGG_RAY_EGG, else the driver's path when it exists here, else `egg` on PATH."""
    for candidate in (os.environ.get(EGG_ENV), driver_egg, shutil.which("egg")):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError(f"no egg on this node (set {EGG_ENV} or put egg on PATH)")


def _last_json_line(text: str):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def _files(folder: pathlib.Path) -> dict:
    if not folder.is_dir():
        return {}
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def _node() -> str:
    try:
        import ray
        return f"{ray.util.get_node_ip_address()} ({ray.get_runtime_context().get_node_id()[:8]})"
    except Exception:  # outside Ray (the tests of this module)
        return "local"


def run_task(spec: dict) -> dict:
    """spec: {"name", "source", "level", "egg", "egg_args"}, egg_args being the driver's egg command line."""
    node = _node()
    with tempfile.TemporaryDirectory(prefix="egg-ray-") as scratch:
        scratch = pathlib.Path(scratch)
        task_file = scratch / "suite" / spec["name"]
        task_file.parent.mkdir()
        task_file.write_text(spec["source"])
        store = scratch / "store.db"
        argv = [egg_binary(spec["egg"]), *spec["egg_args"], "--ray-task", str(task_file), "--ray-level",
                str(spec["level"]), "--ray-store", str(store), "--out", str(scratch / "out")]
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=_die_with_parent, cwd=scratch)
        sys.stderr.write(proc.stderr)  # into the Ray worker's log
        row = _last_json_line(proc.stdout)
        if proc.returncode != 0 or row is None:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return {"failure": f"egg exited with status {proc.returncode}: {last}", "node": node}
        return {"row": row, "files": _files(scratch / "out" / "tasks" / task_file.stem),
                "store": store.read_bytes() if store.is_file() else None, "node": node}
