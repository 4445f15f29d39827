"""roofline: minimum work of a task and the roofline arithmetic."""
from pathlib import Path

import pytest
import torch

from egg_worker import ncu_target, roofline

DATA = Path(__file__).parent / "data"
PEAKS = {"dram_bytes_per_s": 4e12, "fp32_flops_per_s": 50e12, "tf32_flops_per_s": 400e12}


def test_memory_bound_arithmetic():
    result = roofline.roofline(flops=2e9, bytes_=1e9, time_ms=1.0, peaks=PEAKS)
    assert result["achieved_flops_per_s"] == pytest.approx(2e12)
    assert result["achieved_bytes_per_s"] == pytest.approx(1e12)
    assert result["arithmetic_intensity"] == pytest.approx(2.0)
    assert result["ridge_point"] == pytest.approx(12.5)
    assert result["bound"] == "memory"
    assert result["pct_of_roof"] == pytest.approx(25.0)
    assert result["peak_tf32_flops_per_s"] == 400e12


def test_compute_bound_arithmetic():
    result = roofline.roofline(flops=1e12, bytes_=1e9, time_ms=100.0, peaks=PEAKS)
    assert result["arithmetic_intensity"] == pytest.approx(1000.0)
    assert result["bound"] == "compute"
    assert result["achieved_flops_per_s"] == pytest.approx(1e13)
    assert result["pct_of_roof"] == pytest.approx(20.0)
    assert result["compute_roof"] == "fp32"


def test_rate_above_the_fp32_peak_is_measured_against_the_tf32_roof():
    # the H200 run of 1_Square_matrix_multiplication_: 2 * 4096^3 FLOP in 0.471 ms, above the fp32 peak
    result = roofline.roofline(flops=137438953472, bytes_=201326592, time_ms=0.471, peaks=PEAKS)
    assert result["compute_roof"] == "tf32"
    assert result["bound"] == "compute"
    assert result["ridge_point"] == pytest.approx(100.0)
    assert result["pct_of_roof"] == pytest.approx(100.0 * 137438953472 / 0.471e-3 / 400e12)
    assert result["pct_of_roof"] < 100.0


def test_zero_flops_is_memory_bound():
    result = roofline.roofline(flops=0, bytes_=8e9, time_ms=2.0, peaks=PEAKS)
    assert result["bound"] == "memory"
    assert result["pct_of_roof"] == pytest.approx(100.0)


def test_no_timing_and_no_peaks_leave_rates_null():
    result = roofline.roofline(flops=100, bytes_=50, time_ms=None, peaks=None)
    assert result["arithmetic_intensity"] == pytest.approx(2.0)
    for field in ("time_ms", "achieved_flops_per_s", "achieved_bytes_per_s", "ridge_point", "bound",
                  "pct_of_roof", "peak_dram_bytes_per_s"):
        assert result[field] is None, field


def test_zero_bytes_gives_no_intensity():
    result = roofline.roofline(flops=10, bytes_=0, time_ms=1.0, peaks=PEAKS)
    assert result["arithmetic_intensity"] is None and result["bound"] is None


def test_flop_counter_counts_two_mnk_for_the_matmul_task():
    built = ncu_target.build(str(DATA / "profile_matmul_task.py"), str(DATA / "profile_matmul_candidate.py"),
                             "cpu", seed=1, init_seed=2)
    outputs, flops = roofline.forward_with_flops(built.reference, built.inputs)
    assert outputs.shape == (32, 48)
    assert flops == 2 * 32 * 48 * 16
    assert roofline.minimum_bytes(built.inputs, outputs, built.reference) == 4 * (32 * 16 + 16 * 48 + 32 * 48)


def test_flop_counter_gives_zero_without_counted_ops():
    _, flops = roofline.forward_with_flops(torch.nn.ReLU(), [torch.randn(8)])
    assert flops == 0


def test_parameters_count_once_and_repeated_tensors_once():
    model = torch.nn.Linear(4, 3)  # 12 weights + 3 biases
    x = torch.randn(2, 4)
    assert roofline.tensor_bytes([x, x, (x,)]) == 2 * 4 * 4
    assert roofline.minimum_bytes([x], torch.zeros(2, 3), model) == 4 * (8 + 6 + 12 + 3)
