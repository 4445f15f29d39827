"""Black-box tests: run the real ./egg binary on tiny tasks in Triton's interpreter."""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
EGG = ROOT / "egg"
# Kernels that run in this process (the Python API's tests) run in Triton's interpreter, which triton decides
# when it is first imported: an earlier test importing it (egg_worker.reduce does) would otherwise leave later
# candidates' helpers compiled-mode functions. The egg binary gets an environment without it (Egg.env), and
# gpu_compile.py is started without it.
os.environ["TRITON_INTERPRET"] = "1"


class Egg:
    def __init__(self, home: pathlib.Path, workdir: pathlib.Path):
        self.home = home
        self.workdir = workdir
        self.env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        self.env["EGG_HOME"] = str(home)

    def run(self, *args, timeout=300, env=None):
        merged = dict(self.env, **(env or {}))
        return subprocess.run([str(EGG), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                              env=merged, cwd=self.workdir)

    def eval_json(self, task, candidate, *extra, env=None):
        proc = self.run("eval", task, candidate, "--json", "--device", "cpu", *extra, env=env)
        assert proc.stdout.strip(), f"no JSON on stdout; stderr: {proc.stderr}"
        return proc, json.loads(proc.stdout)


@pytest.fixture
def egg(tmp_path):
    work = tmp_path / "work"
    shutil.copytree(FIXTURES, work)
    return Egg(tmp_path / "home", work)
