"""egg_worker.reduce: reduced-size copies of KernelBench tasks, checked on synthetic tasks and on every task of
/work/shared/kernelbench (or $EGG_KERNELBENCH) when it is there."""

import ast
import difflib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import REPO
from egg_worker import loader
from egg_worker.reduce import DEFAULT_MAX_ELEMENTS, EXIT_BAD_INPUT, ReduceError, main, reduce_task

KERNELBENCH = Path(os.environ.get("EGG_KERNELBENCH", "/work/shared/kernelbench"))
MULTIPLE_TO_AVOID = 16  # what the odd preset steers away from
TEST_THREADS = 1  # the reduced models are tiny; more threads only spin when the CPUs are shared

# Level-3 tasks that cannot be reduced to the default budget: the budget they need and why.
FULL_IMAGE = 10 * 3 * 224 * 224  # batch_size 10 is small (kept) and the code needs 224x224 images
LEVEL3_BUDGETS = {
    "5_AlexNet.py": 3 * 224 * 224,  # Linear(256 * 6 * 6) needs 224x224 images; batch 1024 goes down to 1
    "11_VGG16.py": FULL_IMAGE,  # Linear(512 * 7 * 7)
    "12_VGG19.py": FULL_IMAGE,
    "19_MobileNetV1.py": FULL_IMAGE,  # AvgPool2d(7) after a 32x downsampling
    "29_SwinMLP.py": FULL_IMAGE,  # the model is built for img_size 224 (get_init_inputs gives nothing)
    "30_SwinTransformerV2.py": FULL_IMAGE,
}
# With widths (layer widths and batch reduced too) they fit one 224x224 image, the size their code needs.
ONE_IMAGE = 3 * 224 * 224
LEVEL3_NEEDS_MODULE = {"48_Mamba2ReturnY.py": "einops", "49_Mamba2ReturnFinalState.py": "einops"}
ODD_SAMPLE = ("level1/1_Square_matrix_multiplication_.py", "level1/23_Softmax.py",
              "level1/2_Standard_matrix_multiplication_.py", "level2/1_Conv2D_ReLU_BiasAdd.py",
              "level2/75_Gemm_GroupNorm_Min_BiasAdd.py", "level3/44_MiniGPTBlock.py")

