"""The standard figures, from run and sweep directories only (never the engine); a run's tables
may be CSV or Parquet (output.format).

Each ``*_figure`` function returns a matplotlib Figure (or None when the directory lacks the
data); ``save`` writes it as PDF and PNG with reproducible bytes. ``figures_for`` picks every
figure a directory can make. One style for all: labelled axes with units, a legend where
there is more than one series, a colour-blind-safe cycle, no TeX needed.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator, NullLocator  # noqa: E402
import numpy as np  # noqa: E402
from cycler import cycler  # noqa: E402  (matplotlib's own dependency)

from ..core.cc.registry import ALGORITHMS  # noqa: E402
from ..errors import ScenarioError  # noqa: E402
from ..images import image_metadata  # noqa: E402
from .console import fmt_ns  # noqa: E402
from .destination import check_directory, make_directory  # noqa: E402
from .jobs import SLOWDOWN_COLUMNS  # noqa: E402
from .metrics import size_buckets  # noqa: E402
from .output import read_rows, read_table, write_csv  # noqa: E402
from .seeds import spread  # noqa: E402

STYLE: dict = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 9,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "text.usetex": False,
    "mathtext.fontset": "stix",
    # Okabe-Ito: distinguishable with the common colour-vision deficiencies
    "axes.prop_cycle": cycler(
        color=["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
    ),
}
POLICY_ORDER = [a.name for a in ALGORITHMS]
POLICY_LABEL = {a.name: a.label for a in ALGORITHMS}


def _num(value, default=np.nan) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _policies(rows) -> list[str]:
    seen = {r.get("cc_algorithm", "") for r in rows}
    return [p for p in POLICY_ORDER if p in seen] + sorted(seen - set(POLICY_ORDER))


def _time_metric(rows) -> tuple[str, str]:
    """(column, label): the iteration time when the sweep ran iterations, else the completion time."""
    if any(_num(r.get("mean_iteration_ns")) == _num(r.get("mean_iteration_ns")) for r in rows):
        return "mean_iteration_ns", "iteration time"
    return "last_finish_ns", "completion time"


def _legend_above(ax, ncols: int = 4, **kwargs) -> None:
    """A legend above the axes, outside them, so it never covers data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(
            handles,
            labels,
            loc="lower left",
            bbox_to_anchor=(0.0, 1.02),
            ncols=min(ncols, len(handles)),
            borderaxespad=0.0,
            **kwargs,
        )


def _legend_right(ax, **kwargs) -> None:
    """A legend right of the axes, outside them (for many series)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


# ---- sweep figures (results.csv) ------------------------------------------------------------
def _swept(rows) -> list[str]:
    """The swept columns: those between 'point' and the summary's first field ('scenario')."""
    columns = list(rows[0])
    end = columns.index("scenario") if "scenario" in columns else len(columns)
    return columns[1:end]


def _panel_keys(rows) -> list[str]:
    """Swept keys other than the policy, the topology and the seed: one panel per value of them
    (a workload, say)."""
    return [k for k in _swept(rows) if k != "network.cc.algorithm" and not k.startswith("topology") and k != "seed"]


def _panel_label(keys: list[str], values: tuple) -> str:
    """Swept values for a panel title: the names among them (a model's, say), else the values."""
    named = [v for k, v in zip(keys, values) if k.endswith(".name") and v != ""]
    text = ", ".join(named or [v for v in values if v != ""])
    return text if len(text) <= 40 else text[:37] + "..."


def _topology_varying(rows) -> tuple[Callable, dict[str, list[str]]]:
    """(the kind of a row's fabric, per kind the swept topology keys whose value differs between
    rows of that kind): a k=4 and a k=6 fat-tree are two groups, never pooled, while a lone 4x4
    torus is just "torus"."""
    keys = [k for k in _swept(rows) if k.startswith("topology") and k != "topology.kind"]

    def kind(r):
        return r.get("topology.kind") or r.get("topology", "")

    varying = {}
    for name in {kind(r) for r in rows}:
        same = [r for r in rows if kind(r) == name]
        varying[name] = [k for k in keys if len({r.get(k, "") for r in same}) > 1]
    return kind, varying


def _topology_labels(rows) -> dict:
    """Each row's fabric for an axis tick, short enough to stay legible: the value of every
    swept topology key that varies, by the key's last part, one per line (``rate_gbps=100``;
    the axis label names the whole key once: _topology_axis), under the fabric's kind when
    the sweep has more than one kind (or nothing varies)."""
    kind, varying = _topology_varying(rows)
    labels = {}
    for r in rows:
        values = [f"{k.rsplit('.', 1)[-1]}={r[k]}" for k in varying[kind(r)] if r.get(k, "") != ""]
        lines = ([kind(r)] if len(varying) > 1 or not values else []) + values
        labels[r["point"]] = "\n".join(lines)
    return labels


