"""Black-box tests of the expert backend through the real binary: `egg compile`, `egg optimize` (expert, the
default backend) and `egg bench`, on tiny tasks (tests/fixtures/tasks/expert) in Triton's interpreter.

Every egg process pays for a worker start (importing torch), so each command whose output several tests read
runs once, in a module-scoped fixture with its own EGG_HOME."""
import concurrent.futures
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, Egg

GPU_COMPILE = ROOT / "tests" / "blackbox" / "gpu_compile.py"

EXPERT_TASKS = ROOT / "tests" / "fixtures" / "tasks" / "expert"
STAGES = ["stage1.seeds", "stage1.algorithm", "stage2.mapping", "stage2.tiling", "stage2.memory"]
KERNEL_FIELDS = {"name", "kind", "ops", "design", "fusion"}
BENCH_TASKS = ["relu_scale_64.py", "softmax_8x32.py", "sum_mid_dim.py"]
# candidate name -> task: LSTM (two bidirectional layers, batch_first, h0/c0 given, all three outputs), GRU (two
# layers, h0 given), Elman RNNs (a bidirectional tanh layer without biases into a two-layer ReLU stack, zero states)
RECURRENT_TASKS = {"lstm": "lstm_bidir_state", "gru": "gru_stack", "rnn": "rnn_tanh_relu"}

DATA_DEPENDENT_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''


COMPILE_WORKERS = 2  # the compiled fixture's concurrent `egg compile` runs


def make_egg(tmp_path_factory, name: str) -> Egg:
    root = tmp_path_factory.mktemp(name)
    shutil.copytree(EXPERT_TASKS, root / "work", ignore=shutil.ignore_patterns("__pycache__"))
    return Egg(root / "home", root / "work")


