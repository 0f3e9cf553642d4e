"""Collective scheduling over the dimensions of a fabric: the baseline order and Themis
(Rashidi et al., ISCA 2022), planned ahead on a bandwidth model, then run at packet level.

A hierarchical all-reduce cuts its buffer into chunks. Each chunk reduce-scatters through
the dimensions in some order, then all-gathers back in the reverse order; at each
reduce-scatter stage it shrinks by the dimension's size. The baseline sends every chunk
through dimension 0, 1, ..., D-1, so the first dimension carries the largest pieces and the
last ones idle. Themis picks each chunk's order to balance the dimensions:

- **Loads.** Each dimension d keeps an estimated load L_d: the seconds of transfer it has been
  given, a stage of s bytes costing (p_d - 1) / p_d x s / (u_d B_d) (B_d: the dimension's link
  rate, u_d: the links its algorithm keeps busy, dim_algorithms.py, p_d: its size), once for the
  reduce-scatter and once for the all-gather.
- **Greedy order.** A chunk goes through the dimensions from the least loaded to the most
  loaded, so that the least loaded one takes its largest piece.
- **Threshold.** The greedy order is kept only if the largest load after adding the chunk is no
  larger than with the baseline order; otherwise the chunk takes the baseline order. And a
  whole plan gives way to the baseline's when it would finish later at run time, as
  stage_model.py predicts from the run's own rules (few chunks: the balance lengthens the
  pipeline; many small ones or a small collective: the dimensions' queues and the ring steps'
  latency, not their bytes, set the time). So Themis never plans worse than the baseline.
- **Within a dimension** the stages of different chunks queue: ``themis_fifo`` serves them in
  the order they become ready, ``themis_scf`` smallest chunk first.

``plan`` simulates that schedule on the model (a dimension serves one stage at a time; a
chunk's stage is ready when its previous stage ends) and returns every stage in the order
it starts. The packet-level run (collectives.py) takes from it each chunk's dimension
order, and whether Themis gives way to the baseline; the order in which a dimension serves
the stages is then decided while the run goes, by the same rule, in runtime queues
(core/tasks.py), from when the stages really become ready.
"""

import functools
import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from .stage_model import DimTiming, run_time_s

SCHEDULERS = ("baseline", "themis_fifo", "themis_scf")


@dataclass(frozen=True)
class Stage:
    chunk: int
    index: int  # 0 .. 2 D' - 1 over the dimensions with more than one NPU
    dim: int
    gather: bool  # False: reduce-scatter; True: all-gather
    nbytes: float  # the chunk's size on that dimension (per NPU, before the stage splits it)
    start_s: float  # when the plan starts it (seconds after the collective starts)
    end_s: float  # when the plan has its data through (its transfer and the ring's latency)


def chunk_order(loads: list[float], sizes, rates_bps, nbytes: float, scheduler: str) -> list[int]:
    """The dimension order of one chunk's reduce-scatter (its all-gather reverses it), and
    the loads updated with it (in place); ``rates_bps``: each dimension's u_d B_d."""
    dims = [d for d in range(len(sizes)) if sizes[d] > 1]
    base = list(dims)

    def added(order):
        out = [0.0] * len(sizes)
        s = nbytes
        for d in order:
            out[d] = 2 * (sizes[d] - 1) / sizes[d] * s * 8 / rates_bps[d]
            s /= sizes[d]
        return out

    chosen = base
    if scheduler != "baseline":
        greedy = sorted(dims, key=lambda d: (loads[d], d))
        worst = max(loads[d] + a for d, a in enumerate(added(greedy)))
        if worst <= max(loads[d] + a for d, a in enumerate(added(base))):
            chosen = greedy
    for d, a in enumerate(added(chosen)):
        loads[d] += a
    return chosen


def plan(sizes, timing: DimTiming, chunk_bytes: Sequence[float], scheduler: str) -> list[Stage]:
    """Every stage of every chunk, in the order the plan starts them. A stage keeps its
    dimension busy for its bytes at the rate of the links its algorithm uses; a step's latency
    (``timing.step_s``) delays the chunk, not the dimension: the chunk's next stage is ready its
    steps' latencies after (p_d - 1 ring steps, one direct step), as steps pipeline. A Themis
    plan that stage_model.py finishes later than the baseline's gives way to the baseline's (its
    threshold, at the level of the collective)."""
    return list(_plan_once(tuple(sizes), timing, tuple(chunk_bytes), scheduler))