def _topology_keys(rows) -> list[str]:
    """The swept topology keys _topology_labels' ticks show by their last part, in full: for
    the axis label, once."""
    return sorted({k for keys in _topology_varying(rows)[1].values() for k in keys})


def _topology_axis(rows) -> str:
    """The x label under _topology_labels' ticks: the fabric's kind when there is one (the
    ticks then leave it out) and the swept topology keys in full."""
    kinds = list(_topology_varying(rows)[1])
    keys = ", ".join(_topology_keys(rows))
    if not keys:
        return "topology (fabric)"
    return f"{kinds[0] if len(kinds) == 1 else 'fabric'} (swept {keys})"


@dataclass
class PolicyTimes:
    """A sweep's time per policy as a ratio to PFC only (the same other swept values and seed):
    one record per panel, topology and policy with the mean over seeds, the sample s.d. and the half
    width of the 95 % interval of the mean (results/seeds.py)."""

    records: list[dict]  #: {"panel", "topology", "policy", "ratio", "sd", "half"}
    metric: str  #: "iteration time" or "completion time"
    baselines: dict[tuple, float]  #: (panel, topology) -> PFC only's time in ns, mean over seeds
    panel_keys: list[str]  #: the swept keys a panel stands for (workload-like ones)
    panels: list[tuple]
    topologies: list[str]
    policies: list[str]  #: congestion-control policies other than the baseline, in registry order
    seeds: int  #: the most seeds of any (panel, topology, policy)
    topology_axis: str  #: the x label: the fabric and the swept topology keys (_topology_axis)


def policy_time_table(sweep_dir: Path) -> PolicyTimes | None:
    """The data of the policy_time figure from results.csv (None without finished points or a
    cc_algorithm column)."""
    rows = [r for r in read_table(sweep_dir / "results.csv") if r.get("status") == "finished"]
    if not rows or "cc_algorithm" not in rows[0]:
        return None
    column, metric = _time_metric(rows)
    swept = _swept(rows)
    others = _panel_keys(rows)

    def same_but_policy(r) -> tuple:
        return tuple(r[k] for k in swept if k != "network.cc.algorithm")

    baseline = {same_but_policy(r): _num(r[column]) for r in rows if r["cc_algorithm"] == "none"}
    fabric = _topology_labels(rows)
    groups: dict[tuple, list[float]] = {}  # (panel, topology, policy) -> the ratio of each seed
    base_times: dict[tuple, list[float]] = {}  # (panel, topology) -> PFC only's time of each seed
    for r in rows:
        if r["cc_algorithm"] == "none":
            base_times.setdefault((tuple(r[k] for k in others), fabric[r["point"]]), []).append(_num(r[column]))
        base = baseline.get(same_but_policy(r))
        ratio = _num(r[column]) / base if base else np.nan
        groups.setdefault((tuple(r[k] for k in others), fabric[r["point"]], r["cc_algorithm"]), []).append(ratio)
    policies = [p for p in _policies(rows) if p != "none"] or _policies(rows)
    records = []
    for (panel, topology, policy), ratios in sorted(groups.items()):
        if policy in policies:
            st = spread(ratios)
            records.append(
                {"panel": panel, "topology": topology, "policy": policy, "ratio": st.mean, "sd": st.sd, "half": st.bar}
            )
    return PolicyTimes(
        records,
        metric,
        {key: spread(times).mean for key, times in base_times.items()},
        others,
        sorted({g[0] for g in groups}),
        list(dict.fromkeys(fabric[r["point"]] for r in rows)),  # the grid's order: 100 before 1000
        policies,
        max(len(v) for k, v in groups.items() if k[2] in policies),
        _topology_axis(rows),
    )


def policy_time_figure(sweep_dir: Path):
    """Time per congestion-control policy per topology as a ratio to PFC only (the line at 1),
    drawn as dots with their value (bars would start at an arbitrary baseline on an axis that
    does not start at 0, and a ratio of 1.00 would vanish), with error bars (the 95 % interval
    of the mean over seeds, Student t) where a sweep repeats points. One panel per workload-like swept value."""
    table = policy_time_table(sweep_dir)
    return None if table is None else draw_policy_time(table)