def single_error_line(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("egg: error:"), lines[0]
    assert "Traceback" not in proc.stderr
    return lines[0]


def design_line(source: str) -> dict:
    (line,) = [line for line in source.splitlines() if line.startswith("# egg-design: ")]
    return json.loads(line[len("# egg-design: "):])


def code_lines(source: str) -> list:
    """The candidate without its comment lines (where the design and the summary are written)."""
    return [line for line in source.splitlines() if not line.lstrip().startswith("#")]


def plain_seed(seed: int) -> list:
    """egg compile's arguments for a seed's design without the CUDA graph `--seed 0` may add (the record as
    given: seed 0's plan defaults)."""
    return ["--design", json.dumps({"seed": 0})] if seed == 0 else ["--seed", str(seed)]


def launched(lines: list) -> list:
    """The kernels a candidate's forward launches, in order (a pack's launch inside the function its _egg_kept call keeps too)."""
    return [name for line in lines for name in re.findall(r"\b(egg_k\w+)\[", line)]


def rows(egg: Egg, sql: str) -> list:
    with sqlite3.connect(egg.home / "egg.db") as db:
        return db.execute(sql).fetchall()


# ---- egg compile ----

def two_products(algorithm, mm_precision, bmm_precision):
    """The design record of a task with a plain product (egg_k0_mm, 32x32 tiles) and a batched one (egg_k1_bmm,
    16x16), both in `algorithm`."""
    tiles = {"rblock": 16, "num_warps": 4, "num_stages": 2}
    return json.dumps({"seed": 1, "kernels": {
        "egg_k0_mm": {"algorithm": algorithm, "xblock": 32, "yblock": 32, **tiles, "precision": mm_precision},
        "egg_k1_bmm": {"algorithm": algorithm, "xblock": 16, "yblock": 16, **tiles, "precision": bmm_precision}}})


def nhwc_design(precision):
    """A design record with the one convolution of a task channels-last, in `precision` products."""
    return json.dumps({"seed": 1, "kernels": {"egg_k0_convolution": {
        "algorithm": "nhwc", "xblock": 32, "yblock": 16, "rblock": 16, "num_warps": 4, "num_stages": 2,
        "precision": precision}}})


CAPTURE_TASKS = """
import json, sys
from pathlib import Path
from egg_worker import capture
for task in sys.argv[2:]:
    result = capture.handle_capture({"task": task, "device": "cpu"})
    assert result["status"] == "ok", (task, result)
    (Path(sys.argv[1]) / task.replace(".py", ".graph.json")).write_text(json.dumps(result["graph"]))
"""


def capture_graphs(out: Path, groups: list, cwd: Path) -> None:
    """The worker's capture of each task (file names in cwd) saved as out/<task>.graph.json, as `egg compile
    --graph` reads it: one Python process per group, the groups at once."""
    out.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python"), "TRITON_INTERPRET": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", CAPTURE_TASKS, str(out), *group], cwd=cwd, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for group in groups if group]
    for proc in procs:
        output, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, output


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """softmax_8x32 at seeds 0 and 1 and as the design record {"seed": 2}, and the conv task, compiled once."""
    egg = make_egg(tmp_path_factory, "compile")
    commands = {
        "seed0": ["softmax_8x32.py", "--out", "out/softmax_s0.py", "--json"],
        "seed1": ["softmax_8x32.py", "--out", "out/softmax_s1.py", "--json", "--seed", "1"],
        "design2": ["softmax_8x32.py", "--out", "out/softmax_d2.py", "--design", '{"seed": 2}'],
        "conv": ["conv_relu_bias.py", "--out", "out/conv.py", "--json"],
        "convt": ["conv_transpose_grouped.py", "--out", "out/convt.py", "--json"],
        "convt1": ["conv_transpose_1d.py", "--out", "out/convt1.py", "--json"],
        "convt3": ["conv_transpose_3d.py", "--out", "out/convt3.py", "--json"],
        "unfold": ["unfold_patches.py", "--out", "out/unfold.py", "--json"],
        "pad": ["pad_borders.py", "--out", "out/pad.py", "--json"],
        "index": ["index_lookup.py", "--out", "out/index.py", "--json"],
        **{f"dense{seed}": ["dense_cat_conv.py", "--out", f"out/dense_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(3)},
        **{f"dw{seed}": ["bn_depthwise_gemm.py", "--out", f"out/dw_s{seed}.py", "--seed", str(seed)]
           for seed in range(3)},
        **{f"deepk{seed}": ["deep_k_products.py", "--out", f"out/deepk_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(2)},
        **{f"small{seed}": ["small_group_convs.py", "--out", f"out/small_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(2)},
        # three slices of a K of 3000 in steps of 64: the last slice is shorter than the others
        "deepk_ragged": ["deep_k_products.py", "--out", "out/deepk_ragged.py", "--json", "--design",
                         json.dumps({"seed": 1, "kernels": {"egg_k1_bmm": {
                             "algorithm": "splitk", "split": 3, "xblock": 32, "yblock": 64, "rblock": 64,
                             "num_warps": 4, "num_stages": 2, "precision": "ieee"}}})],
        **{f"mv{seed}": ["mat_vec.py", "--out", f"out/mv_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(2)},
        # three K slices of 2048 over a K of 6000 (the last one shorter), 8 rows a program
        "mv_split": ["mat_vec.py", "--out", "out/mv_split.py", "--json", "--design",
                     json.dumps({"seed": 0, "kernels": {"egg_k0_mm": {
                         "algorithm": "gemv", "split": 3, "xblock": 8, "yblock": 1, "rblock": 256,
                         "num_warps": 4, "num_stages": 3, "precision": "ieee"}}})],
        "tri": ["triangular.py", "--out", "out/tri.py", "--json"],
        # channels-last implicit GEMMs: 1-D, 2-D (tf32x3 products) and 3-D (18 taps), and DenseNet's convolutions
        # over a normalized concatenation (computed by the repack launch)
        "nhwc": ["nhwc_convs.py", "--out", "out/nhwc.py", "--json", "--design", json.dumps({"seed": 1, "kernels": {
            "egg_k0_convolution": {"algorithm": "nhwc", "xblock": 32, "yblock": 16, "rblock": 16, "num_warps": 4,
                                   "num_stages": 2, "precision": "ieee"},
            "egg_k1_convolution_1": {"algorithm": "nhwc", "xblock": 64, "yblock": 16, "rblock": 16,
                                     "num_warps": 4, "num_stages": 3, "precision": "tf32x3"},
            "egg_k2_convolution_2": {"algorithm": "nhwc", "xblock": 64, "yblock": 16, "rblock": 16,
                                     "num_warps": 4, "num_stages": 2, "precision": "ieee"}}})],
        # transposed convolutions channels-last: per output phase (stride, groups, dilation, output padding) in
        # tf32x3 and ieee products, and a stride-1 one that seed 2 takes so (16 channels a group)
        "convt_nhwc": ["conv_transpose_grouped.py", "--out", "out/convt_nhwc.py", "--json", "--design",
                       nhwc_design("tf32x3")],
        "convt3_nhwc": ["conv_transpose_3d.py", "--out", "out/convt3_nhwc.py", "--json", "--design",
                        nhwc_design("ieee")],
        "convt_s1": ["conv_transpose_stride1.py", "--out", "out/convt_s1.py", "--json", "--seed", "2"],
        "dense_nhwc": ["dense_cat_conv.py", "--out", "out/dense_nhwc.py", "--json", "--design", json.dumps(
            {"seed": 1, "kernels": {name: {"algorithm": "nhwc", "xblock": 128, "yblock": 64, "rblock": 16,
                                           "num_warps": 8, "num_stages": 2, "precision": "ieee"}
                                    for name in ("egg_k0_convolution", "egg_k2_convolution_1")}})],
        # the same GEMMs in one K loop over (tap, channel step): 32 and 48 channels in steps of 16; a 3-D
        # transposed one whose phases lack taps (their steps masked off, kend)
        "dense_nhwck": ["dense_cat_conv.py", "--out", "out/dense_nhwck.py", "--json", "--design", json.dumps(
            {"seed": 1, "kernels": {name: {"algorithm": "nhwck", "xblock": 128, "yblock": 64, "rblock": 16,
                                           "num_warps": 8, "num_stages": 2, "precision": "tf32x3"}
                                    for name in ("egg_k0_convolution", "egg_k2_convolution_1")}})],
        "convt3_nhwck": ["conv_transpose_3d.py", "--out", "out/convt3_nhwck.py", "--json", "--design",
                         nhwc_design("ieee").replace('"nhwc"', '"nhwck"')],
        **{f"att{seed}": ["attention.py", "--out", f"out/att_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(2)},
        "att_masked": ["attention_masked_rows.py", "--out", "out/att_masked.py", "--json"],
        **{f"nan{seed}": ["nan_extrema.py", "--out", f"out/nan_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(3)},
        "intdiv": ["int_division.py", "--out", "out/intdiv.py", "--json"],
        # concatenations written in place by their pieces' kernels, and the same plan with them copied
        **{f"cat{seed}": ["cat_in_place.py", "--out", f"out/cat_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(3)},
        "cat_apart": ["cat_in_place.py", "--out", "out/cat_apart.py", "--json", "--design",
                      '{"seed": 0, "plan": {"concat_in_place": false}}'],
        # the two linear pieces in split K: the combine launch stores each into its slice
        "cat_splitk": ["cat_in_place.py", "--out", "out/cat_splitk.py", "--json", "--design", json.dumps(
            {"seed": 0, "kernels": {name: {"algorithm": "splitk", "split": 2, "xblock": 16, "yblock": 16,
                                           "rblock": 32, "num_warps": 4, "num_stages": 2, "precision": "ieee"}
                                    for name in ("egg_k6_addmm", "egg_k7_addmm_1")}})],
        # sums over products' columns folded into passes over their inputs (seeds 0 and 1, the fold off)
        # (seed 0 as a record: its forward as written, without the CUDA graph `--seed 0` wraps its launches in)
        **{f"fold{seed}": ["summed_products.py", "--out", f"out/fold_s{seed}.py", "--json", *plain_seed(seed)]
           for seed in range(2)},
        **{f"pool{seed}": ["pooled_convolutions.py", "--out", f"out/pool_s{seed}.py", "--json", *plain_seed(seed)]
           for seed in range(2)},
        # reductions over a product's columns finished in its tile (seed 0), apart (seed 1), and in the
        # channels-last and K-major forms
        **{f"colred{seed}": ["column_reductions.py", "--out", f"out/colred_s{seed}.py", "--json", "--seed", str(seed)]
           for seed in range(2)},
        "colred_forms": ["column_reductions.py", "--out", "out/colred_forms.py", "--json", "--design", json.dumps(
            {"seed": 0, "kernels": {
                "egg_k0_convolution": {"algorithm": "nhwc", "xblock": 64, "yblock": 32, "rblock": 16,
                                       "num_warps": 4, "num_stages": 2, "precision": "ieee"},
                "egg_k2_convolution_2": {"algorithm": "nhwc", "xblock": 32, "yblock": 32, "rblock": 16,
                                         "num_warps": 4, "num_stages": 2, "precision": "tf32x3"},
                "egg_k3_addmm": {"algorithm": "kmajor", "xblock": 16, "yblock": 64, "rblock": 16,
                                 "num_warps": 4, "num_stages": 2, "precision": "tf32x3"}}})],
        "fold_off": ["summed_products.py", "--out", "out/fold_off.py", "--json", "--design",
                     '{"seed": 0, "plan": {"fold_summed_products": false}}'],
        # tf32 products, 128 query rows x 32 keys in 8 warps for the first, 32 x 16 for MinGPT's
        "att_tiles": ["attention.py", "--out", "out/att_tiles.py", "--json", "--design", json.dumps(
            {"seed": 0, "precision": "tf32", "kernels": {
                "egg_k0_bmm_1": {"algorithm": "flash", "xblock": 128, "yblock": 32, "num_warps": 8,
                                 "num_stages": 3, "precision": "tf32"},
                "egg_k2_bmm_5": {"algorithm": "flash", "xblock": 32, "yblock": 16, "num_warps": 4,
                                 "num_stages": 1, "precision": "tf32"}}})],
        **{name: [f"{task}.py", "--out", f"out/{name}.py", "--json"] for name, task in RECURRENT_TASKS.items()},
        "lstm_tf32": ["lstm_bidir_state.py", "--out", "out/lstm_tf32.py", "--json",
                      "--design", '{"seed": 0, "precision": "tf32"}'],
        # stage2.memory's CUDA-graph move (the interpreter runs the forward as it is, the graph needs a GPU)
        "lstm_graph": ["lstm_bidir_state.py", "--out", "out/lstm_graph.py", "--json",
                       "--design", '{"seed": 0, "plan": {"cuda_graph": true}}'],
        "lstm_plain": ["lstm_bidir_state.py", "--out", "out/lstm_plain.py", "--json", "--design", '{"seed": 0}'],
        "lstm_seed1": ["lstm_bidir_state.py", "--out", "out/lstm_seed1.py", "--json", "--seed", "1"],
        # both products over aligned copies of their operands (29- and 41-float rows; a computed transposed view)
        "aligned": ["irregular_products.py", "--out", "out/aligned.py", "--json", "--design",
                    two_products("aligned", "ieee", "tf32x3")],
        # the same products with B transposed into K-contiguous rows first (tensor-core products)
        "kmajor": ["irregular_products.py", "--out", "out/kmajor.py", "--json", "--design",
                   two_products("kmajor", "tf32x3", "tf32")],
        # kmajor over dense A operands whose rows are whole 32-float lines: A read in place, only B copied
        "kmajor_dense": ["dense_products.py", "--out", "out/kmajor_dense.py", "--json", "--design",
                         two_products("kmajor", "tf32x3", "tf32")],
        # a design that does not fit its kernel (a K step of 64 over 2 channels a tap): the seed's, with a warning
        "unfit": ["conv_relu_bias.py", "--out", "out/conv_unfit.py", "--json", "--design", json.dumps(
            {"seed": 1, "kernels": {"egg_k0_convolution": {"algorithm": "nhwc", "xblock": 64, "yblock": 16,
                                                           "rblock": 64, "num_warps": 4, "num_stages": 2,
                                                           "precision": "ieee"}}})],
        # the example kernel family, switched on by name: x * sigmoid(x) as a kernel of its own
        "silu": ["linear_silu.py", "--out", "out/silu.py", "--json", "--design",
                 '{"seed": 0, "plan": {"families": ["silu"]}}'],
        # a design naming a kernel the plan does not have (a stale name): written, with a warning
        "stale": ["softmax_8x32.py", "--out", "out/softmax_stale.py", "--design", json.dumps(
            {"seed": 0, "kernels": {"egg_k7_gone": {"algorithm": "flat", "xblock": 64}}})],
    }
    # The softmax compiles capture through egg's worker; every other task is captured once, in COMPILE_WORKERS
    # Python processes, and compiled from its saved graph (`--graph`: the same file, test below) without paying a
    # worker's start (importing torch) per compile. Two compiles at a time (CI's two cores), each to its own output.
    graphs = egg.workdir / "graphs"
    captured = sorted({args[0] for args in commands.values()} - {"softmax_8x32.py"})
    capture_graphs(graphs, [captured[k::COMPILE_WORKERS] for k in range(COMPILE_WORKERS)], egg.workdir)
    for args in commands.values():
        if args[0] != "softmax_8x32.py":
            args += ["--graph", str(graphs / args[0].replace(".py", ".graph.json"))]
    with concurrent.futures.ThreadPoolExecutor(max_workers=COMPILE_WORKERS) as pool:
        futures = {name: pool.submit(egg.run, "compile", *args, "--device", "cpu") for name, args in commands.items()}
    runs = {name: future.result() for name, future in futures.items()}
    for name, proc in runs.items():
        assert proc.returncode == 0, f"{name}: {proc.stderr}"
    return egg, runs


def test_compile_writes_a_model_new_with_its_design(compiled):
    egg, runs = compiled
    source = (egg.workdir / "out" / "softmax_s0.py").read_text()
    assert "class ModelNew(Model):" in source
    assert "def egg_precompile" in source
    assert "@triton.jit" in source
    design = design_line(source)
    assert design["seed"] == 0 and design["kernels"], design
    report = json.loads(runs["seed0"].stdout)
    assert report["candidate"] == "out/softmax_s0.py"
    assert report["design"] == design, "the design printed is the one written into the file"


def test_triangular_part_of_a_product_skips_the_k_loop_of_dropped_tiles(compiled):
    """torch.triu / tril of a product: the where is the product's only reader and its condition is index
    arithmetic, so each tile computes it before the K loop and runs no K step where it keeps no lane."""
    egg, runs = compiled
    source = (egg.workdir / "out" / "tri.py").read_text()
    assert source.count("k_end = tl.where(tl.max(tl.where(omask & (") == 3, source
    assert source.count("for k0 in range(0, k_end, BLOCK_K):") == 3
    assert source.count("for k0 in range(") == 5  # the product also returned whole, and the data-masked one
    plain = (egg.workdir / "out" / "mv_s1.py").read_text()  # a product with no such reader keeps its K loop
    assert "k_end" not in plain and "for k0 in range(0, 6000, BLOCK_K):" in plain


def test_mat_vec_seed_is_gemv_without_tl_dot(compiled):
    """Seed 0 of a matrix-vector product: rows times the vector in fp32 FMAs (no tl.dot, no precision choice);
    seed 1 keeps tl.dot tiles; a split design adds the partial and combine kernels."""
    egg, runs = compiled
    seed0, seed1 = json.loads(runs["mv0"].stdout), json.loads(runs["mv1"].stdout)
    assert [k["design"]["algorithm"] for k in seed0["kernels"]] == ["gemv"] * 3
    assert all(k["design"]["yblock"] == 1 and k["design"]["precision"] == "ieee" for k in seed0["kernels"])
    assert all(k["design"]["algorithm"] == "tiled" for k in seed1["kernels"])
    source = (egg.workdir / "out" / "mv_s0.py").read_text()
    assert "tl.dot(" not in source and source.count("acc += a * tl.trans(b)") == 3
    split = (egg.workdir / "out" / "mv_split.py").read_text()
    assert "def egg_k0_mm_partial(" in split and "egg_k0_mm_partial[(5, 1, 3)](" in split


def test_attention_seed_is_one_flash_kernel(compiled):
    """Seed 0 of SDPA (plain and is_causal) and MinGPT's masked attention: one flash kernel each (scores,
    online softmax and the product with V; no amax reduction kernel), tf32x3 products below tol 1e-3; seed 1
    keeps the products and the softmax apart and records plan.fuse_attention false."""
    egg, runs = compiled
    seed0, seed1 = json.loads(runs["att0"].stdout), json.loads(runs["att1"].stdout)
    flash = [k for k in seed0["kernels"] if k["kind"] == "attention"]
    assert [k["design"]["algorithm"] for k in flash] == ["flash"] * 3
    assert all(k["design"]["precision"] == "tf32x3" for k in flash)
    assert not any(k["kind"] in ("reduction", "matmul") for k in seed0["kernels"])
    assert "fuse_attention" not in seed0["design"]["plan"]
    source = (egg.workdir / "out" / "att_s0.py").read_text()
    assert "amax" not in "".join(code_lines(source)).replace("bmm", "")
    assert source.count("online softmax") == 3 and source.count("a fully masked row gives 0") == 2
    # MinGPT's masked_fill: a key block masked for all the program's rows is skipped (SDPA's masks are added)
    assert source.count("if live > 0:") == 1
    assert seed1["design"]["plan"]["fuse_attention"] is False
    kinds = [k["kind"] for k in seed1["kernels"]]
    assert "attention" not in kinds and kinds.count("reduction") == 3 and kinds.count("matmul") == 6
    tiles = design_line((egg.workdir / "out" / "att_tiles.py").read_text())["kernels"]
    assert tiles["egg_k0_bmm_1"]["xblock"] == 128 and tiles["egg_k2_bmm_5"]["yblock"] == 16


def test_an_experimental_family_runs_where_the_record_names_it(compiled):
    """The example family "silu" (src/expert/families/silu.cpp, one file and one line of families.def): named in
    the design record's plan it claims x * sigmoid(x) as a kernel of its own; an unknown family name is refused
    in one line."""
    egg, runs = compiled
    report = json.loads(runs["silu"].stdout)
    kinds = [k["kind"] for k in report["kernels"]]
    assert kinds == ["matmul", "silu"], kinds
    assert report["design"]["plan"]["families"] == ["silu"]
    source = (egg.workdir / "out" / "silu.py").read_text()
    assert source.count("tl.sigmoid(") == 1
    plain = egg.run("compile", "linear_silu.py", "--out", "out/silu_plain.py", "--json", "--device", "cpu")
    assert plain.returncode == 0, plain.stderr
    assert "silu" not in [k["kind"] for k in json.loads(plain.stdout)["kernels"]], "off unless named"
    bad = egg.run("compile", "linear_silu.py", "--out", "out/silu_bad.py", "--device", "cpu",
                  "--design", '{"seed": 0, "plan": {"families": ["swish"]}}')
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "unknown kernel family 'swish'" in bad.stderr, bad.stderr


SAME_AS_PYTORCH = '''
import importlib.util, json, sys, torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
task = load(sys.argv[1], "task")
reference, inputs = task.Model().eval(), task.get_inputs()
with torch.no_grad():
    expected = reference(*inputs)
print(json.dumps({"nan": [k for k, e in enumerate(expected) if torch.isnan(e).any().item()],
                  "zero": [k for k, e in enumerate(expected) if (e == 0).any().item()]}))
for n, path in enumerate(sys.argv[2:]):
    with torch.no_grad():
        got = load(path, f"candidate{n}").ModelNew().eval()(*inputs)
    for k, (want, have) in enumerate(zip(expected, got)):
        tol = 1e-5 if want.is_floating_point() else 0  # integers exactly
        torch.testing.assert_close(have, want, equal_nan=True, atol=tol, rtol=tol,
                                   msg=lambda m: f"{path}, output {k}: {m}")
    print("same:", path)
'''


def same_as_pytorch(task: str, candidates: list) -> dict:
    """Runs the task's Model and each candidate's ModelNew on the task's own inputs (the interpreter) and compares
    every output, nan where nan (the harness does not compare nan outputs); returns which of the reference's
    outputs hold a nan and which a zero."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT / "python")}
    proc = subprocess.run([sys.executable, "-c", SAME_AS_PYTORCH, str(EXPERT_TASKS / task), *map(str, candidates)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.count("same:") == len(candidates), proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[0])


def test_attention_fully_masked_rows_match_pytorch(compiled):
    """A query row with every key masked: nan under a plain softmax, 0 under SDPA's _safe_softmax, in the
    flash kernels as in PyTorch."""
    egg, runs = compiled
    assert [k["kind"] for k in json.loads(runs["att_masked"].stdout)["kernels"]][:2] == ["attention"] * 2
    reference = same_as_pytorch("attention_masked_rows.py", [egg.workdir / "out" / "att_masked.py"])
    assert 0 in reference["nan"] and 1 in reference["zero"]


def test_rows_holding_nan_reduce_as_in_pytorch(compiled):
    """max, amax, min(dim), argmax, max(dim) with its index, max pooling and a variance over rows that hold nan,
    persistent (seed 0), looped (seed 1) and split (seed 2): nan where torch has nan, the first nan's index.
    On the GPU tl.max and tl.min skip nan; the interpreter runs the same helpers' vectorized path."""
    egg, runs = compiled
    kinds = [k["kind"] for k in json.loads(runs["nan0"].stdout)["kernels"]]
    assert kinds.count("reduction") == 5 and kinds.count("pool") == 1, kinds
    reference = same_as_pytorch("nan_extrema.py", [egg.workdir / "out" / f"nan_s{seed}.py" for seed in range(3)])
    assert reference["nan"] == [0, 1, 3, 5, 6], "every float output has a nan to keep"


def test_integer_division_and_remainders_are_exact_at_any_magnitude(compiled):
    """torch's floor division, remainder (floor), trunc division and fmod of int64 values up to 2^40 of both
    signs, by tensors and by literals: exactly as PyTorch (Triton's // and % truncate; a float32 quotient loses
    the low digits)."""
    egg, runs = compiled
    assert [k["kind"] for k in json.loads(runs["intdiv"].stdout)["kernels"]] == ["pointwise"]
    same_as_pytorch("int_division.py", [egg.workdir / "out" / "intdiv.py"])


def test_cuda_graph_design_wraps_the_forward(compiled):
    """The design record's plan.cuda_graph: the forward runs through _egg_graphed (capture once, replay), the
    record says so; without it no graph code is written. `--seed 0` writes seed 0 as egg optimize proposes it:
    the bidirectional LSTM's launches (a kernel per step) graphed; `--seed 1` and a record without the flag
    are not."""
    egg, runs = compiled
    graphed = (egg.workdir / "out" / "lstm_graph.py").read_text()
    plain = (egg.workdir / "out" / "lstm_plain.py").read_text()
    assert design_line(graphed)["plan"]["cuda_graph"] is True
    assert json.loads(runs["lstm_graph"].stdout)["design"]["plan"]["cuda_graph"] is True
    assert "return _egg_graphed(self, self._egg_forward, (" in graphed and "torch.cuda.CUDAGraph()" in graphed
    assert "_egg_graphed" not in plain and "cuda_graph" not in design_line(plain)["plan"]
    seed0 = json.loads(runs["lstm"].stdout)
    assert seed0["design"]["plan"]["cuda_graph"] is True and seed0["design"]["seed"] == 0
    assert "_egg_graphed" in (egg.workdir / "out" / "lstm.py").read_text()
    seed1 = json.loads(runs["lstm_seed1"].stdout)
    assert seed1["design"]["seed"] == 1 and "cuda_graph" not in seed1["design"]["plan"]


GRAPH_LOGIC = '''
import contextlib, importlib.util, json, sys, types, torch
spec = importlib.util.spec_from_file_location("graphed", sys.argv[1])
candidate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(candidate)

class OnGpu(torch.Tensor):  # a CPU tensor that says it is on a GPU: the graph path runs, its CUDA calls faked
    @property
    def is_cuda(self):
        return True

captures, capturing = [], []

class FakeGraph:  # a capture records the forward without running it; a replay runs what was recorded
    def __init__(self):
        self.body = None
        captures.append(self)

    def replay(self):
        self.body()

@contextlib.contextmanager
def graph(fake):
    capturing.append(fake)
    yield
    capturing.pop()

cuda = types.SimpleNamespace(Stream=lambda: types.SimpleNamespace(wait_stream=lambda other: None),
                             current_stream=lambda: types.SimpleNamespace(wait_stream=lambda other: None),
                             stream=lambda s: contextlib.nullcontext(), CUDAGraph=FakeGraph, graph=graph)
candidate.torch = types.SimpleNamespace(**{name: getattr(torch, name) for name in dir(torch)
                                           if not name.startswith("__")})
candidate.torch.cuda = cuda
candidate.EGG_INTERPRET = types.SimpleNamespace(value=False)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((4, 4), 2.0))
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):  # a pack kept from the weight (as _egg_kept keeps one), a buffer updated in place
        if self.__dict__.get("pack_of") != (self.weight.data_ptr(), self.weight._version):
            self.__dict__["pack"], self.__dict__["pack_of"] = self.weight.detach().t().clone(), (
                self.weight.data_ptr(), self.weight._version)
        pack = self.__dict__["pack"]
        def body(out):  # through .data: a replay runs no Python and moves no version counter
            self.calls.data.add_(1)
            out.data.copy_(x @ pack)
            return out
        if capturing:
            out = torch.empty(x.shape[0], 4)
            capturing[-1].body = lambda: body(out)
            with torch.no_grad():
                self.calls.add_(0)  # a capture's in-place op: the version moves, the value does not
            return out
        return body(torch.empty(x.shape[0], 4))

net = Net()
def call(rows, value=1.0):
    with torch.no_grad():
        return candidate._egg_graphed(net, net.forward, (torch.full((rows, 4), value).as_subclass(OnGpu),))
report = {}
first, second = call(2), call(2, 3.0)
report["same_shape"] = [len(captures), first[0, 0].item(), second[0, 0].item(), net.calls.item()]
call(3)
report["other_shape"] = [len(captures), net.calls.item()]
with torch.no_grad():
    net.weight.mul_(10)
report["written_weight"] = [call(2)[0, 0].item(), len(captures)]
net.weight = torch.nn.Parameter(torch.ones(4, 4))
report["replaced_weight"] = [call(2)[0, 0].item(), len(captures)]
report["again"] = [call(2)[0, 0].item(), len(captures), net.calls.item()]
print(json.dumps(report))
'''


def test_cuda_graph_captures_again_for_new_shapes_and_changed_state(compiled):
    """_egg_graphed's own logic, its CUDA calls faked (a capture records, a replay runs the record): a graph per
    input shape; a weight written in place or replaced captures again, so values kept from it are made again; the
    warm-up's writes to the buffers are undone, so each call updates them once."""
    egg, _ = compiled
    proc = subprocess.run([sys.executable, "-c", GRAPH_LOGIC, str(egg.workdir / "out" / "lstm_graph.py")],
                          capture_output=True, text=True, timeout=300, cwd=egg.workdir,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "python")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    # x of ones (then threes) times the weight's transpose (2s): 4 * 2 = 8 (then 24); one capture, two calls
    assert report["same_shape"] == [1, 8.0, 24.0, 2.0]
    assert report["other_shape"] == [2, 3.0], "three rows: a graph of their own; a third call, counted once"
    assert report["written_weight"] == [80.0, 3], "the weight written in place: captured again, pack made again"
    assert report["replaced_weight"] == [4.0, 4], "a new weight: captured again"
    assert report["again"] == [4.0, 4, 6.0], "nothing changed: replayed; six calls, six updates of the buffer"


def test_compile_json_lists_kernels_and_pytorch_ops(compiled):
    _, runs = compiled
    softmax = json.loads(runs["seed0"].stdout)
    assert softmax["pytorch_ops"] == [], "a softmax runs entirely in Triton"
    assert softmax["kernels"]
    for kernel in softmax["kernels"]:
        assert KERNEL_FIELDS <= set(kernel), kernel
        assert kernel["ops"] and kernel["fusion"] and kernel["design"]["algorithm"]
    ops = {op for kernel in softmax["kernels"] for op in kernel["ops"]}
    assert {"aten.amax.default", "aten.exp.default", "aten.sum.dim_IntList"} <= ops, ops
    assert any(kernel["kind"] == "reduction" for kernel in softmax["kernels"])


def test_compile_splits_deep_k_products_at_seed_0_only(compiled):
    """Few output tiles over a deep K: seed 0 runs K in slices (partials, then a summing kernel with the
    epilogue: two launches per product), seed 1 keeps one program per tile; the design record says which."""
    _, runs = compiled
    algorithms = {}
    for seed in range(2):
        report = json.loads(runs[f"deepk{seed}"].stdout)
        assert report["pytorch_ops"] == []
        algorithms[seed] = {k["name"]: (k["design"]["algorithm"], k["design"]["split"])
                            for k in report["kernels"] if k["kind"] == "matmul"}
    assert set(algorithms[0]) == {"egg_k0_mm", "egg_k1_bmm", "egg_k2_addmm"}, algorithms
    assert all(algorithm == "splitk" and split >= 2 for algorithm, split in algorithms[0].values()), algorithms
    assert all(algorithm == "tiled" for algorithm, _ in algorithms[1].values()), algorithms
    ragged = json.loads(runs["deepk_ragged"].stdout)
    (bmm,) = [k for k in ragged["kernels"] if k["name"] == "egg_k1_bmm"]
    assert (bmm["design"]["algorithm"], bmm["design"]["split"]) == ("splitk", 3)


def test_compile_computes_small_group_convolutions_directly_at_seed_0(compiled):
    """Depthwise and few-channel grouped convolutions: seed 0 computes each output element directly (no tl.dot,
    float32 FMAs, the bias and the ReLU fused), seed 1 runs them as implicit GEMMs; both are measured."""
    egg, runs = compiled
    for seed, algorithm in ((0, "direct"), (1, "tiled")):
        report = json.loads(runs[f"small{seed}"].stdout)
        assert report["pytorch_ops"] == []
        convolutions = [k for k in report["kernels"] if "aten.convolution.default" in k["ops"]]
        assert len(convolutions) == 3 and all(k["design"]["algorithm"] == algorithm for k in convolutions), report
    direct = code_lines((egg.workdir / "out" / "small_s0.py").read_text())
    assert not any("tl.dot(" in line for line in direct)
    assert sum("tl.static_range(2)" in line for line in direct) >= 2  # input channels per group, the 2-wide taps


def test_concatenations_are_written_in_place_by_their_pieces(compiled):
    """Each concatenation whose pieces kernels compute is a buffer the pieces' kernels store into through views
    of it (the convolutions with their ReLU epilogues, the scan and the constant column, the two elementwise
    pieces along the batch, the linear layers, in split K too): no kernel copies it. plan.concat_in_place false
    copies each in a kernel of its own."""
    egg, runs = compiled
    for seed in range(3):
        report = json.loads(runs[f"cat{seed}"].stdout)
        assert report["pytorch_ops"] == [], report["pytorch_ops"]
        in_place = [note.split(" ")[0] for note in report["planner_notes"] if " in place: " in note]
        assert in_place == ["cat", "cat_1", "cat_2", "cat_3"], report["planner_notes"]
        assert not any("aten.cat.default" in k["ops"] for k in report["kernels"]), report["kernels"]
        lines = [line.strip() for line in code_lines((egg.workdir / report["candidate"]).read_text())]
        assert "v_relu_1 = v_cat.narrow(1, 8, 8)" in lines and "v_cumsum = v_cat_1.narrow(3, 1, 4)" in lines
        assert "v_tanh = v_cat_2.narrow(0, 2, 2)" in lines
        conv = next(k for k in report["kernels"] if k["name"] == "egg_k1_convolution_1")
        assert "aten.relu.default" in conv["ops"]  # the piece is the convolution's epilogue
    splitk = json.loads(runs["cat_splitk"].stdout)
    assert [k["design"]["algorithm"] for k in splitk["kernels"] if k["kind"] == "matmul"][-2:] == ["splitk"] * 2
    apart = json.loads(runs["cat_apart"].stdout)
    assert apart["design"]["plan"]["concat_in_place"] is False
    assert sum("aten.cat.default" in k["ops"] for k in apart["kernels"]) >= 2, apart["kernels"]
    assert not any(" in place: " in note for note in apart["planner_notes"])


def test_summed_products_are_folded_into_passes_over_their_inputs(compiled):
    """Seed 0 folds the two sums over products' columns: the weights' row sums and the bias terms' sums, each
    computed once and kept (`_egg_kept`), then one reduction over the input's rows with the scale and the
    summed biases as its epilogue; the product read twice (its sum and maximum over the columns finished in its
    tile) and the one summed over its rows stay products. Seed 1, and plan.fold_summed_products false, keep all
    four products (the record says so)."""
    egg, runs = compiled
    folded = json.loads(runs["fold0"].stdout)
    assert "fold_summed_products" not in folded["design"]["plan"]
    assert [(k["name"], k["kind"]) for k in folded["kernels"]] == [
        ("egg_k0_sum_1_fold_weights", "reduction"), ("egg_k1_sum_1_fold_bias", "reduction"),
        ("egg_k2_sum_1_fold_rows", "reduction"), ("egg_k3_mean_fold_weights", "reduction"),
        ("egg_k4_mean_fold_rows", "reduction"), ("egg_k5_addmm_1", "matmul"), ("egg_k6_mm_1", "matmul"),
        ("egg_k7_sum_3", "reduction")], folded["kernels"]
    rows = {k["name"]: k["ops"] for k in folded["kernels"]}
    assert {"aten.sum.dim_IntList", "aten.amax.default"} <= set(rows["egg_k5_addmm_1"])
    # 0.5 * (x . rowsum(W)) + (0.5 * sum(bias) - sum(shift)), and -(x . rowsum(W)) / (4 * 40) - 0.5
    assert rows["egg_k2_sum_1_fold_rows"] == ["aten.mul.Tensor", "aten.sum.dim_IntList", "aten.mul.Tensor",
                                              "aten.add.Tensor", "aten.add.Tensor"]
    assert rows["egg_k4_mean_fold_rows"] == ["aten.mul.Tensor", "aten.sum.dim_IntList", "aten.mul.Tensor",
                                             "aten.add.Tensor"]
    lines = [line.strip() for line in code_lines((egg.workdir / folded["candidate"]).read_text())]
    kept = [line for line in lines if "= _egg_kept(self, " in line]
    assert [line.split(" = ")[0] for line in kept] == [
        "v_sum_1_fold_weights", "v_sum_1_fold_bias, v_sum_1_fold_bias_", "v_mean_fold_weights"], kept
    assert "(v_p_linear_bias, v_p_shift, )" in kept[1]
    assert launched(lines) == [k["name"] for k in folded["kernels"]]
    for run in ("fold1", "fold_off"):
        whole = json.loads(runs[run].stdout)
        assert whole["design"]["plan"]["fold_summed_products"] is False, run
        assert [k["kind"] for k in whole["kernels"]].count("matmul") == 4, whole["kernels"]
        assert not any("fold" in k["name"] for k in whole["kernels"])


def test_pooled_transposed_convolutions_are_folded_into_sums_of_their_inputs(compiled):
    """Seed 0 folds the two transposed convolutions pooled over every position without padding: the kernel-summed
    weights (kept), the input's sums over its positions, and a small product of the two, with the mean's 1/P,
    the bias and the per-channel ops (scale, shift, batch norm) after it. The padded and the cropped ones fold
    over their windows (float32 constants: which input positions meet each tap inside the output), the weights
    summed over the uncropped width (kept); the 3-D one averaged over its depth becomes a 2-D one over the depth
    windows; the one pooled over its last dim alone stays a convolution. Seed 1 keeps all six."""
    egg, runs = compiled
    folded = json.loads(runs["pool0"].stdout)
    assert [(k["name"], k["kind"]) for k in folded["kernels"]][:6] == [
        ("egg_k0_mean_fold_weights", "reduction"), ("egg_k1_mean_fold_inputs", "reduction"),
        ("egg_k2_mean_fold_product", "matmul"), ("egg_k3_sum_1_fold_weights", "reduction"),
        ("egg_k4_sum_1_fold_inputs", "reduction"), ("egg_k5_sum_1_fold_product", "matmul")], folded["kernels"]
    ops = {k["name"]: k["ops"] for k in folded["kernels"]}
    product = ops["egg_k2_mean_fold_product"]
    # the product, its 1/P and bias, the pooled view, then * 2.0, - shift and the batch norm's four ops
    assert product[product.index("aten.mm.default"):] == [
        "aten.mm.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.view.default", "aten.mul.Tensor",
        "aten.sub.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.mul.Tensor", "aten.add.Tensor"], product
    assert [k["kind"] for k in folded["kernels"]].count("matmul") == 4
    assert sum("aten.convolution.default" in k["ops"] for k in folded["kernels"]) == 2
    depth = next(k for k in folded["kernels"] if k["name"].endswith("mean_3_fold_convolution"))
    assert depth["kind"] == "matmul" and "aten.permute.default" in depth["ops"]  # the weight's depth taps moved
    lines = [line.strip() for line in code_lines((egg.workdir / folded["candidate"]).read_text())]
    assert [line.split(" = ")[0] for line in lines if "= _egg_kept(self, " in line] == [
        "v_mean_fold_weights", "v_sum_1_fold_weights", "v_sum_2_fold_weights"]
    # one window for the padded length, one for the cropped height, none for the width every pair reaches
    assert [line.split(" = ")[0] for line in lines if "_egg_constant_of(self, " in line] == [
        "v_mean_1_fold_window", "v_sum_2_fold_window", "v_mean_3_fold_window"]
    whole = json.loads(runs["pool1"].stdout)
    assert whole["design"]["plan"]["fold_summed_products"] is False
    assert sum("aten.convolution.default" in k["ops"] for k in whole["kernels"]) == 6


def test_reductions_over_a_products_columns_finish_in_its_tile(compiled):
    """Seed 0: a convolution's minimum, softmax and mean over its channels, a transposed convolution's maximum,
    a linear layer's logsumexp, a layer norm over a linear layer's features and a convolution's standard deviation
    over its channels run in the product's kernel (one tile spans the columns, the product stored only where it is
    returned); a grouped convolution's minimum and a sum over a product's rows keep kernels of their own. Seed 1 leaves every reduction apart, and says so in its record; so does the channels-last
    and K-major record, its reductions still in the products' tiles."""
    egg, runs = compiled
    fused = json.loads(runs["colred0"].stdout)
    assert fused["pytorch_ops"] == []
    assert "reduce_in_products" not in fused["design"]["plan"]
    products = [k for k in fused["kernels"] if k["kind"] == "matmul"]
    reducing = {"aten.min.dim", "aten.amax.default", "aten.amin.default", "aten.mean.dim", "aten.sum.dim_IntList",
                "prims.var.default"}
    assert [bool(reducing & set(k["ops"])) for k in products] == [True] * 4 + [False] * 2 + [True] * 2, products
    assert {"aten.min.dim", "aten.amax.default", "aten.div.Tensor", "aten.mean.dim"} <= set(products[0]["ops"])
    assert [k["kind"] for k in fused["kernels"]].count("reduction") == 2  # the grouped minimum, the rows' sum
    for kernel in products[:4]:
        n = 40 if "aten.addmm.default" in kernel["ops"] else 24
        assert kernel["design"]["yblock"] >= n, kernel
    lines = code_lines((egg.workdir / fused["candidate"]).read_text())
    # least, mean, scaled, most, lse, spread
    assert sum("tl.store(" in line for line in lines if "mmask)" in line) == 6
    apart = json.loads(runs["colred1"].stdout)
    assert apart["design"]["plan"]["reduce_in_products"] is False
    assert [k["kind"] for k in apart["kernels"]].count("reduction") == 8
    forms = json.loads(runs["colred_forms"].stdout)
    assert [k["design"]["algorithm"] for k in forms["kernels"]][:4] == ["nhwc", "tiled", "nhwc", "kmajor"]
    assert forms["kernels"][0]["ops"] == products[0]["ops"]


def test_transposed_convolutions_run_channels_last_per_output_phase(compiled):
    """A transposed convolution's nhwc form: the input and the weight copied as for a convolution, the loop over
    the most taps of any phase, a tap the program's phase lacks running no channel step (`kend`); stride 1 is
    one phase, its taps the kernel's (seed 2's form from 16 channels a group)."""
    egg, runs = compiled
    for run in ("convt_nhwc", "convt3_nhwc", "convt_s1"):
        report = json.loads(runs[run].stdout)
        assert report["pytorch_ops"] == [], report["pytorch_ops"]
        assert [k["design"]["algorithm"] for k in report["kernels"]] == ["nhwc"], run
        lines = code_lines((egg.workdir / report["candidate"]).read_text())
        launches = launched(lines)
        assert launches == ["egg_k0_convolution_weight", "egg_k0_convolution_nhwc", "egg_k0_convolution"], launches
        phased = run != "convt_s1"
        assert any(line.strip().startswith("phase0 = ") for line in lines) == phased, run
        assert any(line.strip() == "for k0 in range(0, kend, BLOCK_K):" for line in lines) == phased, run


def test_nhwc_design_repacks_the_input_then_loops_over_taps(compiled):
    """The design record's nhwc algorithm: per convolution a repack launch into a channels-last scratch buffer
    (the fused input producer computed there), then the GEMM looping over kernel taps (unrolled up to 3x3, a
    loop over the 3-D kernel's 18) and the channels of the group, the bias and the consumers fused after it."""
    egg, runs = compiled
    report = json.loads(runs["nhwc"].stdout)
    assert report["pytorch_ops"] == []
    assert [(k["name"], k["design"]["algorithm"]) for k in report["kernels"]] == [
        ("egg_k0_convolution", "nhwc"), ("egg_k1_convolution_1", "nhwc"), ("egg_k2_convolution_2", "nhwc")]
    ops = {k["name"]: k["ops"] for k in report["kernels"]}
    assert "aten.relu.default" in ops["egg_k0_convolution"]  # relu(x) read by the repack
    assert "aten.relu.default" in ops["egg_k1_convolution_1"]  # relu after the bias
    assert "aten.mul.Tensor" in ops["egg_k2_convolution_2"]
    lines = code_lines((egg.workdir / "out" / "nhwc.py").read_text())
    launches = launched(lines)
    assert launches == [f"{kernel}{suffix}" for kernel in ("egg_k0_convolution", "egg_k1_convolution_1",
                                                           "egg_k2_convolution_2")
                        for suffix in ("_weight", "_nhwc", "")], launches
    assert sum("_scratch0 = torch.empty(" in line for line in lines) == 3
    # the weights as (tap, channel) rows, kept between calls while the parameters keep their version
    assert sum("_scratch1 = _egg_kept(self, " in line for line in lines) == 3
    assert [line.strip() for line in lines if line.strip().startswith("for tap in")] == [
        "for tap in range(3):", "for tap in tl.static_range(9):", "for tap in range(18):"]  # ieee: never unrolled
    assert sum("tl.load(ptr0 + (kaindex + tbase), tvalid & kamask, other=0.0)" in line for line in lines) == 3
    assert sum('input_precision="tf32x3"' in line for line in lines) == 1
    dense = json.loads(runs["dense_nhwc"].stdout)
    assert [k["design"]["algorithm"] for k in dense["kernels"] if k["kind"] == "matmul"] == ["nhwc", "nhwc"]


def test_nhwck_design_runs_taps_and_channel_steps_in_one_k_loop(compiled):
    """nhwck: the channels-last GEMM's taps and channel steps as one loop (Triton pipelines its loads across
    taps), the tap's positions computed in it; a transposed phase's missing taps masked (kend), not skipped."""
    egg, runs = compiled
    code = {}
    for run, loops in (("dense_nhwck", ["for kstep in range(18):", "for kstep in range(27):"]),
                       ("convt3_nhwck", ["for kstep in range(8):"])):
        report = json.loads(runs[run].stdout)
        assert [k["design"]["algorithm"] for k in report["kernels"] if k["kind"] == "matmul"] == [
            "nhwck"] * len(loops), run
        code[run] = [line.strip() for line in code_lines((egg.workdir / "out" / f"{run}.py").read_text())]
        assert [line for line in code[run] if line.startswith("for ")] == loops, run
    # 32 and 48 channels in steps of 16
    assert {"tap = kstep // 2", "tap = kstep // 3", "k0 = (kstep % 3) * BLOCK_K"} <= set(code["dense_nhwck"])
    assert {"kamask = kaindex < kend", "kbmask = kbindex < kend"} <= set(code["convt3_nhwck"])


PACK_CHECK = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("candidate", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
torch.manual_seed(0)
ref, new = m.Model(*m.get_init_inputs()).eval(), m.ModelNew(*m.get_init_inputs()).eval()  # batch norms: eval
new.load_state_dict(ref.state_dict())
x = m.get_inputs()
def same():
    a, b = ref(*x), new(*x)
    return all(torch.allclose(p, q, atol=1e-4, rtol=1e-4) for p, q in zip(a, b))  # nhwc_convs returns a tuple
assert same()
packs = dict(new.__dict__["_egg_kept"])
assert same() and all(new._egg_kept[k][2] is v[2] for k, v in packs.items()), "repacked with nothing changed"
with torch.no_grad():
    for p, q in zip(ref.parameters(), new.parameters()):
        p.mul_(1.5); q.mul_(1.5)
assert same(), "stale after an in-place update"
state = {k: torch.rand_like(v) + 0.5 if v.is_floating_point() else v  # a batch norm's variance stays positive
         for k, v in ref.state_dict().items()}
ref.load_state_dict(state); new.load_state_dict(state)
assert same(), "stale after load_state_dict"
for model in (ref, new):  # new Parameter objects; a freed one's memory may hold its replacement
    for name, p in list(model.named_parameters()):
        owner, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(owner), leaf, torch.nn.Parameter(p.detach().clone() * 0.5))
assert same(), "stale after replacing the parameters"
with torch.inference_mode():  # parameters made here are inference tensors: no version counter, packed per call
    ref, new = m.Model(*m.get_init_inputs()).eval(), m.ModelNew(*m.get_init_inputs()).eval()
    new.load_state_dict(ref.state_dict())
    assert same()
    with torch.no_grad():
        for p, q in zip(ref.parameters(), new.parameters()):
            p.mul_(2); q.mul_(2)
    assert same() and "_egg_kept" not in new.__dict__, "an inference tensor's pack was kept"
print(len(packs), "kept")
"""


@pytest.mark.parametrize("candidate, kept", [("nhwc.py", 3), ("fold_s0.py", 3), ("pool_s0.py", 3)])
def test_values_of_the_weights_are_kept_until_their_parameters_change(compiled, candidate, kept):
    """A weight repacked into (tap, channel) rows (nhwc), a weight's row sums and the biases' sums (fold_s0) are
    computed once and kept while their parameters are the same tensors at the same version: a second call
    recomputes nothing; an in-place update, load_state_dict and a replaced parameter each recompute (the
    outputs match PyTorch's after each); inference tensors, which keep no version counter, are computed at
    every call."""
    egg, _ = compiled
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT / "python")}
    proc = subprocess.run([sys.executable, "-c", PACK_CHECK, str(egg.workdir / "out" / candidate)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=egg.workdir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == f"{kept} kept"


def test_aligned_design_copies_both_operands_then_multiplies_the_copies(compiled):
    """The aligned algorithm: per product two copy launches into scratch rows of a 32-float stride (the
    transposed, computed operand copied in the product's orientation), then the tiles read from the copies."""
    egg, runs = compiled
    report = json.loads(runs["aligned"].stdout)
    assert [(k["name"], k["design"]["algorithm"]) for k in report["kernels"]] == [
        ("egg_k0_mm", "aligned"), ("egg_k1_bmm", "aligned")]
    lines = code_lines((egg.workdir / "out" / "aligned.py").read_text())
    launches = launched(lines)
    assert launches == ["egg_k0_mm_aligned_a", "egg_k0_mm_aligned_b", "egg_k0_mm",
                        "egg_k1_bmm_aligned_a", "egg_k1_bmm_aligned_b", "egg_k1_bmm"], launches
    text = "\n".join(lines)
    assert "tl.store(ptr1 + (pindex * 32 + cindex)" in text and "tl.store(ptr1 + (pindex * 64 + cindex)" in text
    assert "a = tl.load(ptr0 + (kaindex + 32*mindex), mmask & kamask, other=0.0)" in text
    assert "b = tl.load(ptr1 + (736*bindex + 32*kbindex + nindex), kbmask & nmask, other=0.0)" in text


def test_kmajor_design_copies_b_transposed_then_reads_its_tiles_along_k(compiled):
    """The kmajor algorithm: A copied as aligned does, B transposed into rows along K (what Hopper's tf32 MMA
    reads from shared memory), then B's tiles read K-contiguous from the copy."""
    egg, runs = compiled
    report = json.loads(runs["kmajor"].stdout)
    assert [(k["name"], k["design"]["algorithm"], k["design"]["precision"]) for k in report["kernels"]] == [
        ("egg_k0_mm", "kmajor", "tf32x3"), ("egg_k1_bmm", "kmajor", "tf32")]
    lines = code_lines((egg.workdir / "out" / "kmajor.py").read_text())
    launches = launched(lines)
    assert launches == ["egg_k0_mm_aligned_a", "egg_k0_mm_kmajor_b", "egg_k0_mm",
                        "egg_k1_bmm_aligned_a", "egg_k1_bmm_kmajor_b", "egg_k1_bmm"], launches
    text = "\n".join(lines)
    # mm's B [29 x 41] as 41 rows of 32 floats; bmm's y [3, 23, 13] as 3 x 13 rows of 32
    assert "b = tl.load(ptr1 + (kbindex + 32*nindex), kbmask & nmask, other=0.0)" in text
    assert "b = tl.load(ptr1 + (416*bindex + kbindex + 32*nindex), kbmask & nmask, other=0.0)" in text


def test_kmajor_reads_a_dense_aligned_a_in_place_and_copies_only_b(compiled):
    egg, runs = compiled
    assert [k["design"]["algorithm"] for k in json.loads(runs["kmajor_dense"].stdout)["kernels"]] == ["kmajor"] * 2
    lines = code_lines((egg.workdir / "out" / "kmajor_dense.py").read_text())
    launches = launched(lines)
    assert launches == ["egg_k0_mm_kmajor_b", "egg_k0_mm", "egg_k1_bmm_kmajor_b", "egg_k1_bmm"], launches
    text = "\n".join(lines)
    # A's tiles at its own strides (rows of 64; x's batches of 23 x 32), read through the emitter as tiled does
    assert "+ (kaindex + 64*mindex), mmask & kamask, other=0.0)" in text, text
    assert "+ (736*bindex + kaindex + 32*mindex), mmask & kamask, other=0.0)" in text, text


def test_split_k_candidate_launches_partials_then_their_sum(compiled):
    egg, _ = compiled
    lines = code_lines((egg.workdir / "out" / "deepk_ragged.py").read_text())
    launches = [name for name in launched(lines) if name.startswith("egg_k1_bmm")]
    assert launches == ["egg_k1_bmm_partial", "egg_k1_bmm"], launches
    # K = 3000 in slices of 1024 (3000 / 3 rounded up to the K step of 64): 1024, 1024 and 952
    assert any("range(split * 1024, tl.minimum(split * 1024 + 1024, 3000), BLOCK_K)" in line for line in lines)
    assert any("for split in range(3):" in line for line in lines)


def test_compile_makes_the_convolution_and_its_epilogue_one_triton_kernel(compiled):
    egg, runs = compiled
    conv = json.loads(runs["conv"].stdout)
    assert conv["pytorch_ops"] == []
    assert len(conv["kernels"]) == 1 and conv["kernels"][0]["kind"] == "matmul", conv["kernels"]
    assert conv["kernels"][0]["ops"] == ["aten.convolution.default", "aten.relu.default", "aten.add.Tensor"]
    assert "class ModelNew(Model):" in (egg.workdir / "out" / "conv.py").read_text()


def test_concatenated_operands_fit_the_gpus_shared_memory(compiled):
    """Each concatenated piece a convolution reads in its K loop is one more tile staged per pipeline stage
    (DenseNet201's 26-way cat needed 500 KB of the H200's 227 KB): four pieces stay fused with fewer stages on
    the wide-tile seeds; six are stored by a kernel of their own that the convolution reads. Both stay in
    Triton (test_every_kernel_compiles_for_the_gpu checks the shared memory of each kernel)."""
    egg, runs = compiled
    stages = []
    for seed in range(3):
        plan = json.loads(runs[f"dense{seed}"].stdout)
        assert plan["pytorch_ops"] == []
        names = [kernel["name"] for kernel in plan["kernels"]]
        assert names == ["egg_k0_convolution", "egg_k1_relu_1", "egg_k2_convolution_1"], names
        assert any("relu_1 stored for convolution_1" in note and "6 concatenated pieces" in note
                   for note in plan["planner_notes"]), plan["planner_notes"]
        stages.append(plan["kernels"][0]["design"]["num_stages"])
    # 64x64x32 and 128x64x32 tiles with four A tiles a stage; seed 2 is channels-last, its one A tile a copy
    # made by the repack launch, which computes the concatenation
    assert stages == [3, 2, 3]
    assert [k["design"]["algorithm"] for k in json.loads(runs["dense2"].stdout)["kernels"]
            if k["kind"] == "matmul"] == ["nhwc", "nhwc"]


def test_seed_one_is_a_different_reduction_algorithm(compiled):
    egg, runs = compiled
    seed0 = (egg.workdir / "out" / "softmax_s0.py").read_text()
    seed1 = (egg.workdir / "out" / "softmax_s1.py").read_text()
    assert code_lines(seed0) != code_lines(seed1), "the seeds differ in code, not only in their design line"
    assert design_line(seed1)["seed"] == 1
    algorithms = [{kernel["design"]["algorithm"] for kernel in json.loads(runs[name].stdout)["kernels"]}
                  for name in ("seed0", "seed1")]
    assert algorithms[0] != algorithms[1], algorithms


def test_a_design_naming_a_kernel_the_plan_lacks_is_warned_about(compiled):
    egg, runs = compiled
    warning = "warning: --design names kernel egg_k7_gone, which the plan does not have ("
    assert warning in runs["stale"].stderr and "wrote out/softmax_stale.py" in runs["stale"].stdout
    unfit = runs["unfit"]
    assert "warning: --design's " in unfit.stderr and "for kernel egg_k0_convolution does not fit it" in unfit.stderr
    assert json.loads(unfit.stdout)["kernels"][0]["design"]["algorithm"] == "tiled", "the seed's design"
    # every other design of the fixture names kernels the plan has and fits them (else it would be unused)
    assert sorted(name for name, proc in runs.items() if "warning: --design" in proc.stderr) == ["stale", "unfit"]


def test_design_record_is_generated(compiled):
    egg, runs = compiled
    assert "wrote out/softmax_d2.py" in runs["design2"].stdout
    source = (egg.workdir / "out" / "softmax_d2.py").read_text()
    assert design_line(source)["seed"] == 2
    assert code_lines(source) != code_lines((egg.workdir / "out" / "softmax_s0.py").read_text())


@pytest.mark.parametrize("run, epilogue", [("convt", "aten.relu.default"), ("convt1", "aten.tanh.default"),
                                           ("convt3", "aten.mul.Tensor")])
def test_compile_makes_a_transposed_convolution_one_triton_kernel(compiled, run, epilogue):
    egg, runs = compiled
    convt = json.loads(runs[run].stdout)
    assert convt["pytorch_ops"] == []
    assert len(convt["kernels"]) == 1 and convt["kernels"][0]["kind"] == "matmul", convt["kernels"]
    assert convt["kernels"][0]["ops"] == ["aten.convolution.default", epilogue]
    source = (egg.workdir / convt["candidate"]).read_text()
    assert "phase0 = " in source, "a strided transposed convolution runs one dense convolution per output phase"
    assert source.count("tl.store(") == 1


@pytest.mark.parametrize("run, cell", [("lstm", "lstm"), ("gru", "gru"), ("rnn", "rnn")])
def test_compile_makes_recurrent_layers_triton_kernels(compiled, run, cell):
    """A whole layer stack is one planned kernel: per layer and direction an input projection GEMM and a time
    loop with the gates fused (test_compiled_candidate_passes_eval checks every output against PyTorch)."""
    egg, runs = compiled
    plan = json.loads(runs[run].stdout)
    assert plan["pytorch_ops"] == [], "no recurrent layer is left to PyTorch"
    recurrent = [kernel for kernel in plan["kernels"] if kernel["kind"] == "recurrent"]
    assert recurrent and all(kernel["ops"][0].startswith(f"aten.{cell}") for kernel in recurrent), plan["kernels"]
    for kernel in recurrent:
        assert kernel["design"]["algorithm"] == "sequential" and kernel["design"]["precision"] == "ieee"
    source = (egg.workdir / plan["candidate"]).read_text()
    assert source.count("_step[(") == source.count("_proj[(") >= 2
    tf32 = json.loads(runs["lstm_tf32"].stdout)
    assert {kernel["design"]["precision"] for kernel in tf32["kernels"]} == {"tf32"}, "the candidate's precision"


@pytest.mark.parametrize("run, op", [("unfold", "aten.unfold.default"), ("pad", "aten.constant_pad_nd.default"),
                                     ("index", "aten.index.Tensor"), ("index", "aten.index_select.default")])
def test_compile_reads_unfolded_padded_and_indexed_tensors_in_triton(compiled, run, op):
    """ViT's patches (Tensor.unfold, a view: windows side by side and overlapping), Swin-MLP's padding
    (constant borders, a negative pad cropping) and Swin V2's lookups (a table indexed by a buffer, a negative
    position, torch.roll's index_select with integer fmod) are index arithmetic in the kernel that reads them."""
    _, runs = compiled
    report = json.loads(runs[run].stdout)
    assert report["pytorch_ops"] == [], report["pytorch_ops"]
    assert op in {op for kernel in report["kernels"] for op in kernel["ops"]}, report["kernels"]


@pytest.mark.parametrize("candidate", ["softmax_s0.py", "conv.py", "dw_s0.py", "convt.py", "convt1.py", "convt3.py",
                                       "dense_s1.py", "deepk_s0.py", "deepk_s1.py", "deepk_ragged.py", "small_s0.py",
                                       "small_s1.py", "lstm.py", "lstm_tf32.py", "lstm_graph.py", "gru.py", "rnn.py",
                                       "unfold.py", "pad.py", "index.py", "mv_s0.py", "mv_s1.py",
                                       "mv_split.py", "att_s0.py", "att_s1.py", "att_tiles.py", "nhwc.py",
                                       "dense_nhwc.py", "aligned.py", "kmajor.py", "kmajor_dense.py", "silu.py",
                                       "convt_nhwc.py", "convt3_nhwc.py", "convt_s1.py", "cat_s0.py", "cat_s1.py",
                                       "cat_s2.py", "cat_apart.py", "cat_splitk.py", "fold_s0.py", "fold_s1.py",
                                       "pool_s0.py", "pool_s1.py", "colred_s0.py", "colred_s1.py",
                                       "colred_forms.py", "dense_nhwck.py", "convt3_nhwck.py"])
def test_compiled_candidate_passes_eval(compiled, candidate):
    egg, _ = compiled
    task = {"conv.py": "conv_relu_bias.py", "dw_s0.py": "bn_depthwise_gemm.py",
            "convt.py": "conv_transpose_grouped.py", "convt1.py": "conv_transpose_1d.py",
            "convt3.py": "conv_transpose_3d.py", "dense_s1.py": "dense_cat_conv.py",
            "deepk_s0.py": "deep_k_products.py", "deepk_s1.py": "deep_k_products.py",
            "deepk_ragged.py": "deep_k_products.py", "small_s0.py": "small_group_convs.py",
            "small_s1.py": "small_group_convs.py", "lstm_tf32.py": "lstm_bidir_state.py",
            "lstm_graph.py": "lstm_bidir_state.py", "mv_s0.py": "mat_vec.py", "mv_s1.py": "mat_vec.py",
            "mv_split.py": "mat_vec.py", "tri.py": "triangular.py", "att_s0.py": "attention.py",
            "att_s1.py": "attention.py", "att_tiles.py": "attention.py", "unfold.py": "unfold_patches.py",
            "pad.py": "pad_borders.py", "index.py": "index_lookup.py", "nhwc.py": "nhwc_convs.py",
            "dense_nhwc.py": "dense_cat_conv.py", "aligned.py": "irregular_products.py",
            "kmajor.py": "irregular_products.py", "kmajor_dense.py": "dense_products.py", "silu.py": "linear_silu.py",
            "convt_nhwc.py": "conv_transpose_grouped.py", "convt3_nhwc.py": "conv_transpose_3d.py",
            "convt_s1.py": "conv_transpose_stride1.py", "dense_nhwck.py": "dense_cat_conv.py",
            "convt3_nhwck.py": "conv_transpose_3d.py", **{f"cat_{tag}.py": "cat_in_place.py" for tag in ("s0", "s1", "s2", "apart", "splitk")},
            "fold_s0.py": "summed_products.py", "fold_s1.py": "summed_products.py",
            "pool_s0.py": "pooled_convolutions.py", "pool_s1.py": "pooled_convolutions.py",
            **{f"colred_{tag}.py": "column_reductions.py" for tag in ("s0", "s1", "forms")},
            **{f"{name}.py": f"{task}.py" for name, task in RECURRENT_TASKS.items()}}.get(candidate, "softmax_8x32.py")
    proc, result = egg.eval_json(task, f"out/{candidate}")
    assert proc.returncode == 0, proc.stderr
    assert result["status"] == "ok" and result["correct"] is True, result["reason"]
    assert result["triton_launches"] >= 1


@pytest.mark.parametrize("candidate", ["softmax_s0.py", "softmax_s1.py", "softmax_d2.py", "conv.py", "convt.py",
                                       "convt1.py", "convt3.py", "dw_s0.py", "dw_s1.py", "dw_s2.py", "dense_s0.py",
                                       "dense_s1.py", "dense_s2.py", "deepk_s0.py", "deepk_ragged.py",
                                       "small_s0.py", "lstm.py", "lstm_tf32.py", "lstm_graph.py", "gru.py", "rnn.py",
                                       "unfold.py", "pad.py", "index.py", "mv_s0.py", "mv_split.py", "tri.py",
                                       "att_s0.py", "att_tiles.py", "att_masked.py", "nan_s1.py", "nan_s2.py",
                                       "intdiv.py", "nhwc.py", "dense_nhwc.py", "aligned.py", "kmajor.py",
                                       "kmajor_dense.py", "convt_nhwc.py", "convt3_nhwc.py", "convt_s1.py",
                                       "dense_nhwck.py", "convt3_nhwck.py", "cat_s0.py", "cat_s2.py", "cat_splitk.py", "fold_s0.py", "pool_s0.py",
                                       "colred_s0.py", "colred_forms.py"])
def test_every_kernel_compiles_for_the_gpu(compiled, candidate):
    """Triton's GPU compiler (for sm_90, no GPU needed) on every kernel: the interpreter accepts kernels the
    GPU refuses, such as the depthwise convolution's per-channel load under the padding mask."""
    egg, _ = compiled
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, str(GPU_COMPILE), str(egg.workdir / "out" / candidate)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 failed" in proc.stdout


@pytest.mark.parametrize("design, says", [
    ('{"seed": ', ""),
    ("[1, 2]", ""),
    ('{"seed": 0, "kernels": {"egg_k0": {"algorithm": "warp-specialized"}}}', "unknown algorithm 'warp-specialized'"),
    ('{"seed": 0, "precision": "bf16"}', "unknown precision 'bf16'"),
    ('{"seed": 0, "kernels": {"egg_k0": {"algorithm": "tiled", "precision": "fp16"}}}', "unknown precision 'fp16'"),
])
def test_bad_design_record_is_one_line_error(egg, design, says):
    """A malformed record, or one naming an algorithm or precision that does not exist, is refused: never a
    silent default."""
    shutil.copy(EXPERT_TASKS / "softmax_8x32.py", egg.workdir)
    proc = egg.run("compile", "softmax_8x32.py", "--out", "bad.py", "--device", "cpu", "--design", design)
    assert proc.returncode == 2
    line = single_error_line(proc)
    assert "--design" in line
    assert says in line
    assert not (egg.workdir / "bad.py").exists()


def test_compile_missing_task_is_one_line_error(egg):
    proc = egg.run("compile", "nope.py", "--out", "bad.py", "--device", "cpu")
    assert proc.returncode == 2
    assert "task file not found" in single_error_line(proc)
    assert not (egg.workdir / "bad.py").exists()


def test_compile_of_a_saved_graph_is_the_captured_compile(compiled):
    """`--graph` compiles a graph saved from the worker's capture: the same file as capturing it (no worker)."""
    egg, _ = compiled
    capture_graphs(egg.workdir / "graphs", [["softmax_8x32.py"]], egg.workdir)
    graph = egg.workdir / "graphs" / "softmax_8x32.graph.json"
    proc = egg.run("compile", "softmax_8x32.py", "--graph", str(graph), "--seed", "0", "--out", "out/from_graph.py",
                   env={**os.environ, "EGG_PYTHON": "/nonexistent/python"})
    assert proc.returncode == 0, proc.stderr
    assert (egg.workdir / "out" / "from_graph.py").read_text() == (egg.workdir / "out" / "softmax_s0.py").read_text()


@pytest.mark.parametrize("content", [None, "{not json", '{"nodes": 3}'])
def test_compile_of_a_bad_graph_file_is_one_line_error(egg, content):
    shutil.copy(EXPERT_TASKS / "softmax_8x32.py", egg.workdir)
    if content is not None:
        (egg.workdir / "g.json").write_text(content)
    proc = egg.run("compile", "softmax_8x32.py", "--graph", "g.json", "--out", "bad.py")
    assert proc.returncode == 2, proc.stderr
    assert "graph" in single_error_line(proc)
    assert not (egg.workdir / "bad.py").exists()


def test_compile_of_an_uncapturable_task_exits_1(egg):
    (egg.workdir / "data_dependent.py").write_text(DATA_DEPENDENT_TASK)
    proc = egg.run("compile", "data_dependent.py", "--out", "dd.py", "--device", "cpu")
    assert proc.returncode == 1, proc.stderr
    assert "capture failed" in proc.stderr and "Traceback" not in proc.stderr
    assert not (egg.workdir / "dd.py").exists()


# ---- egg optimize (expert backend) ----

@pytest.fixture(scope="module")
def optimized(tmp_path_factory):
    """One expert run of softmax_8x32 (no --backend: expert is the default), then the same command again, quiet."""
    egg = make_egg(tmp_path_factory, "optimize")
    command = ["optimize", "softmax_8x32.py", "--device", "cpu", "--out", "out"]
    first = egg.run(*command)
    assert first.returncode == 0, first.stderr
    first_report = json.loads((egg.workdir / "out" / "report.json").read_text())
    counts = {table: rows(egg, f"SELECT COUNT(*) FROM {table}")[0][0] for table in ("evaluations", "candidates")}
    second = egg.run(*command, "--quiet")
    return {"egg": egg, "first": first, "first_report": first_report, "counts": counts, "second": second}


def test_optimize_defaults_to_expert_and_writes_its_outputs(optimized):
    egg = optimized["egg"]
    out = egg.workdir / "out"
    report = optimized["first_report"]
    assert report["backend"] == "expert"
    assert report["status"] == "ok" and report["stopped_because"] == "completed"
    assert report["final"]["correct"] is True and report["final"]["status"] == "ok"
    assert "class ModelNew(Model):" in (out / "model_new.py").read_text()
    trajectory = (out / "trajectory.md").read_text()
    assert all(stage in trajectory for stage in STAGES)
    assert "expert" in optimized["first"].stderr


PROGRESS_EVENTS = ("capture", "captured", "stage", "plan", "screen", "screened", "evaluate", "evaluated", "decided",
                   "stage-done", "final", "done")


def progress_events(stderr: str) -> list:
    """(event, stage) of each progress line: `egg: <event>[ <stage>]: ...` (stderr is not a terminal here)."""
    events = []
    for line in stderr.splitlines():
        words = line[len("egg: "):].split(":")[0].split(" ") if line.startswith("egg: ") else [""]
        if words[0] in PROGRESS_EVENTS:
            events.append((words[0], words[1] if len(words) > 1 else ""))
    return events


def test_optimize_reports_its_progress_in_order_one_line_per_event(optimized):
    events = progress_events(optimized["first"].stderr)
    kinds = [kind for kind, _ in events]
    assert kinds[:2] == ["capture", "captured"], optimized["first"].stderr
    assert kinds[-2:] == ["final", "done"]
    seeds = [kind for kind, stage in events if stage == "stage1.seeds"]
    assert seeds == ["stage", "plan", "screen", "screened", "evaluate", "evaluated", "decided", "stage-done"]
    assert [stage for kind, stage in events if kind == "stage"] == STAGES
    assert "\r" not in optimized["first"].stderr, "not a terminal: no line rewritten in place"
    assert "egg: screened stage1.seeds: 3 of 3 passed" in optimized["first"].stderr
    assert "egg: done: a verified kernel (completed) | best " in optimized["first"].stderr


def test_optimize_quiet_prints_no_progress(optimized):
    assert optimized["second"].returncode == 0, optimized["second"].stderr
    assert progress_events(optimized["second"].stderr) == [], optimized["second"].stderr


def test_optimize_report_stages_on_the_cpu(optimized):
    report = optimized["first_report"]
    assert [stage["stage"] for stage in report["stages"]] == STAGES
    screened = [entry for entry in report["screened"] if entry["stage"] == "stage1.seeds"]
    assert [entry["move"] for entry in screened] == ["seed 0", "seed 1", "seed 2"]
    assert all(entry["status"] == "ok" for entry in screened), screened
    evaluated = report["stages"][0]["candidates"]
    assert [candidate["move"] for candidate in evaluated] == ["seed 0"], "only the kept seed is fully evaluated"
    assert report["final_candidate_id"] == evaluated[0]["id"] == screened[0]["id"]
    # the trajectory lists every screened seed under its stage, not only the one evaluated in full
    trajectory = (optimized["egg"].workdir / "out" / "trajectory.md").read_text()
    seeds_section = trajectory.split("## stage1.seeds")[1].split("## stage1.algorithm")[0]
    for entry in screened:
        assert f"- screened {entry['id']} [{entry['move']}] round 1: ok" in seeds_section, seeds_section
    for stage in report["stages"][1:]:
        assert "measured tuning skipped" in stage["stopped_because"], stage["stopped_because"]
        assert "GPU" in stage["stopped_because"]
        assert stage["candidates"] == []
    assert report["notes"] and "skipped" in report["notes"]


def test_optimize_report_has_the_expert_section(optimized):
    expert = optimized["first_report"]["expert"]
    assert expert["pytorch_ops"] == []
    assert expert["kernels"] and all(KERNEL_FIELDS <= set(kernel) for kernel in expert["kernels"])
    model_new = (optimized["egg"].workdir / "out" / "model_new.py").read_text()
    assert design_line(model_new) == expert["design"]


def test_optimize_rerun_resumes_from_the_store(optimized):
    egg = optimized["egg"]
    assert optimized["second"].returncode == 0, optimized["second"].stderr
    report = json.loads((egg.workdir / "out" / "report.json").read_text())
    assert report["status"] == "ok" and report["run_id"] == optimized["first_report"]["run_id"]
    assert report["final"]["cached"] is True
    assert report["final_candidate_id"] == optimized["first_report"]["final_candidate_id"]
    for table, count in optimized["counts"].items():
        assert rows(egg, f"SELECT COUNT(*) FROM {table}")[0][0] == count, f"the rerun added {table}"
    assert len(rows(egg, "SELECT id FROM runs")) == 1, "the same run was resumed"


def test_optimize_time_budget_ends_the_run_with_its_correct_kernel(optimized):
    egg = optimized["egg"]
    proc = egg.run("optimize", "softmax_8x32.py", "--device", "cpu", "--out", "budget", "--time-budget", "0.001")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((egg.workdir / "budget" / "report.json").read_text())
    assert report["status"] == "ok" and report["final"]["correct"] is True
    assert report["stopped_because"] == "time_budget_used"
    assert report["run_id"] != optimized["first_report"]["run_id"], "the budget is part of the run's options"
    assert report["options"]["time_budget_s"] == 0.001
    assert report["stages"][0]["candidates"], "the seeds ran: a budget never ends a run without a correct kernel"
    for stage in report["stages"][1:]:
        assert stage["stopped_because"] == "time_budget_used" and stage["candidates"] == []


def test_optimize_time_budget_must_be_positive(egg):
    proc = egg.run("optimize", "softmax_8x32.py", "--device", "cpu", "--time-budget", "0")
    assert proc.returncode == 2
    assert "--time-budget" in single_error_line(proc)


def test_optimize_hybrid_backend_without_a_model_is_one_line_error(egg):
    shutil.copy(EXPERT_TASKS / "relu_scale_64.py", egg.workdir)
    proc = egg.run("optimize", "relu_scale_64.py", "--device", "cpu", "--out", "out", "--backend", "hybrid",
                   env={"EGG_LLM_MODEL": ""})
    assert proc.returncode == 2
    assert "no LLM model" in single_error_line(proc)
    assert not (egg.workdir / "out").exists()


# ---- egg bench ----

@pytest.fixture(scope="module")
def benched(tmp_path_factory):
    """A folder of three tasks: first the two matching 's*', then --resume over all three after one of the two
    finished rows was turned into an error row (a task that did not finish)."""
    egg = make_egg(tmp_path_factory, "bench")
    suite = egg.workdir / "suite"
    suite.mkdir()
    for name in BENCH_TASKS:
        shutil.copy(EXPERT_TASKS / name, suite)
    common = ["bench", "suite", "--device", "cpu", "--out", "bout", "--tol", "1e-2", "--also-tol", "1e-4"]
    first = egg.run(*common, "--tasks", "s*")
    assert first.returncode == 0, first.stderr
    results_path = egg.workdir / "bout" / "results.json"
    first_results = json.loads(results_path.read_text())
    errored = json.loads(results_path.read_text())
    row = next(row for row in errored["tasks"] if row["task"] == "sum_mid_dim.py")
    row.update(status="error", correct=False, reason="CUDA out of memory (injected by the test)")
    results_path.write_text(json.dumps(errored))
    resumed = egg.run(*common, "--resume")
    return {"egg": egg, "first": first, "first_results": first_results, "resumed": resumed}


def test_bench_writes_a_row_per_task_and_a_summary(benched):
    egg, results = benched["egg"], benched["first_results"]
    assert [row["task"] for row in results["tasks"]] == ["softmax_8x32.py", "sum_mid_dim.py"]
    for row in results["tasks"]:
        assert row["status"] == "ok" and row["correct"] is True, row
        assert row["at_tol"]["0.0001"]["correct"] is True, row["at_tol"]
        assert row["kernels"] >= 1 and row["pytorch_ops"] == []
        out_dir = egg.workdir / "bout" / "tasks" / row["task"][: -len(".py")]
        assert "class ModelNew(Model):" in (out_dir / "model_new.py").read_text()
        assert json.loads((out_dir / "report.json").read_text())["backend"] == "expert"
    overall = results["summary"]["overall"]
    assert overall["tasks"] == 2 and overall["tol"]["0.01"]["correct"] == 2
    assert "relu_scale_64" not in benched["first"].stderr


def test_bench_resume_runs_only_the_unfinished_tasks(benched):
    egg, first = benched["egg"], benched["first_results"]
    resumed = benched["resumed"]
    assert resumed.returncode == 0, resumed.stderr
    assert "relu_scale_64.py" in resumed.stderr
    assert "sum_mid_dim.py" in resumed.stderr, "an error row is a task to run again"
    assert "softmax_8x32" not in resumed.stderr, resumed.stderr
    results = json.loads((egg.workdir / "bout" / "results.json").read_text())
    by_task = {row["task"]: row for row in results["tasks"]}
    softmax = next(row for row in first["tasks"] if row["task"] == "softmax_8x32.py")
    assert by_task["softmax_8x32.py"] == softmax, "the finished rows are kept as they were"
    assert by_task["sum_mid_dim.py"]["status"] == "ok" and by_task["sum_mid_dim.py"]["correct"] is True
    assert len(results["tasks"]) == 3
    added = by_task["relu_scale_64.py"]
    assert added["correct"] is True
    assert added["at_tol"]["0.0001"]["correct"] is True
    overall = results["summary"]["overall"]
    assert overall["tasks"] == 3 and overall["tol"]["0.01"]["correct"] == 3
    assert (egg.workdir / "bout" / "tasks" / "relu_scale_64" / "model_new.py").is_file()


def test_bench_progress_never_prints_null_speedups(benched):
    assert "nullx" not in benched["first"].stderr


def test_bench_row_of_a_failed_task_says_why(tmp_path_factory):
    egg = make_egg(tmp_path_factory, "bench_failed")
    suite = egg.workdir / "failing"
    suite.mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "tasks" / "sort_values.py", suite)
    proc = egg.run("bench", "failing", "--device", "cpu", "--out", "fout", "--no-report")
    assert proc.returncode == 1, proc.stderr
    [row] = json.loads((egg.workdir / "fout" / "results.json").read_text())["tasks"]
    assert row["status"] == "failed" and row["correct"] is False
    assert row["pytorch_ops"] == ["aten.sort.default"], "the sort is the one op, in PyTorch"
    assert row["reason"].startswith("no candidate passed the harness: rejected: no Triton kernel launched"), row


def test_bench_missing_folder_is_one_line_error(egg):
    proc = egg.run("bench", "no_such_folder", "--device", "cpu", "--out", "bout")
    assert proc.returncode == 2
    assert "not found" in single_error_line(proc)
    assert not (egg.workdir / "bout").exists()


def test_bench_no_matching_task_is_one_line_error(egg):
    suite = egg.workdir / "suite"
    suite.mkdir()
    shutil.copy(EXPERT_TASKS / "relu_scale_64.py", suite)
    proc = egg.run("bench", "suite", "--device", "cpu", "--out", "bout", "--tasks", "nomatch*")
    assert proc.returncode == 2
    assert "nomatch*" in single_error_line(proc)
    assert not (egg.workdir / "bout").exists()
