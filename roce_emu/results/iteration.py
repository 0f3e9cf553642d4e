"""Task-level results: tasks.csv, collectives.csv, timeline.csv and the iteration time with its breakdown.

Per iteration and host, from the tasks' start and finish times:
- compute: time covered by the host's compute tasks;
- communication: time covered by the collective flows the host sends or receives (from the
  flow's start to its receiver holding the last byte);
- exposed communication: communication time not covered by compute (what overlap did not hide);
- idle: the rest of the iteration (waiting for other hosts).
timeline.csv holds these as segments per host and iteration; the summary reports each as
the mean over the hosts that take part.
"""

import numpy as np

from ..core.state import World
from ..workload import Workload, collective_flow_mask
from ..workload.collectives import BUS_FACTOR
from ..units import format_ps_as_ns, ps_to_ns, ps_to_s
from ..workload.dag import ROLE_CODE, ROLE_COMPUTE, ROLE_JOIN, ROLES

TASK_COLUMNS = (
    "task_id",
    "kind",
    "name",
    "iteration",
    "host",
    "src",
    "dst",
    "bytes",
    "start_ns",
    "finish_ns",
    "duration_ns",
)
COLLECTIVE_COLUMNS = (
    "name",
    "group",
    "iteration",
    "kind",
    "algorithm",
    "scheduler",
    "ranks",
    "bytes",
    "chunks",
    "flows",
    "start_ns",
    "finish_ns",
    "time_ns",
    "algbw_gbps",
    "busbw_gbps",
)


def task_rows(world: World, workload: Workload, leave_out=None) -> list[dict]:
    """tasks.csv rows: every flow and compute task, except the DAG's joins and the tasks the
    boolean mask ``leave_out`` marks."""
    t = workload.tasks
    task = world.task
    flow = world.flow
    keep = t.role != ROLE_CODE[ROLE_JOIN]
    if leave_out is not None:
        keep[: len(leave_out)] &= ~np.asarray(leave_out, bool)
    rows = []
    for k in np.flatnonzero(keep).tolist():
        start, finish = int(task[k]["start_ps"]), int(task[k]["finish_ps"])
        is_flow = bool(t.is_flow[k])
        rows.append(
            {
                "task_id": k,
                "kind": ROLES[t.role[k]],
                "name": t.name(k),
                "iteration": int(t.iteration[k]),
                "host": "" if is_flow else int(t.host[k]),
                "src": int(flow[k]["src"]) if is_flow else "",
                "dst": int(flow[k]["dst"]) if is_flow else "",
                "bytes": int(flow[k]["size_bytes"]) if is_flow else "",
                "start_ns": format_ps_as_ns(start),
                "finish_ns": format_ps_as_ns(finish),
                "duration_ns": format_ps_as_ns(finish - start) if finish >= 0 and start >= 0 else "",
            }
        )
    return rows


def collective_columns(workload: Workload) -> tuple[str, ...]:
    """COLLECTIVE_COLUMNS, and per dimension bytes, busy time and utilisation when a collective
    ran over the dimensions of a fabric (hierarchical)."""
    n = max(
        (int(c.flow_dim.max()) + 1 for c in workload.collectives if c.flow_dim is not None and len(c.flow_dim)),
        default=0,
    )
    return COLLECTIVE_COLUMNS + tuple(f"dim{k}_{m}" for k in range(n) for m in ("bytes", "busy_ns", "utilization"))


def _per_dimension(world: World, c, time_ps: int) -> dict:
    """For each dimension of collective c: the bytes its flows moved, the time at least one of
    them was in flight (union of start to receiver completion), and the utilisation: bytes x 8
    over the collective's time, divided by what its ranks can send on that dimension at once
    (ranks x the dimension's link rate x the links its algorithm keeps busy: one for a ring, two
    for ring_bidir, p - 1 for direct on a fully connected dimension)."""
    out = {}
    task, size = world.task, world.flow["size_bytes"]
    for k in range(int(c.flow_dim.max()) + 1):
        ids = c.flows[c.flow_dim == k]
        moved = int(size[ids].sum())
        spans = _covered(zip(task["start_ps"][ids].tolist(), task["finish_ps"][ids].tolist()))
        busy = sum(e - s for s, e in spans)
        cap = len(c.ranks) * c.dim_rates[k] if k < len(c.dim_rates) else 0
        util = moved * 8 / ps_to_s(time_ps) / cap if time_ps > 0 and cap > 0 and len(ids) else None
        out.update(
            {
                f"dim{k}_bytes": moved,
                f"dim{k}_busy_ns": format_ps_as_ns(busy) if len(ids) else "0",
                f"dim{k}_utilization": round(util, 6) if util is not None else "",
            }
        )
    return out


