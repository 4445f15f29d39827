"""ncu_csv: parsing Nsight Compute `--csv --page details` output into per-kernel records."""
from pathlib import Path

import pytest

from egg_worker import ncu_csv

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def handmade():
    return ncu_csv.parse_details((DATA / "ncu_details_handmade.csv").read_text())


@pytest.mark.parametrize("text, expected", [
    ("91,365", 91365), ("1,234.50", 1234.5), ("0", 0), ("12.5", 12.5), ("n/a", None), ("", None),
    ("inf", None), ("nan", None),
])
def test_parse_number_handles_thousands_separators_and_missing_values(text, expected):
    assert ncu_csv.parse_number(text) == expected


@pytest.mark.parametrize("value, unit, expected_ns", [
    (5, "ns", 5), (5, "nsecond", 5), (2.5, "us", 2500), (2.5, "usecond", 2500), (1.5, "msecond", 1.5e6),
    (1.5, "ms", 1.5e6), (2, "second", 2e9),
])
def test_duration_units_convert_to_ns(value, unit, expected_ns):
    assert ncu_csv.duration_to_ns(value, unit) == pytest.approx(expected_ns)


@pytest.mark.parametrize("value, unit, expected_bytes", [
    (512, "byte", 512), (2.05, "Kbyte/block", 2050), (1.5, "Mbyte", 1.5e6), (2, "KiB", 2048),
    (3, "Gbyte", 3e9),
])
def test_byte_units_convert_to_bytes(value, unit, expected_bytes):
    assert ncu_csv.to_bytes(value, unit) == pytest.approx(expected_bytes)


def test_non_byte_unit_gives_none():
    assert ncu_csv.to_bytes(5, "register/thread") is None


def test_prologue_lines_are_skipped_and_all_kernels_found(handmade):
    assert [k["id"] for k in handmade] == [0, 1, 2]
    assert [k["name"] for k in handmade] == [
        "fused_add_kernel",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char *, 1>>(int, T2, T3)",
        "matmul_kernel",
    ]


def test_full_kernel_record(handmade):
    kernel = handmade[0]
    assert kernel["block_size"] == [256, 1, 1]
    assert kernel["grid_size"] == [65536, 1, 1]
    assert kernel["duration_ns"] == pytest.approx(45600)
    assert kernel["dram_throughput_pct"] == pytest.approx(88.12)
    assert kernel["memory_throughput_pct"] == pytest.approx(88.12)
    assert kernel["l1_throughput_pct"] == pytest.approx(30.5)
    assert kernel["l2_throughput_pct"] == pytest.approx(75.25)
    assert kernel["compute_throughput_pct"] == pytest.approx(12.4)
    assert kernel["l2_hit_rate_pct"] == pytest.approx(50.1)
    assert kernel["achieved_occupancy_pct"] == pytest.approx(87.5)
    assert kernel["theoretical_occupancy_pct"] == 100
    assert kernel["registers_per_thread"] == 32
    assert kernel["warp_cycles_per_issued_instruction"] == pytest.approx(35.2)
    assert kernel["shared_mem_bytes"] == 1024 + 2050
    assert kernel["spilled"] is False
    assert kernel["dram_bytes_read"] == 134_220_000
    assert kernel["dram_bytes_write"] == 67_108_860
    assert kernel["dram_bytes"] == 134_220_000 + 67_108_860
    assert kernel["flops"] == 16_777_216 + 0 + 2 * 1_048_576


def test_human_readable_stalls_rank_top_three_without_selected(handmade):
    assert handmade[0]["stalls"] == [
        {"reason": "long_scoreboard", "value": pytest.approx(20.1)},
        {"reason": "not_selected", "value": pytest.approx(5.5)},
        {"reason": "lg_throttle", "value": pytest.approx(4.0)},
    ]


def test_raw_stall_metric_names_rank_without_selected(handmade):
    assert [s["reason"] for s in handmade[2]["stalls"]] == ["mio_throttle", "long_scoreboard", "wait"]
    assert handmade[2]["stalls"][0]["value"] == pytest.approx(30.1)


def test_unmapped_metrics_are_kept_raw_and_same_name_other_unit_does_not_clobber(handmade):
    raw = handmade[0]["raw"]
    assert raw["DRAM Frequency"] == {"value": 2.62, "unit": "Ghz", "section": "GPU Speed Of Light Throughput"}
    assert raw["Memory Throughput"]["unit"] == "Tbyte/s"
    assert raw["Block Limit Registers"]["value"] == 8
    assert "Duration" not in raw and "DRAM Throughput" not in raw


def test_rules_are_collected_and_not_mistaken_for_metrics(handmade):
    rules = handmade[0]["rules"]
    assert [r["name"] for r in rules] == ["SOLBottleneck", "IssueSlotUtilization"]
    assert rules[1]["type"] == "OPT" and rules[1]["speedup"] == pytest.approx(11.88)
    assert "" not in handmade[0]["raw"]


def test_missing_sections_give_nulls(handmade):
    kernel = handmade[1]
    assert kernel["duration_ns"] == pytest.approx(1.5e6)
    assert kernel["stalls"] == []
    assert kernel["flops"] is None
    assert kernel["dram_bytes"] is None
    assert kernel["achieved_occupancy_pct"] is None
    assert kernel["warp_cycles_per_issued_instruction"] is None
    assert kernel["shared_mem_bytes"] is None
    assert kernel["spilled"] is None
    assert kernel["l2_throughput_pct"] is None


def test_prefixed_counts_spilling_and_large_durations(handmade):
    kernel = handmade[2]
    assert kernel["duration_ns"] == 1_234_567
    assert kernel["flops"] == 2 * 268_435_456
    assert kernel["dram_bytes"] == 4_194_304 + 2_097_152
    assert kernel["spilled"] is True
    assert kernel["shared_mem_bytes"] == 49_150
    assert kernel["grid_size"] == [1024, 1, 1]


def test_text_without_a_header_gives_no_kernels():
    assert ncu_csv.parse_details("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n") == []


def test_real_h200_output_of_the_matmul_fixture():
    """Captured on the H200 with profile.ncu_command for profile_matmul_task / profile_matmul_candidate."""
    kernels = ncu_csv.parse_details((DATA / "ncu_details_h200_matmul.csv").read_text())
    by_name = {k["name"]: k for k in kernels}
    matmul = by_name["profile_matmul_kernel"]
    assert len(kernels) == 2
    assert matmul["flops"] == 2 * 32 * 48 * 16  # ieee tl.dot runs on the FMA pipe, so ncu counts it all
    assert matmul["duration_ns"] > 0
    assert matmul["registers_per_thread"] > 0
    assert matmul["shared_mem_bytes"] > 0
    assert matmul["dram_bytes"] > 0
    assert len(matmul["stalls"]) == 3
    assert matmul["stalls"][0]["value"] >= matmul["stalls"][2]["value"]
    assert matmul["spilled"] is False
    assert matmul["achieved_occupancy_pct"] is not None
    assert "Stall Long Scoreboard" in matmul["raw"]
    fill = next(k for k in kernels if k is not matmul)
    assert fill["name"].startswith("void at::")
