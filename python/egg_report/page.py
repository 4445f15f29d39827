"""Builds report.html from results.json: summary tables (KernelBench metrics per level and tolerance), the
charts of egg_report.charts, and a per-task table, rendered with a Jinja2 template into one self-contained file
(inline SVG and CSS, no scripts, nothing fetched)."""
import datetime
import json
import math
import os

import jinja2

from egg_report import charts

TEMPLATES = os.path.join(os.path.dirname(__file__), "templates")


class ReportError(Exception):
    """results.json is missing or not an egg bench document; str() is one line."""


def load_results(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as source:
            results = json.load(source)
    except OSError as error:
        raise ReportError(f"cannot read {path}: {error.strerror}") from None
    except json.JSONDecodeError as error:
        raise ReportError(f"{path} is not JSON: {error.msg} at line {error.lineno}") from None
    if not isinstance(results, dict) or not isinstance(results.get("tasks"), list):
        raise ReportError(f"{path} is not an egg bench results file (no task list)")
    for row in results["tasks"]:
        row.setdefault("level", 0)
        row.setdefault("task", os.path.basename(row.get("path", "?")))
    return results


def _fmt(value, digits=2, suffix=""):
    if isinstance(value, bool) or value is None:
        return "-" if value is None else ("yes" if value else "no")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return f"{value:.{digits}f}{suffix}"
    return str(value)


def _hottest(row: dict) -> str:
    """The row's longest kernel in its traced call and its share of the GPU time ("egg_k1_var 62%"), "-" without a
    trace (a CPU run, an older row)."""
    times = row.get("kernel_times") or []
    top = times[0] if times and isinstance(times[0], dict) else None
    if top is None or not isinstance(top.get("share"), (int, float)):
        return "-"
    return f"{top.get('name', '?')[:48]} {top['share'] * 100:.0f}%"


def _levels(summary: dict) -> list:
    levels = [("all tasks", summary.get("overall", {}))]
    for level, metrics in sorted(summary.get("levels", {}).items(), key=lambda item: int(item[0])):
        levels.append((f"level {level}" if level != "0" else "other", metrics))
    return levels


def render(results: dict) -> str:
    rows = results["tasks"]
    summary = results.get("summary", {})
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                     undefined=jinja2.StrictUndefined)
    environment.filters["fmt"] = _fmt
    environment.filters["hottest"] = _hottest
    template = environment.get_template("report.html.j2")
    timed = any(isinstance(row.get("speedup_vs_eager"), (int, float)) for row in rows)
    figures = {
        "distribution": charts.speedup_distribution(rows) if timed else "",
        "bars": charts.per_task_bars(rows) if timed else "",
        "stages": charts.stage_speedups(rows) if timed else "",
        "time": charts.time_per_task(rows) if rows else "",
    }
    return template.render(
        suite=results.get("suite", {}), rows=rows, levels=_levels(summary),
        tols=sorted(summary.get("overall", {}).get("tol", {}).keys(), key=float, reverse=True),
        thresholds=["0", "0.5", "0.8", "1", "1.5", "2"], figures=figures, timed=timed,
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))


def write_report(results_path: str, html_path: str) -> None:
    html = render(load_results(results_path))
    temporary = html_path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(html)
    os.replace(temporary, html_path)
