"""The standard figures, from run and sweep directories only (never the engine).

Each ``*_figure`` function returns a matplotlib Figure (or None when the directory lacks the
data); ``save`` writes it as PDF and PNG with reproducible bytes. ``figures_for`` picks every
figure a directory can make. One style for all: labelled axes with units, a legend where
there is more than one series, a colour-blind-safe cycle, no TeX needed.
"""
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

STYLE = {
    "figure.figsize": (6.4, 3.6), "figure.dpi": 150, "savefig.bbox": "tight", "font.size": 9,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
    "legend.frameon": False, "text.usetex": False, "mathtext.fontset": "stix",
    # Okabe-Ito: distinguishable with the common colour-vision deficiencies
    "axes.prop_cycle": matplotlib.cycler(color=["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7",
                                                "#56B4E9", "#F0E442", "#000000"]),
}
POLICY_ORDER = ["none", "dcqcn", "hpcc", "timely", "dctcp"]
POLICY_LABEL = {"none": "PFC only", "dcqcn": "DCQCN", "hpcc": "HPCC", "timely": "TIMELY", "dctcp": "DCTCP"}


def _read_csv(path: Path):
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


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


def _topology_labels(rows) -> dict:
    """Each row's fabric for an axis: its kind, plus every swept topology key whose value differs
    between rows (so a k=4 and a k=6 fat-tree are two groups, never pooled)."""
    varying = [k for k in _swept(rows) if k.startswith("topology") and k != "topology.kind"
               and len({r.get(k, "") for r in rows}) > 1]
    labels = {}
    for r in rows:
        extra = ", ".join(f"{k.removeprefix('topology.')}={r[k]}" for k in varying if r.get(k, "") != "")
        kind = r.get("topology.kind") or r.get("topology", "")
        labels[r["point"]] = f"{kind} ({extra})" if extra else kind
    return labels


def policy_time_figure(sweep_dir: Path):
    """Grouped bars: time per congestion-control policy per topology, each point divided by the
    PFC-only point with the same other swept values; one panel per workload-like swept value."""
    rows = [r for r in _read_csv(sweep_dir / "results.csv") if r.get("status") == "finished"]
    if not rows or "cc_algorithm" not in rows[0]:
        return None
    column, label = _time_metric(rows)
    swept = _swept(rows)
    others = _panel_keys(rows)
    baseline = {}
    for r in rows:
        if r["cc_algorithm"] == "none":
            baseline[tuple(r[k] for k in swept if k != "network.cc.algorithm")] = _num(r[column])
    for r in rows:
        base = baseline.get(tuple(r[k] for k in swept if k != "network.cc.algorithm"))
        r["_ratio"] = _num(r[column]) / base if base else np.nan
    panels = sorted({tuple(r[k] for k in others) for r in rows})
    fabric = _topology_labels(rows)
    topologies = sorted(set(fabric.values()))
    policies = _policies(rows)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(max(6.4, 3.6 * len(panels)), 3.6), squeeze=False,
                                 sharey=True)
        width = 0.8 / len(policies)
        for ax, panel in zip(axes[0], panels):
            mine = [r for r in rows if tuple(r[k] for k in others) == panel]
            for i, policy in enumerate(policies):
                heights = [np.nanmean([r["_ratio"] for r in mine if fabric[r["point"]] == topo
                                       and r["cc_algorithm"] == policy] or [np.nan]) for topo in topologies]
                ax.bar(np.arange(len(topologies)) + (i - (len(policies) - 1) / 2) * width, heights, width,
                       label=POLICY_LABEL.get(policy, policy))
            ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
            ax.set_xticks(np.arange(len(topologies)), topologies)
            ax.set_xlabel("topology (fabric)")
            if panel:
                ax.set_title(_panel_label(others, panel), fontsize=9)
        axes[0][0].set_ylabel(f"{label} (ratio to PFC only)")
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, ncols=min(len(policies), 5), loc="upper center", bbox_to_anchor=(0.5, 1.08))
        fig.tight_layout()
    return fig


def breakdown_figure(sweep_dir: Path):
    """Stacked bars per point: compute, exposed communication and idle time per iteration, one
    panel per workload-like swept value."""
    rows = [r for r in _read_csv(sweep_dir / "results.csv")
            if r.get("status") == "finished" and r.get("mean_compute_ns", "") != ""]
    if not rows:
        return None
    others = _panel_keys(rows)
    rank = {p: i for i, p in enumerate(POLICY_ORDER)}
    fabric = _topology_labels(rows)
    rows.sort(key=lambda r: (fabric[r["point"]], rank.get(r.get("cc_algorithm"), 99)))
    panels = sorted({tuple(r[k] for k in others) for r in rows})
    parts = [("mean_compute_ns", "compute"), ("mean_exposed_communication_ns", "exposed communication"),
             ("mean_idle_ns", "idle (waiting for other ranks)")]
    with plt.rc_context(STYLE):
        width = max(len([r for r in rows if tuple(r[k] for k in others) == p]) for p in panels)
        fig, axes = plt.subplots(1, len(panels), figsize=(max(6.4, (0.3 * width + 1.2) * len(panels)), 3.8),
                                 squeeze=False)
        for ax, panel in zip(axes[0], panels):
            mine = [r for r in rows if tuple(r[k] for k in others) == panel]
            bottom = np.zeros(len(mine))
            for column, name in parts:
                values = np.array([_num(r[column], 0.0) for r in mine]) / 1e6
                ax.bar(np.arange(len(mine)), values, 0.7, bottom=bottom, label=name)
                bottom += values
            labels = [f"{fabric[r['point']]} {POLICY_LABEL.get(r.get('cc_algorithm'), r.get('cc_algorithm'))}"
                      for r in mine]
            ax.set_xticks(np.arange(len(mine)), labels, fontsize=7, rotation=90)
            ax.set_xlabel("point (topology, congestion control)")
            ax.set_ylabel("time per iteration (ms)")
            if panel:
                ax.set_title(_panel_label(others, panel), fontsize=9)
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
    return fig