def draw_policy_time(table: PolicyTimes):
    """The policy_time figure of a PolicyTimes table; the value labels sit inside the axes, level
    when a panel has few dots, else upright; under each topology, PFC only's own time."""
    panels, topologies, policies = table.panels, table.topologies, table.policies
    colors = STYLE["axes.prop_cycle"].by_key()["color"]
    level = len(policies) * len(topologies) <= 8  # room for a level "1.14" beside each dot
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(max(6.4, 3.8 * len(panels)), 3.8), squeeze=False, sharey=True)
        step = 0.8 / len(policies)
        extremes = [1.0]
        labels_below = False
        for ax, panel in zip(axes[0], panels):
            ax.axhline(1.0, color="0.2", lw=0.9)
            for i, policy in enumerate(policies):
                mine = {r["topology"]: r for r in table.records if r["panel"] == panel and r["policy"] == policy}
                x = np.arange(len(topologies)) + (i - (len(policies) - 1) / 2) * step
                mean = np.array([mine[t]["ratio"] if t in mine else np.nan for t in topologies])
                err = np.array([mine[t]["half"] if t in mine else 0.0 for t in topologies])
                ax.errorbar(
                    x,
                    mean,
                    yerr=err if table.seeds > 1 else None,
                    fmt="o",
                    markersize=5,
                    color=colors[(POLICY_ORDER.index(policy) if policy in POLICY_ORDER else i) % len(colors)],
                    label=POLICY_LABEL.get(policy, policy),
                    capsize=2,
                    elinewidth=0.8,
                )
                for xi, m, e in zip(x, mean, err):
                    if m == m:
                        extremes += [m - e, m + e]
                        below = m < 1.0  # the label on the far side of the dot from the line at 1
                        labels_below |= below
                        ax.annotate(
                            f"{m:.2f}",
                            (xi, m - e if below else m + e),
                            xytext=(0, -4 if below else 4),
                            textcoords="offset points",
                            ha="center",
                            va="top" if below else "bottom",
                            fontsize=8 if level else 6,
                            rotation=0 if level else 90,
                        )
            ticks = [
                f"{t}\nPFC only: {fmt_ns(table.baselines[panel, t])}" if (panel, t) in table.baselines else t
                for t in topologies
            ]
            ax.set_xticks(np.arange(len(topologies)), ticks, fontsize=8)
            if max(len(line) for t in ticks for line in t.split("\n")) * len(topologies) > 48:
                plt.setp(ax.get_xticklabels(), rotation=30, ha="right", rotation_mode="anchor")
            ax.set_xlim(-0.6, len(topologies) - 0.4)
            ax.set_xlabel(table.topology_axis)
            if panel:
                ax.set_title(_panel_label(table.panel_keys, panel), fontsize=9)
        span = max(max(extremes) - min(extremes), 0.02)
        # room beyond the outermost dots for their labels (rotated text about a fifth of the axes tall)
        room = 0.15 if level else 0.45
        axes[0][0].set_ylim(min(extremes) - (room if labels_below else 0.15) * span, max(extremes) + room * span)
        note = f"; mean, 95 % interval over {table.seeds} seeds" if table.seeds > 1 else ""
        axes[0][0].set_ylabel(f"{table.metric}\n(ratio to PFC only = 1{note})")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, ncols=min(len(policies), 5), loc="lower center", bbox_to_anchor=(0.5, 1.0))
        fig.tight_layout()
    return fig


def breakdown_figure(sweep_dir: Path):
    """Stacked bars per point: compute, exposed communication and idle time per iteration (mean
    over seeds, with the 95 % interval of the mean iteration time as an error bar where a sweep
    repeats points), one panel per workload-like swept value."""
    rows = [
        r
        for r in read_table(sweep_dir / "results.csv")
        if r.get("status") == "finished" and r.get("mean_compute_ns", "") != ""
    ]
    if not rows:
        return None
    others = _panel_keys(rows)
    rank = {p: i for i, p in enumerate(POLICY_ORDER)}
    fabric = _topology_labels(rows)
    groups: dict[tuple, list] = {}  # (panel, fabric, policy) -> the rows of its seeds
    for r in rows:
        groups.setdefault((tuple(r[k] for k in others), fabric[r["point"]], r.get("cc_algorithm", "")), []).append(r)
    keys = sorted(groups, key=lambda g: (g[0], g[1], rank.get(g[2], 99)))
    panels = sorted({g[0] for g in keys})
    parts = [
        ("mean_compute_ns", "compute"),
        ("mean_exposed_communication_ns", "exposed communication"),
        ("mean_idle_ns", "idle (waiting for other ranks)"),
    ]
    seeds = max(len(v) for v in groups.values())
    with plt.rc_context(STYLE):
        width = max(len([g for g in keys if g[0] == p]) for p in panels)
        fig, axes = plt.subplots(
            1, len(panels), figsize=(max(6.4, (0.3 * width + 1.2) * len(panels)), 3.8), squeeze=False
        )
        for ax, panel in zip(axes[0], panels):
            mine = [g for g in keys if g[0] == panel]
            bottom = np.zeros(len(mine))
            for column, name in parts:
                values = np.array([spread([_num(r[column], 0.0) for r in groups[g]]).mean for g in mine]) / 1e6
                ax.bar(np.arange(len(mine)), values, 0.7, bottom=bottom, label=name)
                bottom += values
            if seeds > 1:
                err = np.array([spread([_num(r.get("mean_iteration_ns")) for r in groups[g]]).bar for g in mine]) / 1e6
                ax.errorbar(
                    np.arange(len(mine)),
                    bottom,
                    yerr=err,
                    fmt="none",
                    ecolor="0.2",
                    capsize=2,
                    lw=0.8,
                    label=f"iteration time, 95 % interval ({seeds} seeds)",
                )
            labels = [f"{g[1]} {POLICY_LABEL.get(g[2], g[2])}".replace("\n", ", ") for g in mine]
            ax.set_xticks(np.arange(len(mine)), labels, fontsize=7, rotation=90)
            ax.set_xlabel(f"point ({', '.join(_topology_keys(rows) or ['topology'])}, congestion control)")
            ax.set_ylabel("time per iteration (ms)")
            if panel:
                ax.set_title(_panel_label(others, panel), fontsize=9)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, ncols=len(handles), loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
        fig.tight_layout()
    return fig


