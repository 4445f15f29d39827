"""Parse Nsight Compute `--csv --page details` output into per-kernel records.

`parse_details(text) -> list[dict]`, one dict per profiled kernel launch, in ncu's ID order:

    id, name, block_size, grid_size            launch facts ([x, y, z] lists of ints)
    duration_ns                                 "Duration", whatever unit ncu chose
    dram_throughput_pct, memory_throughput_pct, l1_throughput_pct, l2_throughput_pct,
    compute_throughput_pct                      Speed Of Light percentages
    l1_hit_rate_pct, l2_hit_rate_pct            Memory Workload Analysis
    achieved_occupancy_pct, theoretical_occupancy_pct, registers_per_thread
    shared_mem_bytes                            static + dynamic shared memory per block
    spilled                                     true/false where a spilling metric was printed, else null
    warp_cycles_per_issued_instruction
    stalls                                      top 3 warp stall reasons [{reason, value}], largest first
                                                ("Stall Long Scoreboard" -> "long_scoreboard")
    dram_bytes_read, dram_bytes_write, dram_bytes, flops (fadd + fmul + 2 * ffma: fp32 pipe only, so
                                                tensor-core work is not counted)
    rules                                       ncu's rule findings [{section, name, type, description,
                                                speedup_type, speedup}]
    raw                                         {metric name: {value, unit, section}} for every metric
                                                not mapped above

Metrics ncu did not print are null. Everything before the CSV header (==PROF== lines, program output) is
skipped, as are later lines that begin with "==". Works with and without --print-details all (which adds
the "Body Item Label" column and the body charts, the stall breakdown among them).
"""

import csv
import math
import re
from collections import namedtuple

HEADER_FIRST_CELL = '"ID"'
Metric = namedtuple("Metric", "value unit section label")
REQUIRED_COLUMNS = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")

# (record field, metric name as ncu prints it); percentages count only with unit "%"
PERCENT_FIELDS = (
    ("dram_throughput_pct", "DRAM Throughput"),
    ("memory_throughput_pct", "Memory Throughput"),
    ("l1_throughput_pct", "L1/TEX Cache Throughput"),
    ("l2_throughput_pct", "L2 Cache Throughput"),
    ("compute_throughput_pct", "Compute (SM) Throughput"),
    ("l1_hit_rate_pct", "L1/TEX Hit Rate"),
    ("l2_hit_rate_pct", "L2 Hit Rate"),
    ("achieved_occupancy_pct", "Achieved Occupancy"),
    ("theoretical_occupancy_pct", "Theoretical Occupancy"),
)
PLAIN_FIELDS = (
    ("registers_per_thread", "Registers Per Thread"),
    ("warp_cycles_per_issued_instruction", "Warp Cycles Per Issued Instruction"),
)
BYTE_FIELDS = (
    ("dram_bytes_read", "dram__bytes_read.sum"),
    ("dram_bytes_write", "dram__bytes_write.sum"),
)
SHARED_MEMORY_METRICS = ("Static Shared Memory Per Block", "Dynamic Shared Memory Per Block")
FLOP_METRICS = {
    "fadd": "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "fmul": "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "ffma": "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
}
PERCENT_METRICS = frozenset(name for _, name in PERCENT_FIELDS)
OTHER_MAPPED_METRICS = frozenset(
    [name for _, name in PLAIN_FIELDS + BYTE_FIELDS]
    + list(SHARED_MEMORY_METRICS) + list(FLOP_METRICS.values()) + ["Duration"]
)

TOP_STALLS = 3
# Raw stall metric names, any rollup suffix: smsp__average_warp_latency_issue_stalled_<reason>,
# smsp__average_warps_issue_stalled_<reason>_per_issue_active, smsp__pcsamp_warps_issue_stalled_<reason>.
RAW_STALL = re.compile(
    r"^smsp__(?:average_warp_latency_issue_stalled|pcsamp_warps_issue_stalled|"
    r"average_warps_issue_stalled)_([a-z_]+?)(?:_per_issue_active|_per_warp_active)?(?:\.[a-z_]+)?$"
)
HUMAN_STALL = re.compile(r"^Stall ([A-Za-z0-9 /]+)$")
NOT_STALLS = frozenset(["selected"])