GEMM_GROUPNORM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, GroupNorm, a bias, then a reshape that needs a multiple of 4."""

    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.zeros(bias_shape))

    def forward(self, x):
        x = self.norm(self.linear(x)) + self.bias
        return x.reshape(x.shape[0], -1, 4)


batch_size = 4096  # rows
hidden = 512
in_features = hidden * 2
out_features   =   8192   # odd spacing kept
num_groups = 8
bias_shape = (out_features,)
_private = 100000
scale = 0.5
label = "wide 4096"


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]
'''

GEMM_GROUPNORM_ALIGNED = (GEMM_GROUPNORM.replace("batch_size = 4096  #", "batch_size = 48  #")
                          .replace("hidden = 512", "hidden = 32")
                          .replace("out_features   =   8192   #", "out_features   =   64   #"))

POOLED_CONV = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels, features):
        super().__init__()
        layers = []
        for _ in range(5):
            layers += [nn.Conv2d(channels, features, 3, padding=1), nn.MaxPool2d(2)]
            channels = features
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x).flatten(1)


batch_size = 128
channels = 3
features = 8
height = width = 2048
height, width = 256, 256


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, features]
'''

FIXED_IMAGE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(3, out_channels, 3, stride=2)

    def forward(self, x):
        return self.conv(x)


batch_size = 64
out_channels = 96


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [out_channels]
'''

GROUPS_OF_TWELVE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features, num_groups):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, features)

    def forward(self, x):
        return self.norm(x)


batch_size = 4096
features = 768
num_groups = 12


def get_inputs():
    return [torch.rand(batch_size, features)]


def get_init_inputs():
    return [features, num_groups]
'''

ALREADY_SMALL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


batch_size = 4
dim = 16


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(TEST_THREADS)
    yield
    torch.set_num_threads(threads)


def write_task(tmp_path, text: str, name: str = "task.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def kernelbench_tasks(*levels: str) -> list:
    paths = [path for level in levels for path in sorted((KERNELBENCH / level).glob("*.py"))]
    if not paths:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no KernelBench tasks under {KERNELBENCH}"))]
    return [pytest.param(path, id=f"{path.parent.name}/{path.stem}") for path in paths]


def size_lines(original: str, widths: bool = False) -> set:
    """Line numbers of the module-level assignments and of get_inputs (with widths, of the classes and
    get_init_inputs too): the only lines a reduction may change."""
    lines = set()
    for node in ast.parse(original).body:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) or getattr(node, "name", "") == "get_inputs"
                or (widths and (isinstance(node, ast.ClassDef) or getattr(node, "name", "") == "get_init_inputs"))):
            lines.update(range(node.lineno, node.end_lineno + 1))
    return lines


def assert_only_size_lines_changed(original: str, reduced: str, task_path: str, widths: bool = False) -> None:
    header, body = reduced.split("\n", 1)
    assert header.startswith(f"# Reduced copy of {task_path} ")
    allowed = size_lines(original, widths)
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=body.splitlines(), autojunk=False)
    for tag, first, last, _, _ in matcher.get_opcodes():
        if tag != "equal":
            assert set(range(first + 1, last + 1)) <= allowed, original.splitlines()[first:last]


def check_reduced(reduced, task_path, tmp_path, max_elements: int, run_forward: bool = True,
                  widths: bool = False) -> None:
    """The written copy imports, defines the task names, fits the budget and (if asked) runs; only size lines
    differ from the original."""
    original = Path(task_path).read_text()
    assert_only_size_lines_changed(original, reduced.source, str(task_path), widths)
    module = loader.import_fresh(write_task(tmp_path, reduced.source, "reduced_copy.py"), "egg_reduce_test")
    try:
        assert all(hasattr(module, name) for name in ("Model", "get_inputs", "get_init_inputs"))
        inputs = module.get_inputs()
        elements = sum(item.numel() for item in inputs if isinstance(item, torch.Tensor))
        assert elements == reduced.input_elements <= max_elements
        if run_forward:
            torch.manual_seed(0)
            model = module.Model(*module.get_init_inputs()).eval()
            with torch.no_grad():
                output = model(*inputs)
            outputs = output if isinstance(output, (tuple, list)) else [output]
            assert all(not item.is_floating_point() or torch.isfinite(item).all() for item in outputs
                       if isinstance(item, torch.Tensor))
    finally:
        loader.forget(module)


# ---- synthetic tasks -------------------------------------------------------------------------------------------

def test_only_the_size_literals_change(tmp_path):
    path = write_task(tmp_path, GEMM_GROUPNORM)
    reduced = reduce_task(path)
    assert reduced.mapping == {"batch_size": 48, "hidden": 32, "out_features": 64}
    assert reduced.values == {4096: 48, 512: 32, 8192: 64}
    expected_header = f"# Reduced copy of {path} (egg_worker.reduce, preset aligned): {json.dumps(reduced.mapping)}\n"
    assert reduced.source == expected_header + GEMM_GROUPNORM_ALIGNED
    assert reduced.input_elements == 48 * 64


def test_computed_globals_follow_and_constraints_hold(tmp_path):
    path = write_task(tmp_path, GEMM_GROUPNORM)
    reduced = reduce_task(path, preset="odd")
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS)
    module = loader.import_fresh(write_task(tmp_path, reduced.source, "copy.py"), "egg_reduce_test")
    assert module.in_features == 2 * module.hidden  # `hidden * 2` is kept as code
    assert module.bias_shape == (module.out_features,)
    assert module.out_features % module.num_groups == 0 and module.out_features % 4 == 0  # GroupNorm, reshape
    assert module.out_features > module.batch_size > module.hidden  # the order of the original sizes
    assert module._private == 100000 and module.label == "wide 4096"
    loader.forget(module)


@pytest.mark.parametrize("preset", ["aligned", "odd"])
def test_a_group_count_divides_the_new_size(tmp_path, preset):
    reduced = reduce_task(write_task(tmp_path, GROUPS_OF_TWELVE), preset=preset)
    assert reduced.mapping["features"] % 12 == 0
    assert reduced.mapping["batch_size"] > reduced.mapping["features"]


def test_odd_prefers_sizes_that_are_not_multiples_of_16(tmp_path):
    reduced = reduce_task(write_task(tmp_path, GROUPS_OF_TWELVE), preset="odd")
    assert all(new % MULTIPLE_TO_AVOID for new in reduced.values.values())


def test_pooling_gets_an_image_big_enough_and_an_overwritten_global_is_left_alone(tmp_path):
    path = write_task(tmp_path, POOLED_CONV)
    reduced = reduce_task(path)
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS)
    assert reduced.mapping["height"] >= 2 ** 5  # five 2x2 max pools
    assert "height = width = 2048\n" in reduced.source  # dead: `height, width = ...` comes later
    assert "features = 8\n" in reduced.source and "channels = 3\n" in reduced.source


def test_literal_sizes_inside_get_inputs_are_reduced(tmp_path):
    path = write_task(tmp_path, FIXED_IMAGE)
    reduced = reduce_task(path)
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS)
    new_image = reduced.mapping["get_inputs:224"]
    assert f"torch.rand(batch_size, 3, {new_image}, {new_image})" in reduced.source
    assert "nn.Conv2d(3, out_channels, 3, stride=2)" in reduced.source



WRITTEN_OUT_WIDTHS = '''import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, 128, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class Model(nn.Module):
    def __init__(self, num_classes, image_size=224):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 3, padding=1)
        self.block = Block(64)
        self.head = nn.Linear(128 * (image_size // 4) ** 2, num_classes)
        self.image_size = image_size

    def forward(self, x):
        x = nn.functional.max_pool2d(self.block(self.stem(x)), 4)
        return self.head(torch.flatten(x, 1))


batch_size = 8
num_classes = 1000


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
'''


def test_widths_reduces_the_literals_of_the_classes_alike(tmp_path):
    """Whole models write their layer widths and defaults out (VGG, GoogleNet, Swin's img_size=224): with
    widths=True those literals are sizes too, equal values alike, so the head still fits the features."""
    path = write_task(tmp_path, WRITTEN_OUT_WIDTHS)
    with pytest.raises(ReduceError):
        reduce_task(path)  # the default image size stays 224: the input alone is over the budget
    reduced = reduce_task(path, widths=True)
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS, widths=True)
    image, width = reduced.mapping["get_inputs:224"], reduced.mapping["model:128"]
    assert reduced.mapping["model:224"] == image and reduced.mapping["model:64"] < width < 128
    assert f"nn.Linear({width} * (image_size // 4) ** 2, num_classes)" in reduced.source
    assert f"image_size={image}" in reduced.source and "max_pool2d(self.block(self.stem(x)), 4)" in reduced.source


FLATTENED_HEAD = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=7, padding=3), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(128, 256, kernel_size=3, padding=1), nn.MaxPool2d(2), nn.MaxPool2d(2), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(256 * 7 * 7, 512), nn.ReLU(inplace=True),
                                        nn.Linear(512, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


batch_size = 10
num_classes = 1000


def get_inputs():
    return [torch.rand(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
'''


def test_widths_fits_a_flattened_head_to_the_reduced_image(tmp_path):
    """VGG's classifier is built for the full image (`nn.Linear(512 * 7 * 7, 4096)`): with widths the image still
    shrinks (to a side the five pools allow) and the product's trailing side factors follow it, the width factor
    as the widths map it; the kernel size 7 elsewhere is left alone."""
    path = write_task(tmp_path, FLATTENED_HEAD)
    reduced = reduce_task(path, widths=True)
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS, widths=True)
    image, channels, hidden = (reduced.mapping[key] for key in ("get_inputs:224", "model:256", "model:512"))
    side = image // 2 ** 5  # five 2x2 max pools, each rounding down
    assert 1 <= side < 7 and reduced.input_elements == reduced.mapping["batch_size"] * 3 * image ** 2
    assert reduced.mapping["model:256 * 7 * 7"] == f"{channels} * {side} * {side}"
    assert f"nn.Linear({channels} * {side} * {side}, {hidden})" in reduced.source
    assert f"nn.Conv2d(3, {reduced.mapping['model:64']}, kernel_size=7, padding=3)" in reduced.source
    with pytest.raises(ReduceError):
        reduce_task(path)  # without widths the classes stay as written: the image must stay 224, over the budget


WHOLE_MAP_POOL = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, num_classes=1000):
        super().__init__()
        widths = [3, 32, 64, 128, 256, 512]
        self.features = nn.Sequential(
            *[nn.Conv2d(widths[i], widths[i + 1], 3, stride=2, padding=1) for i in range(5)],
            nn.AvgPool2d(7),
        )
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.features(x)
        return self.fc(x.view(x.size(0), -1))


batch_size = 10
height = 224
width = 224


def get_inputs():
    return [torch.rand(batch_size, 3, height, width)]


def get_init_inputs():
    return []
'''


def test_widths_fits_a_whole_map_pool_to_the_reduced_image(tmp_path):
    """MobileNetV1 pools its final 7x7 map with `nn.AvgPool2d(7)` (the window its stride too): with widths the image
    shrinks and that window becomes the reduced final map's side (2 at least, so that it still pools)."""
    path = write_task(tmp_path, WHOLE_MAP_POOL)
    reduced = reduce_task(path, widths=True)
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS, widths=True)
    image, window = reduced.mapping["height"], reduced.mapping["pool:7"]
    side = image
    for _ in range(5):
        side = (side + 1) // 2  # a 3x3 convolution of stride 2 and padding 1
    assert image < 224 and 2 <= window == side < 7
    assert f"nn.AvgPool2d({window})," in reduced.source and "stride=2, padding=1)" in reduced.source


