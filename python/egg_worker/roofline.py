"""Roofline arithmetic: the minimum work of a task, achieved rates, and which roof binds.

forward_with_flops(model, inputs)       (outputs, FLOPs torch's FlopCounterMode attributes to one forward:
                                         matmul, bmm, conv, attention...; 0 when none of its ops appear)
tensor_bytes(obj) -> int                bytes of the distinct tensors in a nested list/tuple/dict
minimum_bytes(inputs, outputs, model)   inputs + outputs + parameters and buffers, in bytes
roofline(flops, bytes_, time_ms, peaks) -> {flops, bytes, time_ms, achieved_flops_per_s,
    achieved_bytes_per_s, peak_dram_bytes_per_s, peak_fp32_flops_per_s, peak_tf32_flops_per_s,
    arithmetic_intensity (FLOP/byte), ridge_point (FLOP/byte), bound ("memory" | "compute"), pct_of_roof}

The ridge point, the bound and pct_of_roof use the plain fp32 peak (KernelBench tasks are fp32 and their
tolerance rules TF32 out for deep products), unless the achieved FLOP rate exceeds it: then the work ran on
tensor cores and the TF32 peak is the roof (`compute_roof` says which). Every field that needs a
missing input (no timing, no peaks, zero bytes) is None.
"""

import torch
from torch.utils.flop_counter import FlopCounterMode


def forward_with_flops(model, inputs):
    """(outputs, FLOPs) of one forward under no_grad."""
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        outputs = model(*inputs)
    return outputs, int(counter.get_total_flops())


def distinct_tensors(obj, seen):
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen:
            seen[id(obj)] = obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            distinct_tensors(item, seen)
    elif isinstance(obj, dict):
        for item in obj.values():
            distinct_tensors(item, seen)
    return seen


def tensor_bytes(obj):
    return sum(t.numel() * t.element_size() for t in distinct_tensors(obj, {}).values())


def minimum_bytes(inputs, outputs, model):
    state = list(model.parameters()) + list(model.buffers())
    return tensor_bytes([list(inputs), outputs, state])


def ratio(numerator, denominator):
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def roofline(flops, bytes_, time_ms, peaks):
    """Achieved rates of `flops` and `bytes_` done in `time_ms`, against `peaks`
    {dram_bytes_per_s, fp32_flops_per_s, tf32_flops_per_s} (any may be None)."""
    peaks = peaks or {}
    peak_dram = peaks.get("dram_bytes_per_s")
    peak_fp32 = peaks.get("fp32_flops_per_s")
    peak_tf32 = peaks.get("tf32_flops_per_s")
    time_s = None if time_ms is None else time_ms / 1e3
    achieved_flops = ratio(flops, time_s)
    achieved_bytes = ratio(bytes_, time_s)
    intensity = ratio(flops, bytes_)
    compute_roof, peak_compute = "fp32", peak_fp32
    if achieved_flops is not None and peak_fp32 and peak_tf32 and achieved_flops > peak_fp32:
        compute_roof, peak_compute = "tf32", peak_tf32
    ridge = ratio(peak_compute, peak_dram)
    bound = None
    if intensity is not None and ridge is not None:
        bound = "memory" if intensity < ridge else "compute"
    pct = None
    if bound == "memory" and achieved_bytes is not None:
        pct = 100.0 * achieved_bytes / peak_dram
    elif bound == "compute" and achieved_flops is not None:
        pct = 100.0 * achieved_flops / peak_compute
    return {
        "flops": flops,
        "bytes": bytes_,
        "time_ms": time_ms,
        "achieved_flops_per_s": achieved_flops,
        "achieved_bytes_per_s": achieved_bytes,
        "peak_dram_bytes_per_s": peak_dram,
        "peak_fp32_flops_per_s": peak_fp32,
        "peak_tf32_flops_per_s": peak_tf32,
        "compute_roof": compute_roof,
        "arithmetic_intensity": intensity,
        "ridge_point": ridge,
        "bound": bound,
        "pct_of_roof": pct,
    }