def _count_scale(ax, counts) -> str:
    """A count axis from 0: linear, or symmetric-log (linear below 1, so 0 stays 0) when the
    smallest non-zero count would be a bar under a twentieth of the largest, so that thousands
    stay visible next to hundreds of thousands; ticks at powers of ten, written 1k, 10k, 1M. Returns the scale's
    note for the axis label ("" or ", log scale")."""
    positive = [c for c in counts if c > 0]
    top = max(1.0, max(counts, default=0.0))
    if len(positive) < 2 or max(positive) < 20 * min(positive):
        ax.set_ylim(0, top * 1.15)  # room for the bar labels; from 0 also when all are 0
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        return ""
    ax.set_yscale("symlog", linthresh=1.0, linscale=1.0)
    ax.set_ylim(0, top * 4)  # a bar label is about half a decade tall
    decades = 10.0 ** np.arange(0, int(np.log10(top)) + 1)
    ax.yaxis.set_major_locator(FixedLocator([0.0, *decades]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _short_count(v)))
    return ", log scale"


def _short_count(value: float) -> str:
    """A count for an axis tick, short: 950, 10k, 1.5M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def pauses_marks_figure(sweep_dir: Path):
    """PFC pauses and ECN marks per policy (summed over the sweep's points of that policy), on
    count axes from 0 (symmetric-log where the counts span orders of magnitude, _count_scale),
    each bar labelled with its count; the policy names level, one per bar."""
    rows = [r for r in read_table(sweep_dir / "results.csv") if r.get("status") in ("finished", "incomplete")]
    if not rows or "cc_algorithm" not in rows[0]:
        return None
    policies = _policies(rows)
    colors = [STYLE["axes.prop_cycle"].by_key()["color"][i % 8] for i in range(len(policies))]
    names = [POLICY_LABEL.get(p, p).replace(" ", "\n") for p in policies]  # "PFC\nonly": no run-ins
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(max(7.2, 1.5 * len(policies)), 3.2))
        for ax, (column, name) in zip(axes, [("pfc_pauses_sent", "PFC pauses sent"), ("ecn_marks", "ECN marks")]):
            totals = [sum(_num(r.get(column), 0.0) for r in rows if r["cc_algorithm"] == p) for p in policies]
            bars = ax.bar(np.arange(len(policies)), totals, color=colors)
            ax.bar_label(bars, fmt="{:,.0f}", fontsize=7, padding=2)  # a count of 0 shows as "0"
            note = _count_scale(ax, totals)
            ax.set_xticks(np.arange(len(policies)), names, fontsize=8)
            ax.set_xlabel("congestion control (policy)")
            ax.set_ylabel(f"{name}\n(count, all points{note})")
        fig.tight_layout()
    return fig


# ---- run figures ---------------------------------------------------------------------------------
def fct_figure(run_dir: Path):
    """FCT slowdown CDF per flow-size class (below the median size, to the 90th percentile,
    above), and the median, 95th and 99th percentile slowdown per size decile
    (the fct_by_size table), the way background-traffic studies report it."""
    rows = [r for r in read_rows(run_dir, "flows") or [] if r["slowdown"] != ""]
    if not rows:
        return None
    size = np.array([_num(r["bytes"]) for r in rows])
    slowdown = np.array([_num(r["slowdown"]) for r in rows])
    deciles = read_rows(run_dir, "fct_by_size") or []
    with plt.rc_context(STYLE):
        fig, (cdf, pct) = plt.subplots(1, 2, figsize=(7.6, 3.2))
        for lo, hi, pick in size_buckets(size, (0, 0.5, 0.9, 1.0)):
            values = np.sort(slowdown[pick])
            name = f"{lo:,.0f}-{hi:,.0f} B" if lo != hi else f"{lo:,.0f} B"
            cdf.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=name)
        cdf.set_xlabel("FCT slowdown (FCT / ideal FCT, ratio)")
        cdf.set_ylabel("fraction of flows (CDF)")
        _legend_above(cdf, ncols=2, title="flow size", fontsize=7)
        if deciles:
            top = np.array([_num(r["max_bytes"]) for r in deciles])
            for column, label in (
                ("slowdown_p50", "median"),
                ("slowdown_p95", "95th percentile"),
                ("slowdown_p99", "99th percentile"),
            ):
                pct.plot(top, [_num(r[column]) for r in deciles], marker="o", markersize=3, label=label)
            pct.set_xscale("log")
            pct.set_xlabel("flow size, top of each decile (bytes, log)")
            pct.set_ylabel("FCT slowdown (ratio)")
            _legend_above(pct, ncols=3, fontsize=7)
        else:
            pct.set_axis_off()
        fig.tight_layout()
    return fig


def queue_figure(run_dir: Path, top: int = 6):
    """Egress queue over time of the busiest switch ports (the traces_queue table)."""
    rows = read_rows(run_dir, "traces_queue")
    if rows is None:
        return None
    series: dict[str, list] = {}
    for r in rows:
        series.setdefault(f"{r['switch']} -> {r['towards']}", []).append((_num(r["t_ns"]), _num(r["queue_bytes"])))
    if not series:
        return None
    busiest = sorted(series, key=lambda k: -np.mean([q for _, q in series[k]]))[:top]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for name in busiest:
            t, q = np.array(series[name]).T
            ax.plot(t / 1e3, q / 1e3, lw=1, label=name)
        ax.set_xlabel("time (us)")
        ax.set_ylabel("egress queue (KB)")
        _legend_right(ax, title="switch port", fontsize=7)
    return fig


def rate_figure(run_dir: Path, top: int = 8):
    """Pacing rate over time (the traces_rate table) of the ``top`` flows pacing held back most:
    by the bytes each would have sent more at the highest rate traced (its rate's shortfall
    from that rate, integrated over time), so a training run shows its congested flows, not
    the first ids (short ones at line rate). Where no flow was held back, the longest traced.
    The title says which flows are shown, the legend how much each was held back."""
    rows = read_rows(run_dir, "traces_rate")
    if rows is None:
        return None
    series: dict[int, list] = {}
    for r in rows:
        series.setdefault(int(r["flow_id"]), []).append((_num(r["t_ns"]), _num(r["rate_bps"])))
    if not series:
        return None
    arrays = {flow: np.array(sorted(points)).T for flow, points in series.items()}
    peak = max(float(rate.max()) for _, rate in arrays.values())
    # each sample holds until the flow's next one: bits not sent = sum of (peak - rate) * dt
    held = {f: float(np.sum((peak - rate[:-1]) * np.diff(t))) / 8e9 for f, (t, rate) in arrays.items()}  # bytes
    span = {f: float(t[-1] - t[0]) for f, (t, _) in arrays.items()}
    shown = sorted(arrays, key=lambda f: (-held[f], -span[f], f))[:top]
    slowed = held[shown[0]] > 0
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for flow in shown:
            t, rate = arrays[flow]
            note = f": {held[flow] / 1e6:.3g} MB held back" if slowed else ""
            ax.step(t / 1e3, rate / 1e9, where="post", lw=1, label=f"flow {flow}{note}")
        line = f"{peak / 1e9:g} Gb/s"
        if slowed:
            title = f"the {len(shown)} of {len(arrays):,} flows held back most by pacing (bytes short of {line})"
        else:
            title = f"the {len(shown)} longest of {len(arrays):,} flows (none paced below {line})"
        ax.set_title(title, fontsize=8)
        ax.set_ylim(0, peak / 1e9 * 1.05)  # a rate from 0: a cut shows as deep as it is
        ax.set_xlabel("time (us)")
        ax.set_ylabel("pacing rate (Gb/s)")
        _legend_right(ax, fontsize=7)
    return fig


STATE_STYLE = {
    "compute": ("compute", "#0072B2"),
    "exposed_communication": ("exposed communication", "#E69F00"),
    "idle": ("idle (waiting for other ranks)", "#D9D9D9"),
}


def timeline_figure(run_dir: Path, max_ranks: int = 64):
    """Per rank, what it does through the run: compute, exposed communication, idle (the
    timeline table); dashed lines mark iteration ends. Beyond max_ranks, evenly spaced ranks."""
    rows = read_rows(run_dir, "timeline")
    if not rows:
        return None
    hosts = sorted({int(r["host"]) for r in rows})
    if len(hosts) > max_ranks:
        hosts = [hosts[i] for i in np.linspace(0, len(hosts) - 1, max_ranks).round().astype(int)]
    lane = {h: i for i, h in enumerate(hosts)}
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(7.2, max(2.4, 0.9 + 0.16 * len(hosts))))
        for state, (name, color) in STATE_STYLE.items():
            bars: dict[int, list] = {}
            for r in rows:
                if r["state"] == state and int(r["host"]) in lane:
                    span = (_num(r["start_ns"]) / 1e6, _num(r["duration_ns"]) / 1e6)
                    bars.setdefault(int(r["host"]), []).append(span)
            for h, spans in bars.items():
                ax.broken_barh(spans, (lane[h] - 0.4, 0.8), facecolors=color, lw=0)
            ax.bar(0, 0, color=color, label=name)  # legend entry only
        by_iteration: dict[tuple, float] = {}  # (job, iteration) -> its end; a run with jobs has a job column
        for r in rows:
            key = (r.get("job", ""), r["iteration"])
            by_iteration[key] = max(by_iteration.get(key, 0.0), _num(r["end_ns"]))
        for end in sorted(by_iteration.values()):
            ax.axvline(end / 1e6, color="0.2", lw=0.8, ls="--")
        job = {int(r["host"]): r["job"] for r in rows if r.get("job")}  # with jobs, the job on each host
        labels = [f"{h} ({job[h]})" if h in job else str(h) for h in hosts]
        ax.set_yticks(range(len(hosts)), labels, fontsize=6 if len(hosts) > 16 else 8)
        ax.set_ylim(-0.6, len(hosts) - 0.4)
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("time (ms); dashed: end of each iteration")
        ax.set_ylabel("rank (host)" if not job else "host (job)")
        _legend_above(ax, ncols=3, fontsize=8)
    return fig


def collectives_figure(run_dir: Path, max_labels: int = 40):
    """Per collective, one lane in launch order: left, when it ran in each iteration (start to
    finish), coloured by kind; right, its bus bandwidth (mean over iterations, error bars: the
    range over iterations)."""
    rows = [r for r in read_rows(run_dir, "collectives") or [] if r["time_ns"] != ""]
    if not rows:
        return None
    first: dict[tuple, float] = {}
    for r in rows:
        key = (r["name"], r["group"])
        first[key] = min(first.get(key, np.inf), _num(r["start_ns"]))
    keys = sorted(first, key=lambda k: first[k])
    lane = {k: i for i, k in enumerate(keys)}
    kinds = sorted({r["kind"] for r in rows})
    colors = STYLE["axes.prop_cycle"].by_key()["color"]
    iterations = len({r["iteration"] for r in rows})
    with plt.rc_context(STYLE):
        fig, (left, right) = plt.subplots(
            1,
            2,
            figsize=(7.6, min(9.0, max(2.6, 1.2 + 0.1 * len(keys)))),
            sharey=True,
            gridspec_kw={"width_ratios": [2.2, 1]},
        )
        for i, kind in enumerate(kinds):
            spans: dict[int, list] = {}
            for r in rows:
                if r["kind"] == kind:
                    spans.setdefault(lane[(r["name"], r["group"])], []).append(
                        (_num(r["start_ns"]) / 1e6, _num(r["time_ns"]) / 1e6)
                    )
            for y, bars in spans.items():
                left.broken_barh(bars, (y - 0.4, 0.8), facecolors=colors[i % len(colors)], lw=0)
            left.bar(0, 0, color=colors[i % len(colors)], label=kind.replace("_", "-"))  # legend entry
        per_key = [np.array([_num(r["busbw_gbps"]) for r in rows if (r["name"], r["group"]) == key]) for key in keys]
        bw = np.array([(v.mean(), v.mean() - v.min(), v.max() - v.mean()) for v in per_key])
        right.barh(
            np.arange(len(keys)),
            bw[:, 0],
            0.7,
            color="0.45",
            xerr=bw[:, 1:].T if iterations > 1 else None,
            capsize=1.5,
            error_kw={"lw": 0.6},
        )
        left.set_xlabel("time (ms)")
        right.set_xlabel(
            "bus bandwidth (Gb/s)" + (f", mean of {iterations} iterations" if iterations > 1 else ""), fontsize=8
        )
        several_groups = len({g for _, g in keys}) > 1
        names = [f"{n} (group {g})" if several_groups else n for n, g in keys]
        step = max(1, int(np.ceil(len(keys) / max_labels)))
        left.set_yticks(np.arange(0, len(keys), step), names[::step], fontsize=6 if len(keys) > 16 else 8)
        left.set_ylim(-0.6, len(keys) - 0.4)
        left.invert_yaxis()
        for ax in (left, right):
            ax.grid(axis="y", visible=False)
        left.set_ylabel(f"collective, in launch order ({len(keys)})")
        if len(kinds) > 1:
            _legend_above(left, ncols=len(kinds), fontsize=8, title="collective kind", title_fontsize=8)
        else:
            left.set_title(f"{kinds[0].replace('_', '-')}s", fontsize=9)
        fig.tight_layout()
    return fig


def links_figure(run_dir: Path, top: int = 30):
    """The busiest directions of links (links.csv): utilization (busy time over the run) of the
    ``top`` highest, one bar each, split by priority; the x label says how many are shown."""
    rows = read_rows(run_dir, "links")
    if not rows:
        return None
    per: dict[tuple, dict[int, float]] = {}  # (link, from, to, tier) -> {priority: utilization}
    for r in rows:
        key = (int(r["link"]), str(r["node_from"]), str(r["node_to"]), str(r["tier"]))
        per.setdefault(key, {})[int(r["priority"])] = _num(r["utilization"], 0.0)
    ranked = sorted(per, key=lambda k: (-sum(per[k].values()), k[0], k[1]))
    shown = [k for k in ranked[:top] if sum(per[k].values()) > 0]
    if not shown:
        return None
    prios = sorted({p for k in shown for p, u in per[k].items() if u > 0})
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(6.4, max(1.8, 0.8 + 0.18 * len(shown))))
        left = np.zeros(len(shown))
        for prio in prios:
            width = np.array([per[k].get(prio, 0.0) for k in shown])
            ax.barh(np.arange(len(shown)), width, 0.7, left=left, label=f"priority {prio}")
            left += width
        ax.set_yticks(range(len(shown)), [f"{k[1]} \u2192 {k[2]} ({k[3]})" for k in shown], fontsize=7)
        ax.invert_yaxis()
        ax.grid(axis="y", visible=False)
        ax.set_xlim(0, max(1.0, float(left.max()) * 1.02))
        ax.set_xlabel(
            "utilization (busy time at the link rate / run duration)\n"
            f"the busiest {len(shown)} of {len(per)} directions"
        )
        ax.set_ylabel("link direction (tier)")
        if len(prios) > 1:
            _legend_above(ax, ncols=len(prios), fontsize=8)
    return fig


def compare_figure(labels: list[str], summaries: list[dict]):
    """One bar per run: its mean iteration time (dots: each iteration) when the runs have
    iterations, else its last flow's finish time."""
    times = [s.get("iteration_ns") if isinstance(s.get("iteration_ns"), list) else None for s in summaries]
    iterations = any(times)
    values_ns = [v for t in times if t for v in t] if iterations else [s.get("last_finish_ns") or 0 for s in summaries]
    unit, scale = ("ms", 1e6) if max(values_ns, default=0) >= 1e6 else ("us", 1e3)
    dots: str | None = "each iteration"  # the legend's entry, on the first run with dots
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(3.2, 1.0 + 0.7 * len(labels)), 3.2))
        for i, (s, t) in enumerate(zip(summaries, times)):
            values = [v / scale for v in t] if iterations and t else []
            if not iterations and s.get("last_finish_ns") is not None:
                values = [s["last_finish_ns"] / scale]
            if values:
                ax.bar(i, float(np.mean(values)), 0.6, color="#0072B2")
            if len(values) > 1:
                ax.plot([i] * len(values), values, "o", ms=3, color="#E69F00", label=dots)
                dots = None
        tilt = len(labels) > 3 or max(map(len, labels)) > 12
        ax.set_xticks(range(len(labels)), labels, rotation=30 if tilt else 0, ha="right" if tilt else "center")
        ax.grid(axis="x", visible=False)
        ax.set_xlabel("run (directory)")
        ax.set_ylabel(f"mean iteration time ({unit})" if iterations else f"last flow's finish ({unit})")
        _legend_above(ax, fontsize=8)
    return fig