WINDOWED = '''import torch
import torch.nn as nn
import torch.nn.functional as F


def window_means(x, window_size):
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    means = x.mean((2, 4), keepdim=True).expand_as(x)
    return means.reshape(B, H, W, C)


class Stage(nn.Module):
    def __init__(self, dim, resolution, window_size=7):
        super().__init__()
        self.window_size = min(window_size, resolution)  # a map no bigger than the window is one window
        self.mix = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.mix(window_means(x, self.window_size))


class Model(nn.Module):
    def __init__(self, img_size=224, patch_size=4, embed_dim=96, num_classes=1000, window_size=7):
        super().__init__()
        self.embed = nn.Conv2d(3, embed_dim, patch_size, stride=patch_size)
        resolution = img_size // patch_size
        self.stages = nn.ModuleList([Stage(embed_dim, resolution // 2 ** i, window_size) for i in range(4)])
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x):
        x = self.embed(x).permute(0, 2, 3, 1)
        for index, stage in enumerate(self.stages):
            x = stage(x)
            if index < len(self.stages) - 1:
                x = F.avg_pool2d(x.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
        return self.head(x.mean((1, 2)))


batch_size = 10
image_size = 224


def get_inputs():
    return [torch.rand(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return []
'''


def test_widths_shrinks_a_window_default_with_the_image(tmp_path):
    """Swin's windows (`window_size=7`) must divide the feature map at every stage (56, 28, 14, 7 for a 224x224
    image): with widths the image shrinks and the window defaults, named by the view's shape error, step down with
    it until they divide the reduced map (the window of a map no bigger than it is the map)."""
    path = write_task(tmp_path, WINDOWED)
    reduced = reduce_task(path, widths=True)
    check_reduced(reduced, path, tmp_path, DEFAULT_MAX_ELEMENTS, widths=True)
    image, window = reduced.mapping["image_size"], reduced.mapping["default:window_size=7"]
    assert image < 224 and reduced.mapping["model:224"] == image and 2 <= window < 7
    assert all(side % window == 0 for side in (image // 4 // 2 ** i for i in range(4)) if side > window)
    assert reduced.source.count(f"window_size={window}") == 2 and "patch_size=4" in reduced.source
    with pytest.raises(ReduceError):
        reduce_task(path)  # without widths the classes stay as written: the image must stay 224, over the budget


def test_a_task_already_small_is_copied_as_it_is(tmp_path):
    path = write_task(tmp_path, ALREADY_SMALL)
    reduced = reduce_task(path)
    assert reduced.mapping == {} and reduced.source.split("\n", 1)[1] == ALREADY_SMALL


def test_task_code_runs_quietly(tmp_path, capsys):
    path = write_task(tmp_path, GEMM_GROUPNORM.replace("batch_size = 4096", "print('importing')\nbatch_size = 4096"))
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    reduce_task(path)
    assert torch.equal(torch.rand(4), expected)  # the caller's random state is left as it was
    assert capsys.readouterr().out == ""


def test_failures_are_one_line_reduce_errors(tmp_path):
    path = write_task(tmp_path, GEMM_GROUPNORM)
    cases = [(lambda: reduce_task(path, max_elements=1), "fits 1 input elements"),
             (lambda: reduce_task(path, preset="huge"), "preset must be one of"),
             (lambda: reduce_task(str(tmp_path / "absent.py")), "cannot read task"),
             (lambda: reduce_task(write_task(tmp_path, "def broken(:\n", "bad.py")), "cannot read task"),
             (lambda: reduce_task(write_task(tmp_path, "import egg_no_such_module\n", "imp.py")), "No module named")]
    for call, words in cases:
        with pytest.raises(ReduceError) as caught:
            call()
        assert words in str(caught.value) and "\n" not in str(caught.value)


# ---- command line ----------------------------------------------------------------------------------------------

def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), OMP_NUM_THREADS=str(TEST_THREADS))
    return subprocess.run([sys.executable, "-m", "egg_worker.reduce", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_the_copy_and_prints_the_mapping(tmp_path):
    path, out = write_task(tmp_path, GEMM_GROUPNORM), tmp_path / "out.py"
    result = run_cli(path, "--out", str(out), "--preset", "odd", "--max-elements", "4096")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1
    assert json.loads(result.stdout) == reduce_task(path, "odd", 4096).mapping
    assert out.read_text().startswith(f"# Reduced copy of {path} (egg_worker.reduce, preset odd)")


def test_cli_bad_path_is_one_line_and_exit_2(tmp_path):
    result = run_cli(str(tmp_path / "absent.py"), "--out", str(tmp_path / "out.py"))
    assert result.returncode == EXIT_BAD_INPUT and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "cannot read task" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out.py").exists()


@pytest.mark.parametrize("args", [["--out", "x.py"], ["task.py"], ["task.py", "--out", "x.py", "--preset", "huge"],
                                  ["task.py", "--out", "x.py", "--max-elements", "many"]])
def test_cli_bad_arguments_are_one_line_and_exit_2(args, capsys):
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == EXIT_BAD_INPUT
    assert capsys.readouterr().err.count("\n") == 1


def test_cli_unwritable_output_is_one_line_and_exit_2(tmp_path, capsys):
    path = write_task(tmp_path, ALREADY_SMALL)
    assert main([path, "--out", str(tmp_path / "no" / "such" / "dir.py")]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err.count("\n") == 1


# ---- KernelBench -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("task", kernelbench_tasks("level1", "level2"))
def test_every_level1_and_level2_task_reduces(task, tmp_path):
    reduced = reduce_task(str(task))
    assert reduced.input_elements <= DEFAULT_MAX_ELEMENTS
    check_reduced(reduced, task, tmp_path, DEFAULT_MAX_ELEMENTS)


@pytest.mark.parametrize("task", kernelbench_tasks("level3"))
def test_level3_tasks_reduce_within_their_budget(task, tmp_path):
    module = LEVEL3_NEEDS_MODULE.get(task.name)
    if module and importlib.util.find_spec(module) is None:
        with pytest.raises(ReduceError, match=f"No module named '{module}'"):
            reduce_task(str(task))
        return
    budget = LEVEL3_BUDGETS.get(task.name, DEFAULT_MAX_ELEMENTS)
    if budget > DEFAULT_MAX_ELEMENTS:
        with pytest.raises(ReduceError):
            reduce_task(str(task))
    reduced = reduce_task(str(task), max_elements=budget)
    check_reduced(reduced, task, tmp_path, budget, run_forward=budget == DEFAULT_MAX_ELEMENTS)


@pytest.mark.parametrize("task", kernelbench_tasks("level3"))
def test_level3_tasks_reduce_with_widths(task, tmp_path):
    module = LEVEL3_NEEDS_MODULE.get(task.name)
    if module and importlib.util.find_spec(module) is None:
        pytest.skip(f"no module {module}")
    budget = ONE_IMAGE if task.name in LEVEL3_BUDGETS else DEFAULT_MAX_ELEMENTS
    reduced = reduce_task(str(task), max_elements=budget, widths=True)
    check_reduced(reduced, task, tmp_path, budget, widths=True)


# Whole models whose image shrinks with widths though their classifier is built for 224x224 images (a Linear's
# in_features written as channels * 7 * 7, or MobileNetV1's AvgPool2d(7), fitted to the reduced image), whose
# pools need a 32x downsampling, or whose windows shrink with the image (Swin's window_size=7): the smallest budget
# they fit with a reduced image (the CPU suite's interpreter time grows with the image).
SHRUNK_IMAGE_BUDGETS = {"5_AlexNet.py": 16384, "11_VGG16.py": 4096, "12_VGG19.py": 4096, "15_DenseNet121.py": 4096,
                        "16_DenseNet201.py": 4096, "19_MobileNetV1.py": 16384, "29_SwinMLP.py": 16384,
                        "30_SwinTransformerV2.py": 16384}


@pytest.mark.parametrize("name", sorted(SHRUNK_IMAGE_BUDGETS))
def test_whole_models_shrink_their_image_with_widths(name, tmp_path):
    task = KERNELBENCH / "level3" / name
    if not task.is_file():
        pytest.skip(f"no {task}")
    budget = SHRUNK_IMAGE_BUDGETS[name]
    reduced = reduce_task(str(task), max_elements=budget, widths=True)
    check_reduced(reduced, task, tmp_path, budget, widths=True)
    image = reduced.mapping.get("get_inputs:224", reduced.mapping.get("height", reduced.mapping.get("image_size")))
    assert image < 224 and reduced.input_elements == reduced.mapping["batch_size"] * 3 * image ** 2


@pytest.mark.parametrize("name", ODD_SAMPLE)
def test_odd_preset_on_a_sample(name, tmp_path):
    task = KERNELBENCH / name
    if not task.is_file():
        pytest.skip(f"no {task}")
    reduced = reduce_task(str(task), preset="odd")
    check_reduced(reduced, task, tmp_path, DEFAULT_MAX_ELEMENTS)
    assert any(new % MULTIPLE_TO_AVOID for new in reduced.values.values())
