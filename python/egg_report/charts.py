"""The report's charts, each an SVG string made with matplotlib (Agg backend, no display)."""
import io
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

STAGES = ["stage1.seeds", "stage1.algorithm", "stage2.mapping", "stage2.tiling", "stage2.memory"]
LEVEL_COLORS = {0: "#7f7f7f", 1: "#1f77b4", 2: "#ff7f0e", 3: "#2ca02c", 4: "#9467bd"}
BASELINES = (("speedup_vs_eager", "PyTorch eager"), ("speedup_vs_compile", "torch.compile"))
WIDTH_IN = 9.0


def _svg(figure) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def _times_axis(axis, which: str) -> None:
    """Log scale with plain "1.5x" labels."""
    scale = axis.set_yscale if which == "y" else axis.set_xscale
    target = axis.yaxis if which == "y" else axis.xaxis
    scale("log")
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    target.set_minor_formatter(FuncFormatter(lambda value, _: ""))


def _label(row) -> str:
    return f"L{row['level']} {row['task']}" if row.get("level") else row["task"]


def _number(value):
    return value if isinstance(value, (int, float)) and math.isfinite(value) and value > 0 else None


def speedup_distribution(rows: list) -> str:
    """Per level, the speedups of correct tasks over eager and over torch.compile (log scale)."""
    levels = sorted({row["level"] for row in rows})
    figure, axes = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.2), sharey=True)
    for axis, (key, label) in zip(axes, BASELINES):
        data = [[_number(row.get(key)) for row in rows if row["level"] == level and row.get("correct")]
                for level in levels]
        data = [[v for v in values if v is not None] or [float("nan")] for values in data]
        axis.boxplot(data, showfliers=False)
        for index, values in enumerate(data, start=1):
            axis.scatter([index] * len(values), values, s=12, alpha=0.7,
                         color=LEVEL_COLORS.get(levels[index - 1], "#333333"))
        axis.axhline(1.0, color="#444444", linewidth=0.8, linestyle="--")
        _times_axis(axis, "y")
        axis.set_xticks(range(1, len(levels) + 1), [f"level {level}" if level else "tasks" for level in levels])
        axis.set_title(f"speedup over {label}")
    axes[0].set_ylabel("speedup (x, log scale)")
    return _svg(figure)


def per_task_bars(rows: list) -> str:
    """Speedup over torch.compile per task; failed tasks drawn as empty red bars at 1."""
    height = max(2.5, 0.18 * len(rows) + 1.0)
    figure, axis = plt.subplots(figsize=(WIDTH_IN, height))
    names = [_label(row) for row in rows]
    values = [(_number(row.get("speedup_vs_compile")) or 1.0) if row.get("correct") else 1.0 for row in rows]
    colors = [LEVEL_COLORS.get(row["level"], "#333333") if row.get("correct") else "none" for row in rows]
    edges = ["none" if row.get("correct") else "#d62728" for row in rows]
    positions = range(len(rows))
    axis.barh(positions, values, color=colors, edgecolor=edges, left=0)
    axis.axvline(1.0, color="#444444", linewidth=0.8, linestyle="--")
    _times_axis(axis, "x")
    axis.set_yticks(list(positions), names, fontsize=7)
    axis.invert_yaxis()
    axis.set_xlabel("speedup over torch.compile (x, log scale); red outline: not correct")
    return _svg(figure)


def stage_speedups(rows: list) -> str:
    """Cumulative speedup over eager after each stage: every task faint, the geometric mean bold."""
    figure, axis = plt.subplots(figsize=(WIDTH_IN, 3.2))
    series = []
    for row in rows:
        by_stage = {stage.get("stage"): _number(stage.get("speedup_vs_eager")) for stage in row.get("stages", [])}
        values = []
        last = None
        for stage in STAGES:
            last = by_stage.get(stage) or last
            values.append(last)
        if all(value is not None for value in values):
            series.append(values)
            axis.plot(range(len(STAGES)), values, color="#999999", alpha=0.35, linewidth=0.8)
    if series:
        means = [math.exp(sum(math.log(values[i]) for values in series) / len(series)) for i in range(len(STAGES))]
        axis.plot(range(len(STAGES)), means, color="#d62728", linewidth=2.5, marker="o",
                  label=f"geometric mean of {len(series)} tasks")
        axis.legend(loc="upper left")
    _times_axis(axis, "y")
    axis.set_xticks(range(len(STAGES)), STAGES, fontsize=8)
    axis.set_ylabel("speedup over eager (x)")
    return _svg(figure)


def time_per_task(rows: list) -> str:
    """Wall time of each task's search, and LLM cost where there was any."""
    figure, axis = plt.subplots(figsize=(WIDTH_IN, 2.8))
    names = [_label(row) for row in rows]
    axis.bar(range(len(rows)), [row.get("wall_s") or 0.0 for row in rows],
             color=[LEVEL_COLORS.get(row["level"], "#333333") for row in rows])
    axis.set_xticks(range(len(rows)), names, rotation=90, fontsize=6)
    axis.set_ylabel("search wall time (s)")
    costs = [((row.get("llm") or {}).get("cost_usd") or 0.0) for row in rows]
    if any(costs):
        twin = axis.twinx()
        twin.plot(range(len(rows)), costs, color="#d62728", marker=".", linewidth=0)
        twin.set_ylabel("LLM cost (USD)")
    return _svg(figure)
