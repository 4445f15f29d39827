"""GPU timing of a callable with CUDA events, L2 flushed before every trial.

`time_cuda(fn, args, settings)` makes one compile call, `warmup` warm-up calls, then timed trials until
n >= min_trials, or until more than budget_s has elapsed and n >= 10. Each trial zeroes a flush buffer of
max(3 x L2, 256 MiB), records a start event on the current stream, calls fn, records the end event and
synchronises. Returns Stats {mean, median, p20, p80, std, n} in milliseconds. The functions it relies on are
captured at import so that a candidate cannot replace them under it; egg_worker.launches' counting wrappers are
paused while it runs (a timed call pays what it would in a process without them). `protocol(...)` is the one
description of all this that every evaluation reports (`timing_protocol`).
"""

import dataclasses
import time

import numpy
import torch

from egg_worker import launches, precision

MIN_FLUSH_BYTES = 256 * 1024 * 1024
MIN_TRIALS_ON_BUDGET = 10

_perf_counter = time.perf_counter
_synchronize = torch.cuda.synchronize
_Event = torch.cuda.Event
_record = torch.cuda.Event.record
_elapsed_time = torch.cuda.Event.elapsed_time
_zero = torch.Tensor.zero_
_empty = torch.empty
_percentile = numpy.percentile

_flush_buffers = {}


@dataclasses.dataclass(frozen=True)
class TimingSettings:
    enabled: bool = True
    warmup: int = 10
    min_trials: int = 100
    budget_s: float = 10.0
    cpu_wall: bool = False  # on the cpu: time the interpreter's wall clock (search decisions only)


def parse_settings(value) -> TimingSettings:
    """TimingSettings from a request's `timing` object (missing fields take their defaults)."""
    if value is None:
        return TimingSettings()
    if not isinstance(value, dict):
        raise ValueError("timing must be an object")
    defaults = TimingSettings()
    settings = TimingSettings(
        enabled=bool(value.get("enabled", defaults.enabled)),
        warmup=int(value.get("warmup", defaults.warmup)),
        min_trials=int(value.get("min_trials", defaults.min_trials)),
        budget_s=float(value.get("budget_s", defaults.budget_s)),
        cpu_wall=bool(value.get("cpu_wall", defaults.cpu_wall)),
    )
    if settings.warmup < 0 or settings.min_trials < 1 or settings.budget_s < 0:
        raise ValueError("timing needs warmup >= 0, min_trials >= 1, budget_s >= 0")
    return settings


def stats_ms(times_ms) -> dict:
    values = numpy.asarray(times_ms, dtype=numpy.float64)
    return {
        "mean": float(values.mean()),
        "median": float(numpy.median(values)),
        "p20": float(_percentile(values, 20)),
        "p80": float(_percentile(values, 80)),
        "std": float(values.std()),
        "n": int(values.size),
    }


def _flush_buffer(device: torch.device) -> torch.Tensor:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _flush_buffers:
        l2_bytes = torch.cuda.get_device_properties(index).L2_cache_size
        n_bytes = max(3 * l2_bytes, MIN_FLUSH_BYTES)
        _flush_buffers[index] = _empty(n_bytes, dtype=torch.uint8, device=torch.device("cuda", index))
    return _flush_buffers[index]


def _timed_call_ms(fn, args, flush: torch.Tensor) -> float:
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)
    _zero(flush)
    _record(start)
    fn(*args)
    _record(end)
    _synchronize()
    return _elapsed_time(start, end)


def _synchronized_call_ms(fn, args, flush: torch.Tensor) -> float:
    _zero(flush)
    _synchronize()
    started_s = _perf_counter()
    fn(*args)
    _synchronize()
    return (_perf_counter() - started_s) * 1e3


SYNCHRONIZED_TIMER = "cuda-synchronized-wall"


def _time_calls(timed_call, fn, args, settings: TimingSettings, device: torch.device) -> list:
    with launches.paused():
        return _timed_loop(timed_call, fn, args, settings, device)


def _timed_loop(timed_call, fn, args, settings: TimingSettings, device: torch.device) -> list:
    flush = _flush_buffer(device)
    fn(*args)
    for _ in range(settings.warmup):
        fn(*args)
    _synchronize()
    times_ms = []
    started_s = _perf_counter()
    while len(times_ms) < settings.min_trials:
        times_ms.append(timed_call(fn, args, flush))
        over_budget = _perf_counter() - started_s > settings.budget_s
        if over_budget and len(times_ms) >= MIN_TRIALS_ON_BUDGET:
            break
    return times_ms


def time_cuda(fn, args, settings: TimingSettings, device: torch.device) -> dict:
    """CUDA events on the current stream around every call, the L2 flushed before each."""
    return stats_ms(_time_calls(_timed_call_ms, fn, args, settings, device))


def time_cuda_synchronized(fn, args, settings: TimingSettings, device: torch.device) -> dict:
    """Host wall clock between two device-wide synchronizes around every call: counts the work of every stream
    (and the launch overhead), for calls whose kernels do not all run on the current stream."""
    times_ms = _time_calls(_synchronized_call_ms, fn, args, settings, device)
    return dict(stats_ms(times_ms), timer=SYNCHRONIZED_TIMER)


