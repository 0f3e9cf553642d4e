"""Measures computed from a run's traces and flows: per-flow throughput over a window, Jain's
fairness index, flow-size buckets.

They read the trace rows (kinds.TR_*) a run returns in ``RunOutcome.trace``, or the
long-format ``traces_rate.csv`` loaded back into the same columns, so tests, plots and
users compute them the same way.
"""

import numpy as np

from ..core import kinds as K
from ..units import bps_to_gbps, ps_to_ns


def jain_index(values) -> float:
    """(sum x)^2 / (n sum x^2): 1 when all are equal, 1/n when one takes everything."""
    x = np.asarray(values, dtype=float)
    denominator = len(x) * float((x * x).sum())
    return float(x.sum() ** 2 / denominator) if denominator > 0 else 1.0


def _rows(trace: np.ndarray, kind, obj: int) -> np.ndarray:
    """The trace rows of one flow (TR_RATE) or one port (TR_QUEUE), in time order."""
    return trace[(trace[:, 1] == kind) & (trace[:, 2] == obj)]


def acked_series(trace: np.ndarray, flow: int) -> tuple[np.ndarray, np.ndarray]:
    """(t_ps, bytes acknowledged) of one flow at each sample while it was sending."""
    rows = _rows(trace, K.TR_RATE, flow)
    return rows[:, 0], rows[:, 5]


def rate_series(trace: np.ndarray, flow: int) -> tuple[np.ndarray, np.ndarray]:
    """(t_ps, pacing rate in bit/s) of one flow at each sample while it was sending."""
    rows = _rows(trace, K.TR_RATE, flow)
    return rows[:, 0], rows[:, 3]


def throughput_bps(trace: np.ndarray, flow: int, t0_ps: int, t1_ps: int) -> float:
    """Goodput (payload bit/s acknowledged) of a flow between the samples nearest t0 and t1."""
    t, acked = acked_series(trace, flow)
    i0 = int(np.searchsorted(t, t0_ps))
    i1 = int(np.searchsorted(t, t1_ps, side="right")) - 1
    if i1 <= i0:
        raise ValueError(f"flow {flow} has fewer than two samples in [{t0_ps}, {t1_ps}] ps")
    return float(acked[i1] - acked[i0]) * 8e12 / float(t[i1] - t[i0])


def queue_series(trace: np.ndarray, port: int) -> tuple[np.ndarray, np.ndarray]:
    """(t_ps, egress queue bytes) of one switch port at each sample."""
    rows = _rows(trace, K.TR_QUEUE, port)
    return rows[:, 0], rows[:, 3]


DECILES = tuple(i / 10 for i in range(11))


def size_buckets(size: np.ndarray, quantiles=DECILES) -> list[tuple[int, int, np.ndarray]]:
    """Flow-size buckets between the given quantiles of ``size`` (edges merged where equal):
    (smallest, largest size, mask of the flows in it); the last bucket includes its top."""
    edges = np.unique(np.quantile(size, quantiles)) if len(size) else np.zeros(0)
    if len(edges) == 1:
        return [(int(edges[0]), int(edges[0]), np.ones(len(size), bool))]
    out = []
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        pick = (size >= lo) & ((size <= hi) if i == len(edges) - 2 else (size < hi))
        if pick.any():
            out.append((int(size[pick].min()), int(size[pick].max()), pick))
    return out


def io_streaming(world, fabric, table: dict) -> dict:
    """What the I/O controllers' streams achieved (summary.json's ``io_*`` keys, empty without
    them): the payload rate of each controller over its own streams' span (the mean and the
    least), and the busiest link out of a switch over the span of all of them, as a load in
    Gb/s of wire bytes (everything the port sent during the run) and as a multiple of the
    controllers' link rate."""
    first, n_io = fabric.n_hosts, fabric.n_io
    src = np.asarray(table["src"])
    streams = (src >= first) & (src < first + n_io)
    start, finish, size = table["start_ps"][streams], table["finish_ps"][streams], table["bytes"][streams]
    if not streams.any() or (finish < 0).any():
        return {}
    rates = []
    for c in np.unique(src[streams]):
        mine = src[streams] == c
        rates.append(size[mine].sum() * 8e3 / (finish[mine].max() - start[mine].min()))
    window_ps = int(finish.max() - start.min())
    port = world.port
    switch_port = np.flatnonzero(port["node"] >= fabric.n_endpoints)
    hot = switch_port[np.argmax(port["tx_bytes"][switch_port])]
    load = float(port["tx_bytes"][hot] * 8e3 / window_ps)
    io_rate = bps_to_gbps(float(fabric.port_rate_bps[np.asarray(fabric.port_tier) == "io"][0]))
    names = fabric.names
    return {
        "io_controllers": int(n_io),
        "io_window_ns": ps_to_ns(window_ps),
        "io_rate_gbps": io_rate,
        "io_achieved_gbps_mean": float(np.mean(rates)),
        "io_achieved_gbps_min": float(np.min(rates)),
        "io_hottest_link": f"{names[port['node'][hot]]}->{names[port['node'][port['peer_port'][hot]]]}",
        "io_hottest_link_gbps": load,
        "io_hottest_link_per_io_rate": load / io_rate,
    }
