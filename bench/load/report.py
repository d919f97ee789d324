"""The load run's report: a markdown table per point, the goals, and PNG plots."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from bench.load.results import (
    KEEP_UP_MIN,
    Goal,
    Outcome,
    PointSummary,
    goal_p99_vs_baseline,
    goal_sustained,
    goal_vs_vllm,
    sustained_by_config,
)

COLUMNS = (
    "config",
    "load",
    "ok / sent",
    "busy",
    "errors",
    "TTFT P50 / P95 / P99 (ms)",
    "TTFT model-answered P50 (ms)",
    "ITL per frame P50 / P95 / P99 (ms)",
    "TPOT P50 (ms)",
    "E2E P50 / P95 / P99 (ms)",
    "req/s",
    "model output tok/s",
    "keep-up",
    "FAQ hits",
    "prefix-cache hit",
)


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1000:.0f}"


def _num(value: float, digits: int = 2) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0%}"


def point_row(point: PointSummary) -> str:
    faq = f"{point.faq_hits}/{point.faq_requests}" if point.faq_requests else "-"
    if point.other_faq_answers:
        faq += f" (+{point.other_faq_answers} other)"
    cells = [
        point.config,
        f"{point.load:g}",
        f"{point.ok} / {point.requests}",
        str(point.busy),
        str(point.errors),
        " / ".join(_ms(v) for v in (point.ttft.p50, point.ttft.p95, point.ttft.p99)),
        _ms(point.ttft_model.p50),
        " / ".join(_ms(v) for v in (point.itl.p50, point.itl.p95, point.itl.p99)),
        _ms(point.tpot.p50),
        " / ".join(_ms(v) for v in (point.e2e.p50, point.e2e.p95, point.e2e.p99)),
        _num(point.request_throughput),
        _num(point.output_tokens_per_s, 1),
        _num(point.keep_up),
        faq,
        _pct(point.prefix_cache_hit_rate),
    ]
    return "| " + " | ".join(cells) + " |"


def points_table(points: Sequence[PointSummary]) -> str:
    header = "| " + " | ".join(COLUMNS) + " |"
    align = "|" + "|".join(["---", "---:"] + ["---:"] * (len(COLUMNS) - 2)) + "|"
    return "\n".join([header, align, *(point_row(p) for p in points)])


def goals(points: Sequence[PointSummary], *, ttft_target_s: float) -> list[Goal]:
    return [
        goal_vs_vllm(points),
        goal_p99_vs_baseline(points),
        goal_sustained(points, ttft_target_s=ttft_target_s),
    ]


def goals_markdown(points: Sequence[PointSummary], *, ttft_target_s: float) -> str:
    lines = ["| goal | verdict | per load |", "|---|---|---|"]
    for goal in goals(points, ttft_target_s=ttft_target_s):
        lines.append(f"| {goal.name} | **{goal.verdict}** | {goal.detail} |")
    sustained = sustained_by_config(points, ttft_target_s=ttft_target_s)
    lines.append("")
    lines.append(
        f"Sustained rate (highest swept rate with P95 TTFT <= {ttft_target_s:g} s and keep-up "
        f">= {KEEP_UP_MIN:.0%}): "
        + ", ".join(
            f"{config} {'none' if rate is None else f'{rate:g} req/s'}"
            for config, rate in sustained.items()
        )
    )
    return "\n".join(lines)


def plot(
    *,
    points: Sequence[PointSummary],
    outcomes: Mapping[str, Mapping[float, Sequence[Outcome]]],
    stem: Path,
    load_label: str,
    cdf_load: float,
    ttft_target_s: float,
) -> list[Path]:
    """`<stem>-ttft.png` (P50 and P99 TTFT vs load per config) and `<stem>-cdf.png` (the CDF
    of TTFT at `cdf_load`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    plain = FuncFormatter(lambda value, _pos: f"{value:g}")  # 0.5, 1, 2 rather than 10^0
    # minor ticks: label only 2x and 5x a power of ten, so the labels do not crowd
    sparse = FuncFormatter(lambda value, _pos: f"{value:g}" if f"{value:.0e}"[0] in "25" else "")

    def saved(fig: Figure, ax: Axes, *, title: str, name: str) -> Path:
        """Titled, gridded and with its legend, written to `<stem>-<name>.png` and closed."""
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = stem.with_name(f"{stem.name}-{name}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    configs = list(dict.fromkeys(p.config for p in points))
    for config in configs:
        mine = sorted((p for p in points if p.config == config), key=lambda p: p.load)
        loads = [p.load for p in mine]
        (line,) = ax.plot(loads, [p.ttft.p50 for p in mine], marker="o", label=f"{config} P50")
        ax.plot(
            loads,
            [p.ttft.p99 for p in mine],
            marker="^",
            linestyle="--",
            color=line.get_color(),
            label=f"{config} P99",
        )
    ax.axhline(ttft_target_s, color="grey", linewidth=0.8, linestyle=":", label="TTFT target")
    all_loads = sorted({p.load for p in points})
    ax.set_xscale("log", base=2)  # sweeps double the load from point to point
    ax.set_xticks(all_loads, [f"{load:g}" for load in all_loads])
    ax.set_xlabel(load_label)
    ax.set_ylabel("TTFT (s)")
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(sparse)
    paths.append(saved(fig, ax, title="TTFT vs load", name="ttft"))

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for config in configs:
        values = sorted(
            o.ttft_s
            for o in outcomes.get(config, {}).get(cdf_load, [])
            if o.status == "ok" and o.ttft_s is not None
        )
        if values:
            fractions = [(i + 1) / len(values) for i in range(len(values))]
            ax.step(values, fractions, where="post", label=config)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(sparse)
    ax.set_xlabel("TTFT (s)")
    ax.set_ylabel("fraction of requests")
    paths.append(saved(fig, ax, title=f"TTFT CDF at {load_label} = {cdf_load:g}", name="cdf"))
    return paths