CPU_WALL_TRIALS = 5
CPU_WALL_TIMER = "cpu-interpreter-wall"


def time_cpu_wall(fn, args, settings: TimingSettings) -> dict:
    """Wall-clock Stats of `fn` in Triton's interpreter: one warm-up call, then up to CPU_WALL_TRIALS calls
    within the budget. Only for comparing candidates of one search on the same machine: never a performance
    figure. The Stats carry timer = CPU_WALL_TIMER."""
    with launches.paused():
        times_ms = _cpu_wall_loop(fn, args, settings)
    return dict(stats_ms(times_ms), timer=CPU_WALL_TIMER)


def _cpu_wall_loop(fn, args, settings: TimingSettings) -> list:
    fn(*args)
    times_ms = []
    started_s = _perf_counter()
    while len(times_ms) < min(settings.min_trials, CPU_WALL_TRIALS):
        call_started_s = _perf_counter()
        fn(*args)
        times_ms.append((_perf_counter() - call_started_s) * 1e3)
        if _perf_counter() - started_s > settings.budget_s and len(times_ms) >= 2:
            break
    return times_ms


HOST_CALLS = 20


def first_call_s(fn, args, device: torch.device) -> float:
    """Seconds of one call, to the end of its GPU work: a torch.compile module's first call at some inputs (which
    compiles), reported as its compile time and kept out of the timed calls."""
    started_s = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize(device)
    return time.perf_counter() - started_s


def host_call_ms(fn, args, calls: int = HOST_CALLS) -> dict:
    """Stats of the host time one call takes to return (its launches issued, not waited for), the device idle
    before each: a call whose host time is near its CUDA-event time is launch-bound (the GPU waits on Python)."""
    times_ms = []
    with launches.paused():
        for _ in range(calls):
            _synchronize()
            started_s = _perf_counter()
            fn(*args)
            times_ms.append((_perf_counter() - started_s) * 1e3)
    _synchronize()
    return stats_ms(times_ms)


CUDA_EVENTS_TIMER = "cuda-events"
TIMED_REGION = ("one forward call on the caller's current stream, from a CUDA event recorded after the L2 flush to "
                "one recorded when the call returns, then a device synchronize; the host's launch time counts "
                "wherever the GPU waits for it")
SYNCHRONIZED_REGION = ("one forward call between two device-wide synchronizes, by the host clock (launch overhead "
                       "included): used when library kernels ran on side streams")


def flush_bytes(device: torch.device):
    """Bytes zeroed before every timed call on `device` (None off the GPU)."""
    if device.type != "cuda":
        return None
    index = device.index if device.index is not None else torch.cuda.current_device()
    return max(3 * torch.cuda.get_device_properties(index).L2_cache_size, MIN_FLUSH_BYTES)


def precision_name() -> str:
    """The egg_worker.precision setting the process runs under now ("custom" when none matches)."""
    now = precision.describe_current()
    for setting in precision.SETTINGS.values():
        expected = {"matmul_precision": setting.matmul_precision,
                    "matmul_allow_tf32": setting.matmul_precision != "highest",
                    "cudnn_allow_tf32": setting.cudnn_tf32}
        if now == expected:
            return setting.name
    return "custom"


def protocol(settings: TimingSettings, device: torch.device, timer: str, process: str, seed: int,
             init_seed: int, precisions: dict) -> dict:
    """The timing protocol of one evaluation, as reports state it. `timer`: the candidate's ("none" when nothing
    was timed); `precisions`: {"candidate" | "eager" | "compile": precision setting name}."""
    timed = timer != "none"
    return {
        "timer": timer,
        "first_call": "untimed (compiles and autotunes)" if timed else None,
        "warmup_calls": settings.warmup if timed else 0,
        "timed_calls": settings.min_trials if timed else 0,
        "budget_s": settings.budget_s if timed else None,
        "min_timed_calls_on_budget": MIN_TRIALS_ON_BUDGET if timed else None,
        "l2_flush_bytes": flush_bytes(device) if timed else None,
        "l2_flush": "zeroed on the current stream before every timed call, outside the timed region" if timed else None,
        "statistic": "median" if timed else None,
        "statistics": ["mean", "median", "p20", "p80", "std", "n"] if timed else [],
        "speedups": "speedup_vs_*: baseline mean / candidate mean; speedup_median_vs_*: ratio of medians",
        "timed_region": (SYNCHRONIZED_REGION if timer == SYNCHRONIZED_TIMER else TIMED_REGION) if timed else None,
        "process": process,
        "inputs": f"reused: get_inputs() under torch.manual_seed({seed}) on the device, the same tensors for every "
                  f"call (eager, torch.compile and the candidate alike)",
        "models": f"built under torch.manual_seed({init_seed}) inside torch.device, moved to it, eval(); "
                  f"called under torch.no_grad()",
        "seed": seed,
        "init_seed": init_seed,
        "precision": dict(precisions),
        "launch_counter": "off while timing",
        "device": str(device),
    }
