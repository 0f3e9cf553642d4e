"""Task-level results: tasks.csv, collectives.csv and the iteration time with its breakdown.

Per iteration and host, from the tasks' start and finish times:
- compute: time covered by the host's compute tasks;
- communication: time covered by the collective flows the host sends or receives (from the
  flow's start to its receiver holding the last byte);
- exposed communication: communication time not covered by compute (what overlap did not hide);
- idle: the rest of the iteration (waiting for other hosts).
The summary reports each as the mean over the hosts that take part.
"""
import numpy as np

from .collectives import BUS_FACTOR
from .core.state import World
from .dag import ROLE_JOIN
from .results import ps_to_ns
from .workload import Workload

TASK_COLUMNS = ("task_id", "kind", "name", "iteration", "host", "src", "dst", "bytes", "start_ns", "finish_ns",
                "duration_ns")
COLLECTIVE_COLUMNS = ("name", "group", "iteration", "kind", "algorithm", "ranks", "bytes", "chunks", "flows",
                      "start_ns", "finish_ns", "time_ns", "algbw_gbps", "busbw_gbps")


def task_rows(world: World, workload: Workload) -> list[dict]:
    t = workload.tasks
    task = world.task
    flow = world.flow
    rows = []
    for k in range(len(t)):
        if t.role[k] == ROLE_JOIN:
            continue
        start, finish = int(task[k]["start_ps"]), int(task[k]["finish_ps"])
        is_flow = bool(t.is_flow[k])
        rows.append({
            "task_id": k, "kind": t.role[k], "name": t.name[k], "iteration": int(t.iteration[k]),
            "host": "" if is_flow else int(t.host[k]),
            "src": int(flow[k]["src"]) if is_flow else "", "dst": int(flow[k]["dst"]) if is_flow else "",
            "bytes": int(flow[k]["size_bytes"]) if is_flow else "",
            "start_ns": ps_to_ns(start), "finish_ns": ps_to_ns(finish),
            "duration_ns": ps_to_ns(finish - start) if finish >= 0 and start >= 0 else "",
        })
    return rows


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
        algbw = c.nbytes * 8 / (time_ps / 1e3) if time_ps > 0 else None  # bit/ns = Gb/s
        n = len(c.ranks)
        rows.append({
            "name": c.name, "group": c.group, "iteration": c.iteration, "kind": c.kind, "algorithm": c.algorithm,
            "ranks": n,
            "bytes": c.nbytes, "chunks": c.chunks, "flows": len(c.flows), "start_ns": ps_to_ns(start),
            "finish_ns": ps_to_ns(finish), "time_ns": ps_to_ns(time_ps) if done else "",
            "algbw_gbps": round(algbw, 6) if algbw else "",
            "busbw_gbps": round(algbw * BUS_FACTOR[c.kind](n), 6) if algbw else "",
        })
    return rows


def _covered(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
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


def _length(intervals) -> int:
    return sum(e - s for s, e in intervals)


def _minus(a, b) -> int:
    """Length of the union a minus the union b (both disjoint and sorted)."""
    return _length(a) - _length(_covered([(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b
                                          if min(e1, e2) > max(s1, s2)]))


def iteration_summary(world: World, workload: Workload) -> dict:
    """iteration_ns per iteration, its mean, and the mean per-host breakdown (empty without
    collectives or compute)."""
    if not workload.iteration_ends:
        return {}
    t = workload.tasks
    task = world.task
    flow = world.flow
    ends = []
    for per_rank in workload.iteration_ends:
        finishes = task["finish_ps"][list(per_rank.values())]
        ends.append(int(finishes.max()) if (finishes >= 0).all() else -1)
    if any(e < 0 for e in ends):
        return {"iterations_finished": sum(e >= 0 for e in ends)}
    bounds = [0] + ends
    collective_flows = set()
    for c in workload.collectives:
        collective_flows.update(c.flows)
    breakdown = {"compute_ns": [], "communication_ns": [], "exposed_communication_ns": [], "idle_ns": []}
    for it in range(len(ends)):
        compute: dict[int, list] = {}
        comm: dict[int, list] = {}
        for k in np.flatnonzero(t.iteration == it):
            span = (int(task[k]["start_ps"]), int(task[k]["finish_ps"]))
            if t.is_flow[k] and k in collective_flows:
                for h in (int(flow[k]["src"]), int(flow[k]["dst"])):
                    comm.setdefault(h, []).append(span)
            elif t.role[k] == "compute":
                compute.setdefault(int(t.host[k]), []).append(span)
        length = bounds[it + 1] - bounds[it]
        per_host = {"compute_ns": [], "communication_ns": [], "exposed_communication_ns": [], "idle_ns": []}
        for h in sorted(set(compute) | set(comm)):
            c_union = _covered(compute.get(h, []))
            m_union = _covered(comm.get(h, []))
            per_host["compute_ns"].append(_length(c_union))
            per_host["communication_ns"].append(_length(m_union))
            per_host["exposed_communication_ns"].append(_minus(m_union, c_union))
            per_host["idle_ns"].append(length - _length(_covered(c_union + m_union)))
        for key, values in per_host.items():
            breakdown[key].append(float(np.mean(values)) / 1000)
    iteration_ns = [(bounds[i + 1] - bounds[i]) / 1000 for i in range(len(ends))]
    return {
        "iterations": len(ends),
        "iteration_ns": iteration_ns,
        "mean_iteration_ns": float(np.mean(iteration_ns)),
        **{f"mean_{key}": float(np.mean(values)) for key, values in breakdown.items()},
    }