def pauses_marks_figure(sweep_dir: Path):
    """PFC pauses and ECN marks per policy (summed over the sweep's points of that policy)."""
    rows = [r for r in _read_csv(sweep_dir / "results.csv") if r.get("status") in ("finished", "incomplete")]
    if not rows or "cc_algorithm" not in rows[0]:
        return None
    policies = _policies(rows)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.2))
        for ax, (column, name) in zip(axes, [("pfc_pauses_sent", "PFC pauses sent"), ("ecn_marks", "ECN marks")]):
            totals = [sum(_num(r.get(column), 0.0) for r in rows if r["cc_algorithm"] == p) for p in policies]
            colors = [STYLE["axes.prop_cycle"].by_key()["color"][i % 8] for i in range(len(policies))]
            ax.bar([POLICY_LABEL.get(p, p) for p in policies], totals, color=colors)
            ax.set_xlabel("congestion control (policy)")
            ax.set_ylabel(f"{name} (count, all points)")
        fig.tight_layout()
    return fig


# ---- run figures ---------------------------------------------------------------------------------
def fct_figure(run_dir: Path):
    """FCT slowdown CDF per flow-size class, and the median and 99th percentile per class."""
    rows = [r for r in _read_csv(run_dir / "flows.csv") if r["slowdown"] != ""]
    if not rows:
        return None
    size = np.array([_num(r["bytes"]) for r in rows])
    slowdown = np.array([_num(r["slowdown"]) for r in rows])
    edges = np.unique(np.quantile(size, [0, 0.5, 0.9, 1.0]))
    classes = [(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])] or [(size.min(), size.max())]
    with plt.rc_context(STYLE):
        fig, (cdf, pct) = plt.subplots(1, 2, figsize=(7.6, 3.2))
        stats = []
        for i, (lo, hi) in enumerate(classes):
            pick = (size >= lo) & ((size <= hi) if i == len(classes) - 1 else (size < hi))
            if not pick.any():
                continue
            values = np.sort(slowdown[pick])
            name = f"{lo:,.0f}-{hi:,.0f} B" if lo != hi else f"{lo:,.0f} B"
            cdf.step(values, np.arange(1, len(values) + 1) / len(values), where="post", label=name)
            stats.append((name, np.percentile(values, 50), np.percentile(values, 99)))
        cdf.set_xlabel("FCT slowdown (FCT / ideal FCT, ratio)")
        cdf.set_ylabel("fraction of flows (CDF)")
        cdf.legend(title="flow size")
        x = np.arange(len(stats))
        pct.bar(x - 0.2, [s[1] for s in stats], 0.4, label="median")
        pct.bar(x + 0.2, [s[2] for s in stats], 0.4, label="99th percentile")
        pct.set_xticks(x, [s[0] for s in stats], fontsize=7)
        pct.set_xlabel("flow size class (bytes)")
        pct.set_ylabel("FCT slowdown (ratio)")
        pct.legend()
        fig.tight_layout()
    return fig


def queue_figure(run_dir: Path, top: int = 6):
    """Egress queue over time of the busiest switch ports (from traces_queue.csv)."""
    path = run_dir / "traces_queue.csv"
    if not path.is_file():
        return None
    rows = _read_csv(path)
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
        ax.legend(title="switch port", fontsize=7)
    return fig


def rate_figure(run_dir: Path, top: int = 8):
    """Pacing rate of the first flows over time (from traces_rate.csv)."""
    path = run_dir / "traces_rate.csv"
    if not path.is_file():
        return None
    series: dict[int, list] = {}
    for r in _read_csv(path):
        series.setdefault(int(r["flow_id"]), []).append((_num(r["t_ns"]), _num(r["rate_bps"])))
    if not series:
        return None
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots()
        for flow in sorted(series)[:top]:
            t, rate = np.array(series[flow]).T
            ax.step(t / 1e3, rate / 1e9, where="post", lw=1, label=f"flow {flow}")
        ax.set_xlabel("time (us)")
        ax.set_ylabel("pacing rate (Gb/s)")
        ax.legend(fontsize=7, ncols=2)
    return fig


SWEEP_FIGURES = {"policy_time": policy_time_figure, "comm_breakdown": breakdown_figure,
                 "pauses_marks": pauses_marks_figure}
RUN_FIGURES = {"fct_slowdown": fct_figure, "queues": queue_figure, "rates": rate_figure}


def figures_for(directory: Path) -> dict:
    """Every figure the directory can make: {name: Figure}."""
    directory = Path(directory)
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


def save(fig, out_dir: Path, name: str) -> list[Path]:
    """Write name.pdf and name.png into out_dir (no creation date, so the bytes repeat)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext in ("pdf", "png"):
        path = out_dir / f"{name}.{ext}"
        fig.savefig(path, bbox_inches="tight", dpi=150, metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(path)
    plt.close(fig)
    return paths