Maker = Callable[[Path], Any]  # a directory -> its Figure, or None when it has nothing to show


def jobs_slowdown_figure(rows: list[tuple]):
    """Each job's slowdown against running alone (results/jobs.py slowdown_rows): its time from
    start to last finish and its mean iteration time, as ratios to alone (the line at 1), drawn
    as dots with their value; under each job, its time alone."""
    names = [r[0] for r in rows]
    x = np.arange(len(names))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(max(3.6, 1.1 * len(names) + 1.6), 3.4))
        ax.axhline(1.0, color="0.2", lw=0.9)
        top = 1.0
        for offset, column, label in ((-0.12, 3, "job time (start to last finish)"), (0.12, 6, "mean iteration")):
            ratio = np.array([_num(r[column]) for r in rows])
            if np.isnan(ratio).all():
                continue
            ax.plot(x + offset, ratio, "o", markersize=6, label=label)
            for xi, m in zip(x + offset, ratio):
                if m == m:
                    top = max(top, m)
                    ax.annotate(f"{m:.2f}", (xi, m), xytext=(0, 4), textcoords="offset points", ha="center", fontsize=8)
        alone = [fmt_ns(_num(r[1])) if r[1] != "" else "" for r in rows]
        ax.set_xticks(x, [f"{n}\nalone: {a}" for n, a in zip(names, alone)], fontsize=8)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_ylim(min(0.95, ax.get_ylim()[0]), top + 0.12 * max(top - 1.0, 0.1))
        ax.set_ylabel("slowdown against alone (ratio, alone = 1)")
        ax.set_xlabel("job")
        _legend_above(ax, ncols=2, fontsize=8)
    return fig