SECOND_SCALE_NS = {
    "ns": 1.0, "nsecond": 1.0, "nsec": 1.0,
    "us": 1e3, "usecond": 1e3, "usec": 1e3,
    "ms": 1e6, "msecond": 1e6, "msec": 1e6,
    "s": 1e9, "second": 1e9, "sec": 1e9,
}
SI_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
BINARY_PREFIX = {"Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}


def parse_number(text):
    """ncu's value text as float/int ('91,365' -> 91365), or None for n/a, inf, nan and the like (the
    result must stay valid JSON)."""
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    try:
        value = float(cleaned)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() and "." not in cleaned and "e" not in cleaned.lower() else value


def duration_to_ns(value, unit):
    scale = SECOND_SCALE_NS.get(unit.strip())
    return None if value is None or scale is None else value * scale


def bytes_scale(unit):
    """Factor to bytes for 'byte', 'Kbyte', 'MiB', 'Kbyte/block' ...; None when the unit is not bytes."""
    base = unit.strip().split("/")[0]
    match = re.fullmatch(r"([KMGT]i?)?(byte|B)", base)
    if not match:
        return None
    prefix = match.group(1) or ""
    return BINARY_PREFIX[prefix] if prefix.endswith("i") else SI_PREFIX[prefix]


def to_bytes(value, unit):
    scale = bytes_scale(unit)
    return None if value is None or scale is None else value * scale


def count_scale(unit):
    """Factor for counts that ncu may print with an SI prefix ('inst', 'Kinst', 'Minst')."""
    match = re.fullmatch(r"([KMGT]?)([a-z]+)", unit.strip())
    return SI_PREFIX[match.group(1)] if match else 1.0


def parse_dims(text):
    """'(128, 1, 1)' -> [128, 1, 1]; None when absent."""
    numbers = re.findall(r"\d+", text or "")
    return [int(n) for n in numbers] or None


def stall_reason(metric_name):
    """Normalised stall reason ('long_scoreboard') for a stall metric, else None."""
    raw = RAW_STALL.match(metric_name)
    if raw:
        reason = raw.group(1)
    else:
        human = HUMAN_STALL.match(metric_name)
        if not human:
            return None
        reason = re.sub(r"[ /]+", "_", human.group(1).strip().lower())
    if reason in NOT_STALLS or reason.endswith("_not_issued"):
        return None
    return reason


def find_header(lines):
    for index, line in enumerate(lines):
        if line.startswith(HEADER_FIRST_CELL):
            cells = next(csv.reader([line]))
            if all(column in cells for column in REQUIRED_COLUMNS):
                return index, cells
    return None, None


def read_rows(text):
    """Dict rows of the CSV, or [] when no header was found."""
    lines = text.splitlines()
    start, header = find_header(lines)
    if start is None:
        return []
    body = [line for line in lines[start + 1:] if line.strip() and not line.startswith("==")]
    return [
        dict(zip(header, cells)) for cells in csv.reader(body)
        if len(REQUIRED_COLUMNS) <= len(cells) <= len(header)
    ]


def group_by_kernel(rows):
    """{kernel id: [rows]}."""
    kernels = {}
    for row in rows:
        kernel_id = parse_number(row["ID"])
        if kernel_id is not None:
            kernels.setdefault(kernel_id, []).append(row)
    return kernels


def cell(row, column):
    return (row.get(column) or "").strip()


def metric_table(rows):
    """{metric name: [Metric, ...]} in row order (a name can repeat across sections and body items);
    rule rows, which carry no metric name, are left out."""
    table = {}
    for row in rows:
        name = cell(row, "Metric Name")
        if name:
            metric = Metric(row["Metric Value"], cell(row, "Metric Unit"), cell(row, "Section Name"),
                            cell(row, "Body Item Label"))
            table.setdefault(name, []).append(metric)
    return table


def rules(rows):
    """ncu's rule findings: [{section, name, type, description, speedup_type, speedup}]."""
    found = []
    for row in rows:
        if cell(row, "Metric Name") or not cell(row, "Rule Name"):
            continue
        found.append({
            "section": cell(row, "Section Name"),
            "name": cell(row, "Rule Name"),
            "type": cell(row, "Rule Type"),
            "description": cell(row, "Rule Description"),
            "speedup_type": cell(row, "Estimated Speedup Type"),
            "speedup": parse_number(cell(row, "Estimated Speedup")),
        })
    return found


def first_metric(table, name, unit=None):
    for metric in table.get(name, []):
        if unit is None or metric.unit == unit:
            return metric
    return None


def percent_field(table, name):
    metric = first_metric(table, name, unit="%")
    return None if metric is None else parse_number(metric.value)


def plain_field(table, name):
    metric = first_metric(table, name)
    return None if metric is None else parse_number(metric.value)


def byte_field(table, name):
    metric = first_metric(table, name)
    return None if metric is None else to_bytes(parse_number(metric.value), metric.unit)


def shared_mem_bytes(table):
    parts = [byte_field(table, name) for name in SHARED_MEMORY_METRICS]
    present = [part for part in parts if part is not None]
    return round(sum(present)) if present else None


def spilled(table):
    values = [parse_number(metric.value) for name, metrics in table.items() if "spill" in name.lower()
              for metric in metrics]
    values = [value for value in values if value is not None]
    return any(value > 0 for value in values) if values else None


def flops(table):
    counts = {}
    for key, name in FLOP_METRICS.items():
        metric = first_metric(table, name)
        value = None if metric is None else parse_number(metric.value)
        if value is None:
            return None
        counts[key] = value * count_scale(metric.unit)
    return round(counts["fadd"] + counts["fmul"] + 2 * counts["ffma"])


def top_stalls(table):
    """Top stall reasons. The chart labels of the details body ("Stall Long Scoreboard": warp cycles per
    issued instruction) win over raw smsp__ metric names when both appear."""
    human, raw = {}, {}
    for name, metrics in table.items():
        reason = stall_reason(name)
        value = parse_number(metrics[0].value)
        if reason is not None and value is not None:
            (raw if name.startswith("smsp__") else human).setdefault(reason, value)
    ranked = sorted((human or raw).items(), key=lambda item: item[1], reverse=True)[:TOP_STALLS]
    return [{"reason": reason, "value": value} for reason, value in ranked]


def is_mapped(name, unit):
    return name in OTHER_MAPPED_METRICS or (name in PERCENT_METRICS and unit == "%")


def raw_value(text):
    number = parse_number(text)
    return text.strip() if number is None else number


def raw_metrics(table):
    """Unmapped metrics by name; a repeated name is keyed "<body item label or section>: <name>"."""
    raw = {}
    for name, metrics in table.items():
        for metric in metrics:
            if is_mapped(name, metric.unit):
                continue
            key = name if name not in raw else f"{metric.label or metric.section}: {name}"
            raw.setdefault(key, {"value": raw_value(metric.value), "unit": metric.unit,
                                 "section": metric.section})
    return raw


def kernel_record(kernel_id, rows):
    first = rows[0]
    table = metric_table(rows)
    duration = first_metric(table, "Duration")
    read, write = (byte_field(table, name) for _, name in BYTE_FIELDS)
    record = {
        "id": kernel_id,
        "name": cell(first, "Kernel Name"),
        "block_size": parse_dims(cell(first, "Block Size")),
        "grid_size": parse_dims(cell(first, "Grid Size")),
        "duration_ns": None if duration is None else duration_to_ns(parse_number(duration.value), duration.unit),
    }
    record.update({field: percent_field(table, name) for field, name in PERCENT_FIELDS})
    record.update({field: plain_field(table, name) for field, name in PLAIN_FIELDS})
    record.update({
        "shared_mem_bytes": shared_mem_bytes(table),
        "spilled": spilled(table),
        "stalls": top_stalls(table),
        "dram_bytes_read": None if read is None else round(read),
        "dram_bytes_write": None if write is None else round(write),
        "dram_bytes": None if read is None or write is None else round(read + write),
        "flops": flops(table),
        "rules": rules(rows),
        "raw": raw_metrics(table),
    })
    return record


def parse_details(text):
    kernels = group_by_kernel(read_rows(text))
    return [kernel_record(kernel_id, rows) for kernel_id, rows in sorted(kernels.items())]