def collective_rows(world: World, workload: Workload) -> list[dict]:
    task = world.task
    rows = []
    for c in workload.collectives:
        starts = task["start_ps"][c.flows]
        finishes = task["finish_ps"][list(c.end.values())]
        done = bool((finishes >= 0).all()) and bool((starts >= 0).all())
        start = int(starts.min()) if done else -1
        finish = int(finishes.max()) if done else -1
        time_ps = finish - start if done else 0
        algbw = c.nbytes * 8 / ps_to_ns(time_ps) if time_ps > 0 else None  # bit/ns = Gb/s
        n = len(c.ranks)
        rows.append(
            {
                "name": c.name,
                "group": c.group,
                "iteration": c.iteration,
                "kind": c.kind,
                "algorithm": c.algorithm,
                "scheduler": c.scheduler,
                "ranks": n,
                "bytes": c.nbytes,
                "chunks": c.chunks,
                "flows": len(c.flows),
                "start_ns": format_ps_as_ns(start),
                "finish_ns": format_ps_as_ns(finish),
                "time_ns": format_ps_as_ns(time_ps) if done else "",
                "algbw_gbps": round(algbw, 6) if algbw else "",
                "busbw_gbps": round(algbw * BUS_FACTOR[c.kind](n), 6) if algbw else "",
            }
        )
        if c.flow_dim is not None and len(c.flow_dim) and done:
            rows[-1].update(_per_dimension(world, c, time_ps))
    return rows


TIMELINE_COLUMNS = ("iteration", "host", "state", "start_ns", "end_ns", "duration_ns")
STATES = ("compute", "exposed_communication", "idle")


def _covered(intervals) -> list[tuple[int, int]]:
    """Disjoint, sorted union of [start, end) intervals."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _covered_per_host(host: np.ndarray, start: np.ndarray, end: np.ndarray) -> dict[int, list[tuple[int, int]]]:
    """_covered of each host's intervals, in bulk: {host: disjoint sorted [start, end)}. Written
    for tens of millions of intervals: few temporary arrays, updated in place."""
    keep = end > start
    if not keep.all():
        host, start, end = host[keep], start[keep], end[keep]
    if not len(host):
        return {}
    # each host's times offset by host * span keep hosts apart in one int64 key
    span = int(end.max()) + 1
    # np.lexsort((start, host))'s order: a stable radix sort by host (on the smallest unsigned
    # type that holds them), after which a host's starts come nearly in order (a collective's
    # flows are made step by step), so that a stable sort (timsort) of the keys is quick: 1.2 s
    # against 3.1 s for 16.8 M intervals (1024 NPUs)
    order = np.argsort(host.astype(np.min_scalar_type(int(host.max()))), kind="stable")
    offset = host[order].astype(np.int64)
    offset *= span
    order = order[np.argsort(offset + start[order], kind="stable")]  # moves within a host only: offset holds
    host, start, end = host[order], start[order], end[order]
    del order
    first = np.ones(len(host), bool)  # an interval that begins a host's union interval
    np.not_equal(host[1:], host[:-1], out=first[1:])
    reach = end + offset  # the furthest end so far, per host
    np.maximum.accumulate(reach, out=reach)
    reach -= offset
    del offset
    first[1:] |= start[1:] > reach[:-1]
    begin = np.flatnonzero(first)
    last = np.append(begin[1:], len(host)) - 1
    out: dict[int, list[tuple[int, int]]] = {}
    for h, s, e in zip(host[begin].tolist(), start[begin].tolist(), reach[last].tolist()):
        out.setdefault(h, []).append((s, e))
    return out


def _subtract(a, b) -> list[tuple[int, int]]:
    """Disjoint sorted intervals a minus disjoint sorted intervals b (one pass over both)."""
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while s < e and k < len(b) and b[k][0] < e:
            if b[k][0] > s:
                out.append((s, b[k][0]))
            s = max(s, b[k][1])
            k += 1
        if s < e:
            out.append((s, e))
    return out


def _iteration_ends(world: World, workload: Workload) -> list[int]:
    task = world.task
    ends = []
    for per_rank in workload.iteration_ends:
        finishes = task["finish_ps"][list(per_rank.values())]
        ends.append(int(finishes.max()) if (finishes >= 0).all() else -1)
    return ends


def _clip(start: np.ndarray, end: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, slice]:
    """Disjoint sorted intervals cut to the window [lo, hi): (starts, ends, which of them)."""
    picked = slice(int(np.searchsorted(end, lo, "right")), int(np.searchsorted(start, hi, "left")))
    return np.maximum(start[picked], lo), np.minimum(end[picked], hi), picked


def rank_timeline(world: World, workload: Workload) -> list[tuple]:
    """Per finished iteration and host: (iteration, host, state, start_ps, end_ps, communication_ps)
    segments that tile the iteration's window, state one of STATES. Compute is time covered by
    the host's compute tasks; exposed communication, time its collective flows (sent or
    received) are in flight outside compute; idle, the rest (waiting for other ranks).
    communication_ps, repeated on each row of a host, is all its communication time in the
    window, hidden or not. Windows run from the previous iteration's end (or 0) to the end of
    this one's last task; a task that starts before its window (a fast rank running ahead)
    counts where it happens."""
    if not workload.iteration_ends:
        return []
    ends = _iteration_ends(world, workload)
    windows: list[tuple[int, int]] = []
    for hi in ends:
        if hi < 0:
            break
        windows.append((windows[-1][1] if windows else workload.start_ps, hi))
    if not windows:
        return []
    t = workload.tasks
    task = world.task
    flow = world.flow
    start, finish = task["start_ps"].astype(np.int64), task["finish_ps"].astype(np.int64)
    is_collective = np.zeros(len(t), bool)
    is_collective[: len(workload.flows)] = collective_flow_mask(workload)
    compute = np.flatnonzero((t.role == ROLE_CODE[ROLE_COMPUTE]) & workload.own_tasks() & (start >= 0) & (finish >= 0))
    comm = np.flatnonzero(is_collective & (start >= 0) & (finish >= 0))
    computing = _covered_per_host(t.host[compute], start[compute], finish[compute])
    # a collective flow occupies its sender and its receiver, when they are ranks (not the
    # reduction units of in_network collectives)
    comm_hosts = np.concatenate([flow["src"][comm], flow["dst"][comm]])
    comm_start, comm_finish = (np.concatenate([part, part]) for part in (start[comm], finish[comm]))
    ranks = np.concatenate([np.asarray(c.ranks, np.int64) for c in workload.collectives] or [np.zeros(0, np.int64)])
    is_rank = np.zeros(max(int(comm_hosts.max(initial=0)), int(ranks.max(initial=0))) + 1, bool)  # by host id
    is_rank[ranks] = True
    rank = is_rank[comm_hosts]
    comm_hosts, comm_start, comm_finish = comm_hosts[rank], comm_start[rank], comm_finish[rank]
    communicating = _covered_per_host(comm_hosts, comm_start, comm_finish)
    rows: list[tuple] = []
    # every host with a task gets its rows, also one whose tasks all took no time (all idle)
    for h in np.union1d(t.host[compute], comm_hosts).tolist():
        busy_c = computing.get(h, [])
        busy_m = communicating.get(h, [])
        exposed = _subtract(busy_m, busy_c)
        idle = _subtract([(windows[0][0], windows[-1][1])], _covered(busy_c + busy_m))
        # the three states' segments are disjoint: sorted by start, their ends are sorted too
        segments = sorted(
            [(s, e, "compute") for s, e in busy_c]
            + [(s, e, "exposed_communication") for s, e in exposed]
            + [(s, e, "idle") for s, e in idle]
        )
        seg_start, seg_end = (np.array([seg[j] for seg in segments], np.int64) for j in (0, 1))
        states = [seg[2] for seg in segments]
        m_start, m_end = (np.array([c[j] for c in busy_m], np.int64) for j in (0, 1))
        for it, (lo, hi) in enumerate(windows):
            cs, ce, _ = _clip(m_start, m_end, lo, hi)
            total = int((ce - cs).sum())
            ss, se, picked = _clip(seg_start, seg_end, lo, hi)
            n = len(ss)
            rows.extend(zip([it] * n, [h] * n, states[picked], ss.tolist(), se.tolist(), [total] * n))
    return rows


def timeline_rows(timeline: list[tuple]) -> list[tuple]:
    """timeline.csv: rank_timeline's segments in ns (TIMELINE_COLUMNS)."""
    return [
        (it, h, state, format_ps_as_ns(s), format_ps_as_ns(e), format_ps_as_ns(e - s))
        for it, h, state, s, e, _ in timeline
    ]


