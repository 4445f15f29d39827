"""Black-box tests of the sandbox (docs/harness.md, "Sandbox"): planted candidates that compute ReLU right and also
try to leave the sandbox. None of their side effects may happen, no process may outlive an evaluation, each is
recorded `rejected` (`crash` for the memory hog) with its reason, and the honest candidate beside them passes.

One `egg optimize --backend llm` run takes every planted candidate as a seed, so a single egg process serves
them all (its worker replaced after each); a few `egg eval` calls cover eval's own policy. HOME is a temporary
folder, so nothing touches the real one.
"""
import json
import os
import pathlib
import random
import socket
import sqlite3
import subprocess
import threading
import time
import uuid

import pytest

import fake_llm as f

SECRET = "sk-egg-sandbox-secret-0123456789"
SSH_KEY = "-----BEGIN egg-sandbox-test key 0123456789-----"
MEMORY_LIMIT_GIB = "2"

GUARDED = """
try:
{body}
except BaseException as error:  # the sandbox refuses; the answer stays right
    print("refused:", type(error).__name__, error)
"""

DETACH = """\
import os
pid = os.fork()
if pid == 0:
    try:
        os.setsid()
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "{marker}"])
    finally:
        os._exit(0)
os.waitpid(pid, 0)"""

ENVIRONMENT = """\
import os
print(dict(os.environ))
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            print(pid, open(f"/proc/{pid}/environ", "rb").read())
        except OSError as error:
            print(pid, error)"""

MEMORY = """\
chunks = []
while True:
    chunks.append(b"x" * (64 << 20))
"""


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection it accepts."""

    def __init__(self):
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.socket.settimeout(0.2)
        self.port = self.socket.getsockname()[1]
        self.accepted = []
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                connection, peer = self.socket.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted.append(peer)
            connection.close()

    def close(self):
        self.stopping = True
        self.thread.join()
        self.socket.close()


def guarded(body: str) -> str:
    return GUARDED.format(body="\n".join("    " + line for line in body.splitlines()))


def sleeping(marker: str) -> list:
    out = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    return out.stdout.split()


@pytest.fixture
def planted(egg, tmp_path):
    """The planted candidates' sources by name, and what the test holds to prove their side effects."""
    home = tmp_path / "fakehome"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SSH_KEY)
    tmp_file = pathlib.Path("/tmp") / f"egg-sandbox-test-{uuid.uuid4().hex}.txt"
    marker = f"31337.{random.randrange(10**6):06d}"
    listener = Listener()
    honest = (egg.workdir / "relu_ok.py").read_text()
    hostile = {
        "write_home": guarded(f"open({str(home / 'egg-was-here.txt')!r}, 'w').write('pwned')"),
        "write_tmp": guarded(f"open({str(tmp_file)!r}, 'w').write('pwned')"),
        "read_home": guarded(f"print(open({str(home / '.ssh' / 'id_rsa')!r}).read())"),
        "connect": guarded(f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), 3).sendall(b'x')"),
        "detach": guarded(DETACH.format(marker=marker)),
        "environment": guarded(ENVIRONMENT),
        "memory": MEMORY,
    }
    sources = {name: body + "\n" + honest for name, body in hostile.items()}
    egg.env["HOME"] = str(home)
    yield {"sources": sources, "honest": honest, "home": home, "tmp_file": tmp_file, "marker": marker,
           "listener": listener}
    listener.close()
    for pid in sleeping(marker):
        os.kill(int(pid), 9)
    tmp_file.unlink(missing_ok=True)


def assert_no_side_effects(egg, planted, outputs: str):
    assert not (planted["home"] / "egg-was-here.txt").exists(), "a candidate wrote into the home directory"
    assert not planted["tmp_file"].exists(), "a candidate wrote into /tmp outside egg's scratch"
    assert planted["listener"].accepted == [], "a candidate reached the test's TCP listener"
    assert sleeping(planted["marker"]) == [], "a detached process outlived the evaluation"
    for text in (SECRET, SSH_KEY):
        assert text not in outputs
        for path in egg.home.rglob("*"):
            if path.is_file():
                assert text.encode() not in path.read_bytes(), path
    assert not (egg.home / "sandbox").exists() or os.listdir(egg.home / "sandbox") == ["cache"], \
        "the run's sandbox folders are removed when egg exits"


EXPECTED_REASONS = {
    "write_home": "egg-was-here.txt for writing",
    "write_tmp": "for writing, outside the sandbox's scratch folder",
    "read_home": "the sandbox hides",
    "connect": "socket.connect to 127.0.0.1",
    "detach": "os.fork",
    "environment": "another process's environment",
}