@functools.lru_cache(maxsize=256)
def _plan_once(sizes: tuple, timing: DimTiming, chunk_bytes: tuple, scheduler: str) -> tuple[Stage, ...]:
    """plan(), once per set of arguments (training repeats its buckets' all-reduces)."""
    stages = _plan(sizes, timing, chunk_bytes, scheduler)
    if scheduler != "baseline":
        base = _plan(sizes, timing, chunk_bytes, "baseline")
        if _run_time_s(sizes, stages, scheduler, timing) > _run_time_s(sizes, base, "baseline", timing):
            stages = base
    return tuple(stages)


def keeps_baseline(sizes, stages: list[Stage]) -> bool:
    """Whether every chunk of a plan goes through the dimensions in the baseline's order
    (0, 1, ..., then back): the threshold kept it for each, or the plan gave way."""
    forward = [d for d in range(len(sizes)) if sizes[d] > 1]
    baseline = [(d, False) for d in forward] + [(d, True) for d in reversed(forward)]
    paths: dict[int, list] = {}
    for stage in stages:
        paths.setdefault(stage.chunk, []).append((stage.index, stage.dim, stage.gather))
    return all([(d, g) for _, d, g in sorted(path)] == baseline for path in paths.values())


def _run_time_s(sizes, stages: list[Stage], scheduler: str, timing: DimTiming) -> float:
    """A plan's time at run time, on stage_model.py's model."""
    paths: dict[int, list] = {}
    for stage in sorted(stages, key=lambda s: (s.chunk, s.index)):
        paths.setdefault(stage.chunk, []).append((stage.dim, stage.gather, stage.nbytes))
    tie_rank = {(s.chunk, s.index): n for n, s in enumerate(stages)}
    return run_time_s(sizes, [paths[c] for c in sorted(paths)], tie_rank, scheduler, timing)


def _plan(sizes, timing: DimTiming, chunk_bytes: Sequence[float], scheduler: str) -> list[Stage]:
    rates_bps = [timing.rate_bps(d) for d in range(len(sizes))]
    loads = [0.0] * len(sizes)
    paths = []  # per chunk: [(dim, gather, bytes)]
    for nbytes in chunk_bytes:
        order = chunk_order(loads, sizes, rates_bps, nbytes, scheduler)
        held, rs = nbytes, []
        for d in order:
            rs.append((d, False, held))
            held /= sizes[d]
        paths.append(rs + [(d, True, b) for d, _, b in reversed(rs)])
    free = {d: 0.0 for d in range(len(sizes))}  # when each dimension is next idle
    queues: dict[int, list] = {d: [] for d in range(len(sizes))}  # ready stages: (key, chunk, index, ready)
    done, out = 0, []
    total = sum(len(p) for p in paths)
    events: list[tuple] = []  # (time a stage becomes ready, chunk, index)
    for c, path in enumerate(paths):
        if path:
            heapq.heappush(events, (0.0, c, 0))

    def key(c, i, ready):
        d, _, nbytes = paths[c][i]
        return (nbytes, ready, c, i) if scheduler == "themis_scf" else (ready, c, i)

    now = 0.0
    while done < total:
        while events and events[0][0] <= now:
            ready, c, i = heapq.heappop(events)
            heapq.heappush(queues[paths[c][i][0]], (key(c, i, ready), c, i))
        started = False
        for d in sorted(queues, key=lambda d: (free[d], d)):
            if queues[d] and free[d] <= now:
                _, c, i = heapq.heappop(queues[d])
                dim, gather, nbytes = paths[c][i]
                end = now + (sizes[dim] - 1) / sizes[dim] * nbytes * 8 / rates_bps[dim]
                ready = end + timing.steps(dim, sizes[dim]) * timing.step_s[dim]
                out.append(Stage(c, i, dim, gather, nbytes, now, ready))
                free[dim] = end
                done += 1
                started = True
                if i + 1 < len(paths[c]):
                    heapq.heappush(events, (ready, c, i + 1))
        if not started:  # advance to the next ready stage or the next free dimension
            nxt = [t for t in (events[0][0] if events else None,) if t is not None]
            nxt += [free[d] for d in queues if queues[d] and free[d] > now]
            now = min(t for t in nxt if t > now) if any(t > now for t in nxt) else now
    return out