SWEEP_FIGURES: dict[str, Maker] = {
    "policy_time": policy_time_figure,
    "comm_breakdown": breakdown_figure,
    "pauses_marks": pauses_marks_figure,
}
RUN_FIGURES: dict[str, Maker] = {
    "fct_slowdown": fct_figure,
    "queues": queue_figure,
    "rates": rate_figure,
    "rank_timeline": timeline_figure,
    "collective_times": collectives_figure,
    "link_utilization": links_figure,
}


def figures_for(directory: Path) -> dict:
    """Every figure the directory can make: {name: Figure}."""
    directory = Path(directory)
    makers: dict[str, Maker]
    if (directory / "results.csv").is_file():
        makers = SWEEP_FIGURES
    elif (directory / "summary.json").is_file():
        makers = RUN_FIGURES
        json.loads((directory / "summary.json").read_text())  # a readable run directory
    else:
        raise FileNotFoundError(f"{directory}: neither a run directory (summary.json) nor a sweep (results.csv)")
    out = {}
    for name, make in makers.items():
        fig = make(directory)
        if fig is not None:
            out[name] = fig
    return out


def write_figures(directory: Path, out_dir: Path, slowdown: list[tuple] | None = None) -> list[str]:
    """``roce-emu plot``: every figure the run or sweep ``directory`` can make (figures_for),
    written to ``out_dir`` (new, empty or an earlier plot folder, checked before anything is
    drawn) as PDF and PNG; their names. With ``slowdown`` (a run with jobs: results.jobs.
    slowdown_rows), also jobs_slowdown_figure and the rows as jobs_slowdown.csv. Raises
    ScenarioError for an ``out_dir`` that may not be written or a ``directory`` that cannot be
    plotted."""
    check_directory(out_dir, "--out", "plots")
    try:
        figures = figures_for(directory)
    except (FileNotFoundError, KeyError, ValueError) as err:
        raise ScenarioError(str(directory), "", f"cannot plot: {err}") from None
    if slowdown is not None:
        figures["jobs_slowdown"] = jobs_slowdown_figure(slowdown)
    make_directory(out_dir, "plots")
    for name, fig in figures.items():
        save(fig, out_dir, name)
    if slowdown is not None:
        write_csv(out_dir / "jobs_slowdown.csv", SLOWDOWN_COLUMNS, slowdown)
    return list(figures)


def save_compare_figure(runs: list, out_dir: Path) -> list[Path]:
    """compare_figure of the runs (compare.load_runs), written to out_dir/compare.pdf and .png;
    out_dir is made a roce-emu plot folder (check it first: destination.check_directory)."""
    make_directory(out_dir, "plots")
    return save(compare_figure([r.label for r in runs], [r.summary for r in runs]), out_dir, "compare")


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """Write name.pdf and name.png into out_dir, signed as roce-emu's and without a creation
    date (images.image_metadata), so the bytes repeat."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("pdf", "png"):
        path = out_dir / f"{name}.{ext}"
        fig.savefig(path, bbox_inches="tight", dpi=150, metadata=image_metadata(path))
        paths.append(path)
    plt.close(fig)
    return paths
