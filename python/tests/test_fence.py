"""egg_worker.fence: the audit hook's verdicts and the check for processes left behind, each in a fresh interpreter
(an audit hook cannot be removed, and a subreaper should not be this test process)."""

import json
import os
import subprocess
import sys
import textwrap

from conftest import REPO

HOOK_SCRIPT = """
import json, os, subprocess, sys
from egg_worker import fence
fence.install()
scratch, home = sys.argv[1], sys.argv[2]
results = {}

def attempt(name, action):
    try:
        action()
    except OSError:
        pass
    results[name] = fence.take_violations()

with fence.watching():
    attempt("write_scratch", lambda: open(os.path.join(scratch, "ok.txt"), "w").close())
    attempt("write_outside", lambda: open(os.path.join(home, "pwned.txt"), "w").close())
    attempt("read_home", lambda: open(os.path.join(home, "secret")).read())
    attempt("read_readable", lambda: open(os.path.join(home, "venv", "lib.py")).read())
    attempt("popen", lambda: subprocess.run(["true"]))
    trusted = {"__name__": "triton.runtime.fake", "subprocess": subprocess}
    exec(compile("subprocess.run(['true'])", "/site-packages/triton/fake.py", "exec"), trusted)
    results["popen_by_triton"] = fence.take_violations()
attempt("write_unwatched", lambda: open(os.path.join(home, "later.txt"), "w").close())
print(json.dumps(results))
"""

STRAY_SCRIPT = """
import json, os, sys, time
from egg_worker import fence
fence.install()
before = fence.descendants()
child = os.fork()
if child == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/bin/sleep", ["sleep", sys.argv[1]])
    os._exit(0)
os.waitpid(child, 0)
# the grandchild is found at once, but it shows as `sleep` only once it has exec'd: wait for that (a loaded machine
# can take more than a moment)
deadline = time.monotonic() + 20
strays = fence.stray_processes(before)
while not any(command.startswith("sleep") for _, command in strays) and time.monotonic() < deadline:
    time.sleep(0.05)
    strays = fence.stray_processes(before)
fence.kill(strays)
print(json.dumps({"strays": strays, "after": fence.stray_processes(before)}))
"""


def run_script(script: str, *args: str, env: dict) -> dict:
    completed = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True,
                               text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(REPO / "python"), **env))
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_the_hook_judges_only_candidate_code_and_names_each_attempt(tmp_path):
    scratch, home = tmp_path / "scratch", tmp_path / "home"
    (home / "venv").mkdir(parents=True)
    scratch.mkdir()
    (home / "secret").write_text("s")
    (home / "venv" / "lib.py").write_text("")
    env = {"EGG_SANDBOX_WRITABLE": str(scratch), "EGG_SANDBOX_READABLE": str(home / "venv"),
           "EGG_SANDBOX_HIDDEN": str(home)}
    results = run_script(HOOK_SCRIPT, str(scratch), str(home), env=env)
    assert results["write_scratch"] == [] and results["read_readable"] == []
    assert "pwned.txt for writing" in results["write_outside"][0]
    assert "the sandbox hides" in results["read_home"][0]
    assert "subprocess.Popen true called by __main__" in results["popen"][0]
    assert results["popen_by_triton"] == [], "Triton's own compiler subprocesses are allowed"
    assert results["write_unwatched"] == [], "the harness's own code is never judged"


def test_a_setsid_double_fork_is_found_and_killed():
    marker = f"4242.{os.getpid()}"
    results = run_script(STRAY_SCRIPT, marker, env={})
    assert [command for _, command in results["strays"]] == [f"sleep {marker}"]
    assert results["after"] == []
    assert subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True).stdout == b""