def iteration_summary(world: World, workload: Workload, timeline: list[tuple] | None = None) -> dict:
    """iteration_ns per iteration, its mean, and the mean per-host breakdown from the rank
    timeline (left out when the timeline is empty: a workload of flows or sends alone)."""
    if not workload.iteration_ends:
        return {}
    ends = _iteration_ends(world, workload)
    if any(e < 0 for e in ends):
        return {"iterations_finished": sum(e >= 0 for e in ends)}
    timeline = rank_timeline(world, workload) if timeline is None else timeline
    per: dict[tuple[int, int], dict[str, int]] = {}  # (iteration, host) -> {state: ps}
    for it, h, state, s, e, comm in timeline:
        cell = per.setdefault((it, h), {"compute": 0, "exposed_communication": 0, "idle": 0, "communication": comm})
        cell[state] += e - s
    keys = ("compute", "communication", "exposed_communication", "idle")
    breakdown: dict[str, list[float]] = {key: [] for key in keys} if per else {}
    for it in range(len(ends) if per else 0):
        cells = [v for (i, _), v in per.items() if i == it]
        for key in keys:
            breakdown[key].append(ps_to_ns(float(np.mean([c[key] for c in cells]))))
    bounds = [workload.start_ps] + ends
    iteration_ns = [ps_to_ns(bounds[i + 1] - bounds[i]) for i in range(len(ends))]
    return {
        "iterations": len(ends),
        "iteration_ns": iteration_ns,
        "mean_iteration_ns": float(np.mean(iteration_ns)),
        **{f"mean_{key}_ns": float(np.mean(values)) for key, values in breakdown.items()},
    }