def test_llm_run_rejects_each_planted_candidate_and_keeps_the_honest_one(egg, planted):
    names = list(planted["sources"])
    seeds = [f.code(planted["sources"][name], description=name) for name in names]
    seeds.append(f.code(planted["honest"], description="honest"))
    scenario = f.Scenario({"code:stage1.seeds": seeds})
    started = time.monotonic()
    with f.FakeLlm("openai", scenario) as server:
        proc = egg.run("optimize", "task_relu.py", "--backend", "llm", "--device", "cpu", "--out", "out",
                       "--provider", "openai", "--base-url", server.base_url, "--model", "fake-model",
                       "--seeds", str(len(seeds)), "--rounds", "0", "--debug-attempts", "0", "--no-profile",
                       "--memory-limit", MEMORY_LIMIT_GIB, env={"OPENAI_API_KEY": SECRET}, timeout=600)
    print(f"egg optimize with {len(seeds)} planted seeds took {time.monotonic() - started:.1f} s")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((egg.workdir / "out" / "report.json").read_text())
    assert report["status"] == "ok"
    assert report["sandbox"]["enabled"] is True, report["sandbox"]
    seeds_run = report["stages"][0]["candidates"][:len(seeds)]
    outcomes = {candidate["description"]: candidate for candidate in seeds_run}
    for name, expected in EXPECTED_REASONS.items():
        assert outcomes[name]["status"] == "rejected", (name, outcomes[name])
        assert expected in outcomes[name]["reason"], (name, outcomes[name]["reason"])
    assert outcomes["memory"]["status"] == "crash", outcomes["memory"]
    assert "--memory-limit" in outcomes["memory"]["reason"]
    assert outcomes["honest"]["status"] == "ok"
    with sqlite3.connect(egg.home / "egg.db") as db:
        stored = dict(db.execute("SELECT status, COUNT(*) FROM evaluations GROUP BY status").fetchall())
    assert stored.get("rejected") == len(EXPECTED_REASONS) and stored.get("crash") == 1, stored
    out_files = "".join(p.read_text() for p in (egg.workdir / "out").rglob("*") if p.is_file())
    assert_no_side_effects(egg, planted, proc.stdout + proc.stderr + out_files)


def test_eval_rejects_a_candidate_that_tries_everything_at_once(egg, planted):
    everything = "\n".join(planted["sources"][name].split("\n" + planted["honest"])[0]
                           for name in ("write_home", "write_tmp", "read_home", "connect", "detach"))
    (egg.workdir / "everything.py").write_text(everything + "\n" + planted["honest"])
    proc, result = egg.eval_json("task_relu.py", "everything.py", env={"OPENAI_API_KEY": SECRET})
    assert proc.returncode == 1
    assert result["status"] == "rejected" and result["reason"].startswith("sandbox: candidate opened"), result
    assert "and 4 more" in result["reason"] and "(import)" in result["reason"]
    assert_no_side_effects(egg, planted, proc.stdout + proc.stderr)


def test_without_the_sandbox_a_detached_process_is_still_killed(egg, planted):
    (egg.workdir / "detach.py").write_text(planted["sources"]["detach"])
    proc, result = egg.eval_json("task_relu.py", "detach.py", "--no-sandbox")
    assert proc.returncode == 1
    assert result["status"] == "rejected", result
    assert "left 1 processes running" in result["reason"] and planted["marker"] in result["reason"]
    assert sleeping(planted["marker"]) == []


def test_eval_warns_and_runs_unsandboxed_where_bwrap_is_missing(egg):
    proc, result = egg.eval_json("task_relu.py", "relu_ok.py", env={"EGG_BWRAP": "/nonexistent/bwrap"})
    assert proc.returncode == 0 and result["status"] == "ok"
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("egg: warning: running candidates without a sandbox")
    assert "/nonexistent/bwrap" in warnings[0]


def test_llm_backend_refuses_to_run_without_the_sandbox(egg):
    proc = egg.run("optimize", "task_relu.py", "--backend", "llm", "--device", "cpu", "--provider", "openai",
                   "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                   env={"EGG_BWRAP": "/nonexistent/bwrap", "OPENAI_API_KEY": SECRET})
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("egg: error: the sandbox cannot start:"), proc.stderr
    assert "/nonexistent/bwrap" in lines[0] and "--no-sandbox" in lines[0]
