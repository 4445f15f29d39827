"""Black-box tests of the ops that read at computed positions and build masks (embedding, index with several
index tensors, bitwise ops, nearest and linear interpolation) and of the row sorts (sort, topk): each task
compiled by the real `egg compile` with nothing left to PyTorch, checked by `egg eval` in Triton's interpreter,
and every kernel compiled for sm_90 by Triton's own compiler."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, Egg

GPU_COMPILE = ROOT / "tests" / "blackbox" / "gpu_compile.py"
EXPERT_TASKS = ROOT / "tests" / "fixtures" / "tasks" / "expert"
# candidate -> (task, seed)
CANDIDATES = {**{f"mask_s{seed}": ("mask_embedding.py", seed) for seed in range(2)},
              "interpolate": ("interpolate.py", 0), "sort": ("sort_topk.py", 0), "sort_s1": ("sort_topk.py", 1)}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    root = tmp_path_factory.mktemp("indexing")
    shutil.copytree(EXPERT_TASKS, root / "work", ignore=shutil.ignore_patterns("__pycache__"))
    egg = Egg(root / "home", root / "work")
    reports = {}
    for name, (task, seed) in CANDIDATES.items():
        proc = egg.run("compile", task, "--out", f"out/{name}.py", "--json", "--seed", seed, "--device", "cpu")
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
        reports[name] = json.loads(proc.stdout)
    return egg, reports


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_nothing_is_left_to_pytorch(compiled, name):
    _, reports = compiled
    assert reports[name]["pytorch_ops"] == [], reports[name]["planner_notes"]


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_candidate_is_correct(compiled, name):
    egg, _ = compiled
    proc, result = egg.eval_json(CANDIDATES[name][0], f"out/{name}.py", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert result["status"] == "ok" and result["correct"] is True, result["reason"]


@pytest.mark.parametrize("name", sorted(CANDIDATES))
def test_every_kernel_compiles_for_the_gpu(compiled, name):
    egg, _ = compiled
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(GPU_COMPILE), str(egg.workdir / "out" / f"{name}.py")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout
