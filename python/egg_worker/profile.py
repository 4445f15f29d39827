"""The `profile` and `peaks` ops: Nsight Compute metrics per kernel and a roofline for one candidate.

handle_profile(request) -> ProfileResult
    request: {task, candidate, device, seed, init_seed, ncu: path or null, timeout_s, peaks: optional
              {dram_bytes_per_s, fp32_flops_per_s, tf32_flops_per_s}}
    result:  {status: ok | error | rejected, reason, ncu: {available, reason, command}, kernels: [ncu_csv record +
              triton: bool + roofline (from its dram bytes, fp32 flops and duration, or null)],
              roofline: {roofline.roofline fields, note}, triton_kernels: [names]}
    The task roofline counts the minimum work on the reference (FlopCounterMode FLOPs; bytes of inputs,
    outputs and parameters) against the candidate's median time over CUDA events (cuda only; never timed
    under ncu). ncu runs `python -m egg_worker.ncu_target` once, with the worker's environment; its failure
    (no ncu, no counter access, no kernels, timeout) leaves status ok with ncu.available false and a
    one-line ncu.reason. status error means the task or candidate could not be built or run (on cpu the
    candidate is built, not run); rejected, that it tried to leave the sandbox or left processes running
    (egg_worker.fence), and the worker is replaced. triton_kernels: the Triton kernels of the profiled forward (cuda; from
    the timing run when ncu failed), [] on cpu.

measure_peaks(request) -> {dram_bytes_per_s, fp32_flops_per_s, tf32_flops_per_s, gpu_name, note}
    1 GiB device-to-device copy (bytes read + written), 8192^3 fp32 matmul with TF32 off and on; each the
    median of 10 CUDA-event timings after warm-up. Nulls and a note on cpu.

timeout_s bounds the whole request: ncu gets what timing and peaks left of it.
"""

import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from egg_worker import fence, ncu_csv, ncu_target, roofline

DEFAULT_NCU = "/usr/local/cuda/bin/ncu"
DEFAULT_TIMEOUT_S = 600.0
NCU_SECTIONS = (
    "SpeedOfLight", "MemoryWorkloadAnalysis", "Occupancy", "LaunchStats", "WarpStateStats", "SchedulerStats",
)
NCU_METRICS = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
)
NCU_FAILURE_MARKERS = (
    ("ERR_NVGPUCTRPERM", "no permission to read GPU performance counters (ERR_NVGPUCTRPERM)"),
    ("LibraryNotLoaded", "ncu could not load its profiling library (LibraryNotLoaded)"),
)
TIMING_WARMUP = 3
TIMING_TRIALS = 20
TIMING_MIN_TRIALS = 3
TIMING_BUDGET_S = 5.0
PEAK_WARMUP = 3
PEAK_TRIALS = 10
PEAK_COPY_BYTES = 1 << 30
PEAK_MATMUL_N = 8192
PR_SET_PDEATHSIG = 1
CPU_NOTE = "device cpu: Triton's interpreter gives no performance figures; flops and bytes only"

_peaks_by_device = {}


def one_line(error):
    return f"{type(error).__name__}: {' '.join(str(error).split())}"


def is_cuda(device):
    return str(device).startswith("cuda")


# ---------------------------------------------------------------- timing and peaks

def cuda_median_ms(fn, warmup, trials):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times_ms = []
    for _ in range(trials):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times_ms.append(start.elapsed_time(end))
    return statistics.median(times_ms)


def candidate_median_ms(model, inputs, device):
    """Median forward time in ms: TIMING_TRIALS trials, fewer when they would outlast TIMING_BUDGET_S."""
    def forward():
        ncu_target.run_forward(model, inputs, device)

    estimate_ms = cuda_median_ms(forward, TIMING_WARMUP, 1)
    affordable = int(TIMING_BUDGET_S * 1e3 / max(estimate_ms, 1e-3))
    trials = max(TIMING_MIN_TRIALS, min(TIMING_TRIALS, affordable))
    return cuda_median_ms(forward, 0, trials)


class Fp32Precision:
    """Sets cuBLAS fp32 matmul precision ('ieee' or 'tf32') inside a `with`, restoring it after."""

    def __init__(self, precision):
        self.precision = precision
        self.matmul = torch.backends.cuda.matmul
        self.new_api = hasattr(self.matmul, "fp32_precision")

    def __enter__(self):
        if self.new_api:
            self.saved = self.matmul.fp32_precision
            self.matmul.fp32_precision = self.precision
        else:
            self.saved = self.matmul.allow_tf32
            self.matmul.allow_tf32 = self.precision == "tf32"
        return self

    def __exit__(self, *exc_info):
        if self.new_api:
            self.matmul.fp32_precision = self.saved
        else:
            self.matmul.allow_tf32 = self.saved
        return False


def measure_cuda_peaks(device):
    source = torch.empty(PEAK_COPY_BYTES, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    copy_ms = cuda_median_ms(lambda: target.copy_(source), PEAK_WARMUP, PEAK_TRIALS)
    del source, target
    n = PEAK_MATMUL_N
    a = torch.randn(n, n, device=device, dtype=torch.float32)
    b = torch.randn(n, n, device=device, dtype=torch.float32)
    rates = {}
    for precision in ("ieee", "tf32"):
        with Fp32Precision(precision):
            matmul_ms = cuda_median_ms(lambda: torch.mm(a, b), PEAK_WARMUP, PEAK_TRIALS)
        rates[precision] = 2.0 * n**3 / (matmul_ms / 1e3)
    del a, b
    torch.cuda.empty_cache()
    return {
        "dram_bytes_per_s": 2.0 * PEAK_COPY_BYTES / (copy_ms / 1e3),
        "fp32_flops_per_s": rates["ieee"],
        "tf32_flops_per_s": rates["tf32"],
        "gpu_name": torch.cuda.get_device_name(device),
        "note": "",
    }


def measure_peaks(request):
    device = request.get("device", "cuda")
    if not is_cuda(device):
        return {
            "dram_bytes_per_s": None, "fp32_flops_per_s": None, "tf32_flops_per_s": None, "gpu_name": None,
            "note": "device cpu: peaks are measured on a CUDA GPU only",
        }
    peaks = measure_cuda_peaks(device)
    _peaks_by_device[device] = peaks
    return peaks


def peaks_for(request):
    device = request["device"]
    if request.get("peaks"):
        return request["peaks"]
    if device not in _peaks_by_device:
        measure_peaks({"device": device})
    return _peaks_by_device[device]


# ---------------------------------------------------------------- task roofline

def task_roofline(request):
    """(roofline dict, Triton kernel names seen while timing) for the request's task and candidate."""
    device = request["device"]
    built = ncu_target.build(request["task"], request["candidate"], device, request["seed"], request["init_seed"],
                             _precision(request))
    with torch.device(device):
        outputs, flops = roofline.forward_with_flops(built.reference, built.inputs)
    bytes_ = roofline.minimum_bytes(built.inputs, outputs, built.reference)
    if not is_cuda(device):
        return dict(roofline.roofline(flops, bytes_, None, None), note=CPU_NOTE), []
    with ncu_target.TritonLaunchRecorder() as recorder:
        ncu_target.run_forward(built.candidate, built.inputs, device)
    time_ms = candidate_median_ms(built.candidate, built.inputs, device)
    del built, outputs
    torch.cuda.empty_cache()
    return dict(roofline.roofline(flops, bytes_, time_ms, peaks_for(request)), note=""), recorder.unique_names()


# ---------------------------------------------------------------- Nsight Compute

def _precision(request) -> str:
    precision = request.get("precision") or "fp32"
    if precision not in ncu_target.DTYPES:
        raise ValueError(f"precision must be one of {', '.join(ncu_target.DTYPES)}, not {precision!r}")
    return precision


def find_ncu(requested):
    """Path of an executable ncu, or None."""
    candidates = [requested] if requested else [shutil.which("ncu"), DEFAULT_NCU]
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def ncu_command(ncu, request, names_path):
    """The ncu command line; --print-details all adds the sections' body charts, the warp stall breakdown
    ("Stall Long Scoreboard" ...) among them, which the header alone lacks."""
    command = [
        ncu, "--clock-control", "none", "--csv", "--page", "details", "--print-details", "all",
        "--profile-from-start", "off",
    ]
    for section in NCU_SECTIONS:
        command += ["--section", section]
    command += ["--metrics", ",".join(NCU_METRICS)]
    command += [
        sys.executable, "-m", "egg_worker.ncu_target",
        "--task", os.path.abspath(request["task"]), "--candidate", os.path.abspath(request["candidate"]),
        "--device", request["device"], "--seed", str(request["seed"]), "--init-seed", str(request["init_seed"]),
        "--names-out", names_path, "--dtype", _precision(request),
    ]
    return command


def child_environment():
    """The worker's own environment, with this package importable by the child."""
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if package_root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([package_root] + paths)
    return env


def die_with_parent():
    """In the forked child: SIGKILL it when the worker dies (Linux), so ncu never outlives a killed worker."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def run_command(command, timeout_s):
    """(exit status, stdout, stderr); raises subprocess.TimeoutExpired after killing the whole group."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        errors="replace", env=child_environment(), start_new_session=True, preexec_fn=die_with_parent,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return process.returncode, stdout, stderr


def last_line(text, prefix=""):
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and line.startswith(prefix)]
    return lines[-1] if lines else ""


def ncu_failure(status, stdout, stderr, kernels):
    """One-line reason ncu's run is unusable, or "" when it is usable."""
    output = stdout + "\n" + stderr
    for marker, reason in NCU_FAILURE_MARKERS:
        if marker in output:
            return reason
    target_error = last_line(stderr, "ncu_target:")
    if status != 0:
        detail = target_error or last_line(output, "==ERROR==") or last_line(stderr)
        return f"ncu exited with status {status}: {detail}" if detail else f"ncu exited with status {status}"
    if not kernels:
        return "ncu reported no kernels: " + (target_error or last_line(output, "==WARNING==") or "no CSV rows")
    return ""


def read_names(path):
    try:
        with open(path) as names_file:
            return json.load(names_file)["names"]
    except (OSError, ValueError, KeyError):
        return []


def is_triton_kernel(kernel_name, triton_names):
    """ncu's name equals a Triton kernel's name, or starts with it followed by a non-identifier character."""
    for name in triton_names:
        if kernel_name == name:
            return True
        if kernel_name.startswith(name):
            following = kernel_name[len(name)]
            if not (following.isalnum() or following == "_"):
                return True
    return False


def classify(kernels, triton_names, peaks):
    for kernel in kernels:
        kernel["triton"] = is_triton_kernel(kernel["name"], triton_names)
        duration_ns = kernel["duration_ns"]
        kernel["roofline"] = None
        if duration_ns and kernel["dram_bytes"] is not None:
            kernel["roofline"] = roofline.roofline(kernel["flops"], kernel["dram_bytes"], duration_ns / 1e6, peaks)
    return kernels


def profile_kernels(ncu, request, timeout_s, peaks):
    """(ncu info, kernels, Triton names from the profiled forward)."""
    with tempfile.TemporaryDirectory(prefix="egg-ncu-") as scratch:
        names_path = os.path.join(scratch, "names.json")
        command = ncu_command(ncu, request, names_path)
        info = {"available": False, "reason": "", "command": command}
        if timeout_s <= 0:
            return dict(info, reason="ncu not run: no time left of timeout_s"), [], []
        try:
            status, stdout, stderr = run_command(command, timeout_s)
        except subprocess.TimeoutExpired:
            return dict(info, reason=f"ncu timed out after {timeout_s:.1f} s"), [], []
        except OSError as error:
            return dict(info, reason=f"ncu could not start: {one_line(error)}"), [], []
        names = read_names(names_path)
    kernels = ncu_csv.parse_details(stdout)
    reason = ncu_failure(status, stdout, stderr, kernels)
    if reason:
        return dict(info, reason=reason), [], names
    return dict(info, available=True), classify(kernels, names, peaks), names


# ---------------------------------------------------------------- the op

def _fenced(processes_before):
    """Why the candidate is refused for what it tried beyond the sandbox or left running (egg_worker.fence)."""
    violations = fence.take_violations()
    strays = fence.stray_processes(processes_before)
    fence.kill(strays)
    if violations:
        return fence.describe(violations, "profile")
    return fence.describe_strays(strays) if strays else ""


def handle_profile(request):
    started = time.monotonic()
    timeout_s = float(request.get("timeout_s") or DEFAULT_TIMEOUT_S)
    device = request["device"]
    result = {
        "status": "ok", "reason": "", "ncu": {"available": False, "reason": "", "command": []},
        "kernels": [], "roofline": None, "triton_kernels": [],
    }
    processes_before = fence.descendants()
    try:
        with fence.watching():
            result["roofline"], result["triton_kernels"] = task_roofline(request)
    except Exception as error:  # the task's or candidate's failure is a result, not a worker error
        result.update(status="error", reason=one_line(error))
    refused = _fenced(processes_before)
    if refused:
        result.update(status="rejected", reason=refused)
    if result["status"] != "ok":
        result["ncu"]["reason"] = "not run: the task or candidate failed"
        return result
    ncu = find_ncu(request.get("ncu"))
    if ncu is None:
        result["ncu"]["reason"] = f"ncu not found ({request.get('ncu') or 'PATH, ' + DEFAULT_NCU})"
        return result
    if not is_cuda(device):
        result["ncu"]["reason"] = "device cpu: ncu profiles CUDA kernels only"
        return result
    remaining_s = timeout_s - (time.monotonic() - started)
    result["ncu"], result["kernels"], names = profile_kernels(ncu, request, remaining_s, peaks_for(request))
    result["triton_kernels"] = names or result["triton_kernels"]
    return result
