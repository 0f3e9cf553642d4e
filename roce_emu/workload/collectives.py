"""Collectives as flows with dependencies (added to a DagBuilder).

Every algorithm works on a list of ranks (host ids) and the per-rank buffer of ``nbytes``
(NCCL's convention: all-reduce and reduce-scatter input, all-gather output, all-to-all
send buffer). The buffer is cut into ``chunks`` that pipeline: chunk c's flow at a step
waits for chunk c - 1's flow at the same step on the same rank, so chunk c - 1 moves on
to the next step (or phase) while chunk c takes its place. A flow waits for the data it
forwards: the step before it, received at its sender.

    ring              (p - 1) steps around the ring per reduce-scatter / all-gather
    halving_doubling  recursive halving (reduce-scatter) then doubling (all-gather), p = 2^k
    direct            every rank sends each other rank its share at once
    hierarchical      reduce-scatter along dimension 0, 1, ..., then all-gather back, inside each
                      dimension's groups by the dimension's algorithm (the ASTRA-sim / Themis
                      baseline): ring, ring_bidir or direct on a multi_dim fabric
                      (``topology.dim_algorithms``, dim_algorithms.py), ring on the others
    hierarchical_bidir  each chunk in two halves at once: one through the dimensions in order,
                      the other in reverse order (the wafer-scale mesh baseline of FRED)
    in_network        up a tree of switches that reduce each chunk, and down again
                      (fabric/reduction.py); also for reduce-scatter and all-gather
    tree              NCCL's double binary tree: half of each chunk reduced up one binary tree of
                      the ranks and broadcast down it, the other half on the complementary tree
    nvls              NCCL's NVLink SHARP, inside one node of a rail_optimized fabric: in_network
                      on the node's NVSwitch; all-reduce as NCCL runs it, a reduce-scatter onto the
                      GPUs (each the head of one slice) then an all-gather from them
    nvls_tree         NCCL's NVLS+Tree all-reduce over several nodes: the NVLS reduce-scatter
                      inside each node, the double binary tree across the nodes among the heads of
                      each slice (one rail each), then the NVLS all-gather inside each node

``channels`` (NCCL's channels) splits the buffer into shares that run at once, each as its own
instance of the algorithm on its own flows; even channels take the ranks in the order given, odd
channels in reverse order (a ring then runs the other way round). A collective's flows are posted
on its group's connection of their channel (``DagBuilder.connection``): with
``network.nic.queue_pair: channel`` (the default) the flows of one connection from one rank to
one peer go in order on one queue pair, as NCCL posts a channel's steps and chunks. Flows to and
from a switch's reduction unit (in_network, nvls) are on none: the reduction's slots and chunk
order pace them.

For all-to-all, ``direct`` sends all shares at once and ``ring`` is pairwise exchange:
at step s rank i sends to rank i + s, after its previous exchange completed. An all-to-all
with ``pair_bytes`` (all_to_allv: rank i sends rank j pair_bytes[i][j], as a MoE layer's token
dispatch does with uneven expert loads) runs directly, in one chunk and channel.
"""

from dataclasses import dataclass, field

import numpy as np

from ..fabric.reduction import NVLS
from .dag import DagBuilder
from .stage_model import DimTiming
from .themis import keeps_baseline, plan

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
#: the algorithms that run phase by phase through a fabric's dimensions (they need grid coordinates)
HIERARCHICAL = ("hierarchical", "hierarchical_bidir")
#: NCCL's bus-bandwidth factor f(n): busBW = algBW * f
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


@dataclass
class Collective:
    """What one expanded collective is made of (for collectives.csv and the iteration breakdown)."""

    name: str
    kind: str
    algorithm: str
    ranks: list
    nbytes: int
    chunks: int
    iteration: int
    group: int = 0  # which of the item's disjoint groups (e.g. one per tensor-parallel group)
    scheduler: str = "baseline"  # hierarchical: the order of dimensions (themis.py)
    flows: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # its flows' task ids
    flow_dim: np.ndarray | None = None  # hierarchical: the dimension each flow runs on
    dim_rates: tuple = ()  # hierarchical: each dimension's rate (b/s, its links in use), for its utilisation
    end: dict = field(default_factory=dict)  # rank -> join task done when that rank's part is
    channels: int = 1  # shares of nbytes run at once, each its own instance of the algorithm
    pair_bytes: list | None = None  # all_to_allv: [i][j] bytes from ranks[i] to ranks[j]; None: nbytes evenly


def split(total: int, parts: int) -> list[int]:
    """total bytes in parts that differ by at most one byte (the first ones larger)."""
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class _Expansion:
    """Adds one collective's flows to the builder and remembers them (ids, senders, receivers)."""

    def __init__(self, b: DagBuilder, c: Collective, prio: int, ready: dict, algorithms=()):
        self.b, self.c, self.prio = b, c, prio
        self.algorithms = algorithms  # hierarchical: each dimension's algorithm; (): ring
        self.ready = ready  # rank -> tasks its first sends wait for
        self.made: list[tuple] = []  # (ids, src, dst) per batch of flows
        self.singles: list[tuple] = []  # (id, src, dst) of flows added one at a time
        self.dim_of: list[tuple] = []  # hierarchical: (ids, dimension) per ring
        self.channel = 0  # the channel being added
        self.conn = -1  # the connection its flows are posted on: its group's, per channel (DagBuilder.connection)
        self.entered: dict = {}  # rank -> the task its first sends wait for (None: nothing), see starts

    def starts(self, ranks) -> dict:
        """rank -> the one task a chunk's first sends of that rank wait for (a join of its ready
        tasks if it has several, None if none); the first chunk's are also the rank's entry."""
        out = {r: _start_join(self.b, self.c, self.ready.get(r, [])) for r in ranks}
        for r, task in out.items():
            self.entered.setdefault(r, task)
        return out

    def flow(self, src: int, dst: int, nbytes: int, after, conn=None) -> int:
        """One flow, on the channel's connection unless ``conn`` says otherwise (-1: none)."""
        k = self.b.flow(
            src,
            dst,
            max(int(nbytes), 1),
            self.prio,
            self.c.name,
            self.c.iteration,
            after=[a for a in after if a is not None],
            conn=self.conn if conn is None else conn,
        )
        self.singles.append((k, src, dst))
        return k

    def flows(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
        """Many flows at once, in order; their predecessors are added with ``b.edges``."""
        self._batch_singles()
        ids = self.b.flows(src, dst, np.maximum(nbytes, 1), self.prio, self.c.name, self.c.iteration, self.conn)
        self.made.append((ids, src, dst))
        return ids

    def _batch_singles(self) -> None:
        if self.singles:
            self.made.append(tuple(np.array(column, np.int64) for column in zip(*self.singles)))
            self.singles = []

    def all_flows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, src, dst) of every flow added, in order."""
        self._batch_singles()
        if not self.made:
            return (np.zeros(0, np.int64),) * 3
        ids, src, dst = (np.concatenate(column).astype(np.int64) for column in zip(*self.made))
        return ids, src, dst


def expand(
    b: DagBuilder,
    c: Collective,
    prio: int,
    ready: dict,
    coords=None,
    dims=None,
    timing=None,
    reductions=None,
    algorithms=(),
) -> Collective:
    """Add collective c's flows to b; ready[rank] lists the tasks rank's part waits for.

    ``coords``/``dims`` (host grid coordinates) are needed by ``hierarchical``, which runs
    ``algorithms[k]`` in dimension k (ring where none is given), and a scheduler other than the
    baseline plans with ``timing`` (stage_model.DimTiming). ``in_network`` takes its trees from
    ``reductions`` (fabric.reduction.Reductions)."""
    x = _Expansion(b, c, prio, ready, algorithms)
    for channel, share in enumerate(split(c.nbytes, c.channels)):
        ranks = list(c.ranks) if channel % 2 == 0 else list(c.ranks)[::-1]
        _expand_channel(x, ranks, share, channel, ready, coords, dims, timing, reductions)
    # each rank's part is done when every flow it sends or receives is (in_network: flows
    # between switches' units come before some rank's flow)
    ids, src, dst = x.all_flows()
    _wait_to_enter(b, ids, src, dst, x.entered)
    c.end = {r: b.join(c.name, c.iteration) for r in c.ranks}
    end_of = _by_rank(c.end)
    for end in (src, dst):
        mine = end < len(end_of)
        b.edges(ids[mine], end_of[end[mine]])
    c.flows = ids
    if x.dim_of:
        where = {int(i): k for part, k in x.dim_of for i in part.tolist()}
        c.flow_dim = np.array([where[int(i)] for i in ids.tolist()], np.int64)
        c.dim_rates = tuple(timing.rate_bps(d) for d in range(len(timing.rates_bps))) if timing else ()
    return c


def _wait_to_enter(b: DagBuilder, ids: np.ndarray, src: np.ndarray, dst: np.ndarray, entered: dict) -> None:
    """Each flow waits for its sender and its receiver to have entered the collective (``entered``:
    rank -> the task its first sends wait for, or None): a rank takes part only once it has
    called the collective, its data ready. It forwards nothing before then, and, as NCCL's
    receivers post the buffers their senders write into when they enter, nothing is sent to it
    before then either. Where every rank enters at once this changes nothing; a late rank (a
    straggler) holds back what passes through it."""
    wait = np.full(max(entered, default=-1) + 1, -1, np.int64)
    for r, task in entered.items():
        if task is not None:
            wait[r] = task
    for end in (src, dst):
        mine = end < len(wait)  # in_network: a switch's reduction unit has not a rank's id
        mine[mine] = wait[end[mine]] >= 0
        b.edges(wait[end[mine]], ids[mine])


def _expand_channel(x: _Expansion, ranks, nbytes: int, channel: int, ready, coords, dims, timing, reductions):
    """One channel of collective x.c: its share of ``nbytes`` over ``ranks`` in their order,
    its chunks pipelined (each channel chains its own chunks)."""
    c = x.c
    x.channel = channel
    # NCCL's connection: one per communicator (the group of ranks), channel and peer
    x.conn = x.b.connection(("collective", tuple(sorted(c.ranks)), channel))
    p = len(ranks)
    per_chunk = split(nbytes, c.chunks)
    prev: dict = {}  # the previous chunk's flows per (phase, step, sender), or per ring phase and group
    planned = c.algorithm == "hierarchical" and c.scheduler != "baseline"
    if planned:
        planned = _hierarchical_planned(x, ranks, per_chunk, ready, coords, dims, timing)
    for chunk in range(0 if planned else c.chunks):
        size = per_chunk[chunk]
        starts = x.starts(ranks)
        if c.algorithm == "hierarchical":
            _hierarchical(x, ranks, size, starts, prev, coords, dims)
        elif c.algorithm == "hierarchical_bidir":
            for half, part in enumerate(split(size, 2)):
                _hierarchical(x, ranks, part, starts, prev, coords, dims, reverse=bool(half))
        elif c.kind == "all_to_all":
            (_a2a_direct if c.algorithm == "direct" else _a2a_pairwise)(x, ranks, size, starts, prev)
        elif c.algorithm == "ring":
            steps = {"all_reduce": 2 * (p - 1), "reduce_scatter": p - 1, "all_gather": p - 1}[c.kind]
            _ring(x, ranks, [size] * p, steps, starts, prev, phase="ring")
        elif c.algorithm == "halving_doubling":
            _halving_doubling(x, ranks, size, starts, prev)
        elif c.algorithm in NVLS and c.kind == "all_reduce":
            _nvls_all_reduce(x, node_groups(ranks, coords), size, starts, prev, reductions, channel * c.chunks + chunk)
        elif c.algorithm in ("in_network", "nvls"):
            _in_network(x, c.kind, ranks, size, starts, prev, reductions, channel * c.chunks + chunk)
        elif c.algorithm == "tree":
            _double_tree(x, ranks, size, starts, prev)
        else:
            _direct(x, c.kind, ranks, size, starts, prev)


def dag_size(c: Collective, dims=None, reductions=None, algorithms=()) -> tuple[int, int, int]:
    """(flows, joins, edges) that ``expand`` adds for collective c, counted without building
    them, for run/sizing.py to size a workload before it is built. The flows are exact; the
    joins and edges are what the expansion adds at most: per rank a start join (per chunk) and
    an end join, plus each algorithm's joins between phases; per flow, the step it forwards,
    the previous chunk's flow and its two ranks' end joins, plus a receive join between
    phases (hierarchical) or the previous exchange (pairwise all-to-all), or a second child's
    (tree). Each channel adds its chunks' flows as another chunk would. ``algorithms``: each
    dimension's, as expand's (ring_bidir runs two rings). The edges from each flow's two ranks'
    entries (_wait_to_enter) are size.workload_size's to count."""
    p, chunks = len(c.ranks), c.chunks * c.channels
    extra_edges, extra_joins = 0, 0
    if c.algorithm in HIERARCHICAL:
        halves = 2 if c.algorithm == "hierarchical_bidir" else 1
        # per phase, p / d groups of d ranks, d (d - 1) flows each (ring_bidir: twice); a reduce-scatter and an
        # all-gather per dimension
        rings = [2 if a == "ring_bidir" else 1 for a in (algorithms or ("ring",) * len(dims or ()))]
        per_chunk = 2 * halves * sum(n * p * (d - 1) for d, n in zip(dims or (), rings))
        extra_edges, extra_joins = 1, 2 * halves * len(dims or ()) * p
    elif c.algorithm == "halving_doubling":
        per_chunk = 2 * (p.bit_length() - 1) * p
    elif c.algorithm == "tree":  # two trees, every rank but the root sends up and receives down in each
        per_chunk, extra_edges = 4 * (p - 1), 2
    elif c.algorithm in NVLS and c.kind == "all_reduce":
        nodes = node_groups(c.ranks, reductions.fabric.host_coords)
        g, n = len(nodes[0]), len(nodes)
        # per chunk: the reduce-scatter and the all-gather, a flow up and one down per rank; the trees per rail
        switch_flows, tree_flows = chunks * 4 * p, chunks * 4 * g * (n - 1)
        if reductions.streaming and n == 1:  # per chunk: a start join per rank, an arrival join per phase
            return switch_flows, p + chunks * (p + 2), _streaming_edges(switch_flows // 2, switch_flows // 2, c.chunks)
        # per chunk: a start and a ready join per rank, an arrival and a freed join per node and phase
        joins = p + chunks * (2 * p + 4 * n)
        return switch_flows + tree_flows, joins, 4 * switch_flows + 6 * tree_flows
    elif c.algorithm in ("in_network", "nvls"):
        trees = [reductions.tree(c.ranks, k).inputs for k in range(chunks)]
        branches, points = sum(sum(map(len, tree.values())) for tree in trees), sum(map(len, trees))
        if reductions.streaming:  # a join per point, before its flows out
            return 2 * branches, p + chunks * p + points, _streaming_edges(branches, chunks * p, c.chunks)
        return 2 * branches, p + chunks * p + 2 * points, 4 * 2 * branches  # a join per point up and down
    else:  # ring, direct, all-to-all: every rank sends every other rank one share per ring step
        per_chunk = (2 if c.kind == "all_reduce" else 1) * p * (p - 1)
        extra_edges = int(c.kind == "all_to_all" and c.algorithm == "ring")
        extra_joins = p if c.kind == "all_reduce" and c.algorithm == "direct" else 0
    flows = chunks * per_chunk
    edges = flows * (3 + extra_edges) + (chunks - 1) * per_chunk
    return flows, p + chunks * (p + extra_joins), edges


def _streaming_edges(branches: int, ranks: int, chunks: int) -> int:
    """The most edges a streaming in-switch reduction adds for ``branches`` branches (a flow up and
    one down each), ``ranks`` of them a rank's, of collectives cut in ``chunks`` per channel: each
    flow waits for its start (one task) and, but in a channel's first chunk, the previous chunk's
    flow; the point's join waits for as many as the flow up; a rank's flows end at its end join."""
    return -(-branches * 3 * (2 * chunks - 1) // chunks) + 2 * ranks


def one_at_a_time(c: Collective) -> bool:
    """Whether ``expand`` adds c's flows one at a time (with Python objects per flow while it
    expands c) rather than a ring's or a dimension's flows as whole arrays."""
    return c.kind == "all_to_all" or c.algorithm not in ("ring", *HIERARCHICAL)


def _by_rank(tasks: dict) -> np.ndarray:
    """{rank: task id} as an array indexed by rank, to look many ranks up at once."""
    out = np.zeros(max(tasks) + 1, np.int64)
    out[list(tasks)] = list(tasks.values())
    return out


def _start_join(b: DagBuilder, c: Collective, waits):
    if not waits:
        return None
    if len(waits) == 1:
        return waits[0]
    return b.join(c.name, c.iteration, after=waits)


def _ring(x: _Expansion, ranks, totals, steps: int, starts, prev, phase):
    """Steps around the ring ranks[0] -> ranks[1] -> ...: at step s rank i sends segment
    (i - s) mod p of its buffer (totals[i] bytes, cut in p segments) to rank i + 1. Built a
    whole collective at a time: flow (s, i) waits for starts[ranks[i]] (s = 0) or for flow
    (s - 1, i - 1), which brought it the data, and for the previous chunk's flow (s, i).
    Returns the flows' ids, senders and receivers."""
    p = len(ranks)
    r = np.asarray(ranks, np.int64)
    pos = np.tile(np.arange(p), steps)
    step = np.repeat(np.arange(steps), p)
    base, extra = np.divmod(np.asarray(totals, np.int64), p)
    segs = base[:, None] + (np.arange(p) < extra[:, None])  # row i: split(totals[i], p)
    src, dst = r[pos], r[(pos + 1) % p]
    ids = x.flows(src, dst, segs[pos, (pos - step) % p])
    grid = ids.reshape(steps, p)
    firsts = [(starts[ranks[i]], grid[0, i]) for i in range(p) if starts.get(ranks[i]) is not None]
    before = [np.array([b for b, _ in firsts], np.int64)]
    after = [np.array([a for _, a in firsts], np.int64)]
    if steps > 1:  # what each later flow forwards came in the step before, from the position before
        before.append(grid[:-1, (np.arange(p) - 1) % p].ravel())
        after.append(grid[1:].ravel())
    key = (phase, ranks[0], p)  # a rank is in one ring group per phase
    earlier = prev.get(key)
    if earlier is not None:  # the previous chunk's flow at the same step and rank
        before.append(earlier.ravel())
        after.append(grid.ravel())
    prev[key] = grid
    x.b.edges(np.concatenate(before), np.concatenate(after))
    return ids, src, dst


def _halving_doubling(x: _Expansion, ranks, size, starts, prev):
    p = len(ranks)
    log = p.bit_length() - 1
    out = []
    last = {i: starts[ranks[i]] for i in range(p)}  # what each position waits for next
    held = size
    for k in range(log):  # recursive halving: exchange half of what is held, distance p/2, p/4, ...
        d = p >> (k + 1)
        held_next = held // 2
        now = {}
        for i in range(p):
            partner = i ^ d
            src, dst = ranks[i], ranks[partner]
            nbytes = held - held_next if i & d else held_next
            kf = x.flow(src, dst, nbytes, [last[i], prev.get(("hd", k, src))])
            prev[("hd", k, src)] = kf
            now[partner] = kf
            out.append(((src, dst), kf))
        last, held = now, held_next
    for k in range(log):  # recursive doubling: distance 1, 2, ..., sending what is held
        d = 1 << k
        now = {}
        for i in range(p):
            partner = i ^ d
            src, dst = ranks[i], ranks[partner]
            kf = x.flow(src, dst, size >> (log - k) if size >> log else 1, [last[i], prev.get(("hd", log + k, src))])
            prev[("hd", log + k, src)] = kf
            now[partner] = kf
            out.append(((src, dst), kf))
        last = now
    return out


def _all_pairs(x: _Expansion, ranks, nbytes, ready, prev, tag):
    """Every rank sends every other rank nbytes(i, j) at once, after ready[sender]."""
    out = []
    for i, src in enumerate(ranks):
        for j, dst in enumerate(ranks):
            if i != j:
                k = x.flow(src, dst, nbytes(i, j), [ready[src], prev.get((tag, src, dst))])
                prev[(tag, src, dst)] = k
                out.append(((src, dst), k))
    return out


def _direct(x: _Expansion, kind, ranks, size, starts, prev):
    """Reduce-scatter: rank i sends rank j its segment j; all-gather: rank i sends its segment
    to everyone (in all-reduce, once it holds every other rank's piece of it)."""
    seg = split(size, len(ranks))
    out = []
    ready_ag = starts
    if kind in ("reduce_scatter", "all_reduce"):
        out = _all_pairs(x, ranks, lambda i, j: seg[j], starts, prev, "rs")
        if kind == "reduce_scatter":
            return out
        into: dict[int, list[int]] = {r: [] for r in ranks}
        for (_, dst), k in out:
            into[dst].append(k)
        ready_ag = {r: x.b.join(x.c.name, x.c.iteration, after=into[r]) for r in ranks}
    return out + _all_pairs(x, ranks, lambda i, j: seg[i], ready_ag, prev, "ag")


def _a2a_direct(x: _Expansion, ranks, size, starts, prev):
    """Every rank sends each other rank its segment at once: an even share of ``size``, or with per-pair bytes
    (all_to_allv, one chunk and channel) pair_bytes[i][j]."""
    v = x.c.pair_bytes
    if v is not None:
        return _all_pairs(x, ranks, lambda i, j: v[i][j], starts, prev, "a2a")
    seg = split(size, len(ranks))
    return _all_pairs(x, ranks, lambda i, j: seg[j], starts, prev, "a2a")


def _a2a_pairwise(x: _Expansion, ranks, size, starts, prev):
    """Step s = 1..p-1: rank i sends to i + s once its step s - 1 send and receive are done."""
    p = len(ranks)
    seg = split(size, p)
    out = []
    sent = {i: starts[ranks[i]] for i in range(p)}
    got: dict[int, int | None] = {i: None for i in range(p)}
    for s in range(1, p):
        now_sent: dict[int, int] = {}
        now_got: dict[int, int | None] = {}
        for i in range(p):
            j = (i + s) % p
            src, dst = ranks[i], ranks[j]
            k = x.flow(src, dst, seg[j], [sent[i], got[i], prev.get(("pw", s, src))])
            prev[("pw", s, src)] = k
            now_sent[i] = k
            now_got[j] = k
            out.append(((src, dst), k))
        sent, got = now_sent, now_got
    return out


def _hierarchical(x: _Expansion, ranks, size, starts, prev, coords, dims, reverse=False):
    """Reduce-scatter by ring along dimension 0, then 1, ... (each on 1/p_k of the data the
    last left), then all-gather back from the last dimension to the first; ``reverse`` takes
    the dimensions the other way round (its phases chain apart from the forward ones)."""
    forward = list(range(len(dims)))[:: -1 if reverse else 1]
    order = forward + forward[::-1]
    held = {r: size for r in ranks}
    done = dict(starts)  # what each rank waits for before its next phase
    for phase, k in enumerate(order):
        key = ("h", phase) if not reverse else ("h_reverse", phase)
        done = _dimension_phase(x, ranks, k, phase >= len(dims), held, done, prev, key, coords)


def _hierarchical_planned(x: _Expansion, ranks, per_chunk, ready, coords, dims, timing: DimTiming) -> bool:
    """Hierarchical all-reduce in the chunks' dimension orders of a scheduler's plan
    (themis.py), its dimensions serving their stages in an order decided at run time. In each
    group of ranks a dimension forms a ring in, a stage waits until every rank of the group is
    ready for it, then for the group's dispatch queue of its phase (reduce-scatter or
    all-gather on that dimension), which serves one stage at a time: the first ready
    (``themis_fifo``) or the smallest (``themis_scf``), ties in the plan's order. The queue is
    free again once the stage's first ring step is through, so stages pipeline step by step,
    and every rank runs the later steps in the order the stages were dispatched (ordered
    queues, core/tasks.py), as the baseline chains its chunks. Returns False, having built
    nothing, when the plan gives every chunk the baseline's order (the baseline then runs)."""
    c = x.c
    stages = plan(dims, timing, per_chunk, c.scheduler)
    if keeps_baseline(dims, stages):
        return False
    held = [{r: per_chunk[k] for r in ranks} for k in range(c.chunks)]
    done = [x.starts(ranks) for _ in range(c.chunks)]
    smallest_first = c.scheduler == "themis_scf"
    for stage in stages:  # in the order the plan starts them: ties in the queues go that way
        done[stage.chunk] = _dimension_phase(
            x,
            ranks,
            stage.dim,
            stage.gather,
            held[stage.chunk],
            done[stage.chunk],
            {},  # the queues order the stages, not chains to the previous chunk's
            ("dim", stage.dim, stage.gather),
            coords,
            dispatch_key=int(stage.nbytes) if smallest_first else 0,
        )
    return True


def _dimension_phase(x: _Expansion, ranks, k, gather, held, done, prev, phase, coords, dispatch_key=None):
    """One reduce-scatter (or all-gather) along dimension k: the dimension's algorithm in every
    group of ranks that differ only in coordinate k, on what each rank holds (updated). Returns
    what each rank's next phase waits for: everything it received in this one. With
    ``dispatch_key``, each group's exchange goes through the runtime queues of
    _hierarchical_planned instead of waiting for the previous chunk's exchange of the phase."""
    algorithm = x.algorithms[k] if x.algorithms else "ring"
    groups: dict[tuple, list[int]] = {}
    for r in ranks:
        groups.setdefault(coords[r][:k] + coords[r][k + 1 :], []).append(r)
    received = []  # (ids, receivers) of this phase's rings
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda r: coords[r][k])
        if len(group) < 2:
            continue
        totals = [held[r] * len(group) for r in group] if gather else [held[r] for r in group]
        if dispatch_key is None:
            ids, _, dst, _ = _exchange(x, group, totals, done, prev, phase, algorithm, gather)
        else:
            ids, dst = _dispatched(x, group, totals, done, phase, key, dispatch_key, algorithm, gather)
        x.dim_of.append((ids, k))
        received.append((ids, dst))
        for r in group:
            held[r] = totals[group.index(r)] if gather else totals[group.index(r)] // len(group)
    if not received:
        return done
    ids, dst = (np.concatenate(column) for column in zip(*received))
    receivers = set(dst.tolist())
    joins = {r: x.b.join(x.c.name, x.c.iteration) for r in set(ranks) if r in receivers}
    x.b.edges(ids, _by_rank(joins)[dst])
    return {r: joins.get(r, done[r]) for r in set(ranks)}


def _exchange(x: _Expansion, group, totals, starts, prev, phase, algorithm: str, gather: bool):
    """One group's reduce-scatter (``totals``: what each rank holds) or all-gather (``totals``:
    what each rank holds after it) by ``algorithm`` (dim_algorithms.py). Returns the flows' ids,
    senders, receivers and step, in step order."""
    p = len(group)
    if algorithm == "direct":
        return _direct_exchange(x, group, totals, starts, prev, phase, gather)
    rings = [(group, totals)]
    if algorithm == "ring_bidir":  # half of every rank's data each way round
        halves = [split(t, 2) for t in totals]
        rings = [(group, [h[0] for h in halves]), (group[::-1], [h[1] for h in halves][::-1])]
    made = [_ring(x, members, part, p - 1, starts, prev, phase=phase) for members, part in rings]
    step = np.repeat(np.arange(p - 1), p)
    ids, src, dst = (np.concatenate(column) for column in zip(*made))
    return ids, src, dst, np.concatenate([step] * len(made))


def _direct_exchange(x: _Expansion, group, totals, starts, prev, phase, gather: bool):
    """Every rank of the group sends every other rank at once: in a reduce-scatter rank i sends
    rank j segment j of what it holds; in an all-gather its own segment. A flow waits for its
    sender's start and for the previous chunk's flow between the same two ranks."""
    p = len(group)
    r = np.asarray(group, np.int64)
    i, j = (a.ravel() for a in np.meshgrid(np.arange(p), np.arange(p), indexing="ij"))
    i, j = i[i != j], j[i != j]
    base, extra = np.divmod(np.asarray(totals, np.int64), p)
    segs = base[:, None] + (np.arange(p) < extra[:, None])  # row i: split(totals[i], p)
    ids = x.flows(r[i], r[j], segs[i, i] if gather else segs[i, j])
    firsts = [(starts[group[a]], ids[n]) for n, a in enumerate(i.tolist()) if starts.get(group[a]) is not None]
    before = [np.array([b for b, _ in firsts], np.int64)]
    after = [np.array([a for _, a in firsts], np.int64)]
    key = (phase, group[0], p, "direct")
    earlier = prev.get(key)
    if earlier is not None:  # the previous chunk's flow between the same ranks
        before.append(earlier)
        after.append(ids)
    prev[key] = ids
    x.b.edges(np.concatenate(before), np.concatenate(after))
    return ids, r[i], r[j], np.zeros(len(ids), np.int64)


def _dispatched(x: _Expansion, group, totals, done, phase, where, dispatch_key, algorithm: str, gather: bool):
    """One stage's exchange in one group, through the group's runtime queues: a gate that waits
    for the whole group and is dispatched by the group's queue of the phase, freed when the
    first step is through; the later steps in each sender's ordered queue of that step (one per
    direction round the ring)."""
    gate = x.b.join(x.c.name, x.c.iteration, after=[done[r] for r in group if done[r] is not None])
    ids, src, dst, step = _exchange(x, group, totals, {r: gate for r in group}, {}, phase, algorithm, gather)
    first_step = x.b.join(x.c.name, x.c.iteration, after=ids[step == 0])
    name = (id(x.c), x.channel)  # the collective's own queues, per channel
    x.b.dispatched([gate], x.b.queue_ids([(name, phase, where)], ordered=False), dispatch_key, [first_step])
    later = np.flatnonzero(step > 0)
    if len(later):
        way = np.arange(len(ids)) >= len(ids) // 2 if algorithm == "ring_bidir" else np.zeros(len(ids), bool)
        keys: list[tuple] = [(name, phase, int(j), int(r)) for j, r in zip(step[later], src[later])]
        keys = [k + (1,) if w else k for k, w in zip(keys, way[later])]
        x.b.ordered(ids[later], x.b.queue_ids(keys, ordered=True), gate)
    return ids, dst


def binary_tree_parents(p: int) -> list[int]:
    """The parent of each position 0..p-1 in NCCL's binary tree (ncclGetBtree): position r's
    lowest set bit b decides its height, its parent is (r - b) + 2b, or r - b where that is
    past the last position; position 0 is the root (with one child). The odd positions are
    the leaves."""
    parents = [-1] * p
    for r in range(1, p):
        bit = r & -r
        up = (r ^ bit) | (bit << 1)
        parents[r] = up if up < p else r ^ bit
    return parents


def double_binary_tree(p: int) -> tuple[list[int], list[int]]:
    """NCCL's two complementary trees over positions 0..p-1 (ncclGetDtree), as parent lists:
    the binary tree, and the same tree mirrored (position r in the place of p - 1 - r) for even
    p or shifted by one position for odd p, so that a leaf of one tree is (nearly always) an
    inner node of the other and every rank sends and receives about as much as any other."""
    first = binary_tree_parents(p)
    if p % 2 == 0:
        second = [-1 if first[p - 1 - r] < 0 else p - 1 - first[p - 1 - r] for r in range(p)]
    else:
        second = [-1 if first[(r - 1) % p] < 0 else (first[(r - 1) % p] + 1) % p for r in range(p)]
    return first, second


def _double_tree(x: _Expansion, ranks, size, starts, prev) -> dict:
    """One chunk of an All-Reduce on NCCL's double binary tree: each tree carries half of it.
    Up: a rank sends its parent the chunk's half once it has it from every child (a leaf at
    once), the reduction of its subtree. Down: the root, having heard from all its children,
    sends each child the result, and a rank passes on what its parent sent. Each flow also
    waits for the previous chunk's flow between the same two ranks in the same tree and
    direction, so the chunks pipeline up and down the trees. Returns, per rank, the tasks
    after which it holds the whole result."""
    done: dict[int, list] = {r: [] for r in ranks}
    for t, (parents, half) in enumerate(zip(double_binary_tree(len(ranks)), split(size, 2))):
        children: dict[int, list[int]] = {i: [] for i in range(len(ranks))}
        for i, up in enumerate(parents):
            if up >= 0:
                children[up].append(i)

        def reduce_up(i: int) -> list:
            """The flows into position i from its children (each after their own subtree's)."""
            into = []
            for child in children[i]:
                src, dst = ranks[child], ranks[parents[child]]
                after = [starts[src], *reduce_up(child), prev.get(("tree_up", t, src))]
                prev[("tree_up", t, src)] = into_k = x.flow(src, dst, half, after)
                into.append(into_k)
            return into

        def broadcast_down(i: int, ready: list) -> None:
            for child in children[i]:
                src, dst = ranks[i], ranks[child]
                k = x.flow(src, dst, half, [*ready, prev.get(("tree_down", t, dst))])
                prev[("tree_down", t, dst)] = k
                done[dst].append(k)
                broadcast_down(child, [k])

        root = parents.index(-1)
        at_root = [starts[ranks[root]], *reduce_up(root)]
        done[ranks[root]] += [k for k in at_root if k is not None]
        broadcast_down(root, at_root)
    return done


def _in_network(
    x: _Expansion, kind, ranks, size, starts, prev, reductions, chunk: int, phase="in_network", fed=None
) -> dict:
    """One chunk up its reduction tree and down again (fabric/reduction.py); returns, per rank,
    the flow that brings it its result.

    Up: every branch of a point sends the point its data: a rank its chunk, a point below its
    reduced chunk. Down: the root's result goes to every branch, and a point below passes it
    on. All-reduce moves the chunk up and down every branch; reduce-scatter sends down only the
    segments of the ranks under the branch, all-gather sends up only theirs (the switch
    concatenates). Flows keep their sender's chunk order (each waits for the previous chunk's
    flow between the same two ends in the same ``phase``).

    Streaming (reductions.streaming): a point's flows out start with its flows in and are
    gated packet by packet (DagBuilder.gate, core/stream.py): a point below sends up, and the
    root sends down, as far as every branch's data has arrived; a point below sends down as
    far as the result has come down to it. A member (rank, or point below) sends at most
    ``reductions.slots`` packets ahead of the result that point has sent back to it. ``fed``
    (rank -> flow): a rank's data arrives at it by that flow, and it sends it up as it comes.

    Store-and-forward: a point sends its result once all of it arrived from every branch, and
    holds at most ``reductions.slots`` chunks of a phase: a chunk's flows into a point wait
    until the point sent the result of the chunk that many before it down."""
    tree = reductions.tree(ranks, chunk)
    seg = dict(zip(ranks, split(size, len(ranks))))
    streaming = reductions.streaming
    delivered: dict = {}
    into: dict = {}  # point -> the flows of chunk into it, in its branches' order

    def part(v):
        return sum(seg[r] for r in tree.ranks[v])

    up_bytes = part if kind == "all_gather" else (lambda v: size)
    down_bytes = part if kind == "reduce_scatter" else (lambda v: size)

    def sender_of(src):
        return src if src in seg else tree.uplink[src]

    def gather(q):
        """Flows of chunk into point q from its branches; returns what the flows out of q wait
        for: the join of their arrival, or (streaming) of everything they wait for to start."""
        into[q], waited = [], []
        for neighbour, src in tree.inputs[q]:
            waits = [starts[src]] if src in seg else [gather(src)]
            sender, unit = sender_of(src), reductions.unit(q, neighbour)
            waits.append(prev.get((phase, "up", sender, unit)))
            if not streaming:
                waits.append(prev.get((phase, "free", q, chunk - reductions.slots)))
            k = x.flow(sender, unit, up_bytes(src), waits, conn=-1)
            prev[(phase, "up", sender, unit)] = k
            if streaming and src not in seg:
                x.b.gate(k, into[src])
            elif streaming and fed:
                x.b.gate(k, [fed[src]])
            into[q].append(k)
            waited += [w for w in waits if w is not None]
        return x.b.join(x.c.name, x.c.iteration, after=waited if streaming else into[q])

    def scatter(q, ready, feed=None):
        """Flows of chunk's result from point q down to its branches, after ``ready``; ``feed``:
        the flow that brings q's result down to it (None at the root)."""
        sent = []
        for (neighbour, src), up in zip(tree.inputs[q], into[q]):
            unit, receiver = reductions.unit(q, neighbour), sender_of(src)
            k = x.flow(unit, receiver, down_bytes(src), [ready, prev.get((phase, "down", unit, receiver))], conn=-1)
            prev[(phase, "down", unit, receiver)] = k
            sent.append(k)
            if streaming:
                x.b.gate(k, into[q] if feed is None else [feed])
                x.b.gate(up, [k], reductions.slots)
            if src in seg:
                delivered[src] = k
            else:
                scatter(src, ready if streaming else k, k)
        if not streaming:
            prev[(phase, "free", q, chunk)] = x.b.join(x.c.name, x.c.iteration, after=sent)

    scatter(tree.root, gather(tree.root))
    return delivered


def node_groups(ranks, coords) -> list[list[int]]:
    """The ranks of a rail_optimized fabric node by node (a GPU's coordinate is (gpu, node)),
    the nodes in the order their first rank comes in ``ranks``, each node's GPUs in the order
    of the first node's: position i of every node is the same GPU, on the same rail. Every
    node holds the same GPUs (fabric.reduction.check_nvls)."""
    nodes: dict[int, dict[int, int]] = {}
    for r in ranks:
        gpu, node = coords[r]
        nodes.setdefault(node, {})[gpu] = r
    gpus = list(next(iter(nodes.values())))
    return [[node[g] for g in gpus] for node in nodes.values()]


def _nvls_all_reduce(x: _Expansion, nodes, size, starts, prev, reductions, chunk: int):
    """One chunk of NCCL's NVLS (one node) or NVLS+Tree (several) All-Reduce. In each node the
    NVSwitch reduces the chunk and sends GPU i the i-th slice of the result: an in_network
    reduce-scatter, every GPU sending the whole chunk up once. Across nodes, the GPUs at
    position i (one rail) all-reduce slice i on NCCL's double binary tree. Then each GPU sends
    its slice up once and the NVSwitch multicasts it to the node: an in_network all-gather. A
    GPU sends (1 + 1/g) of the chunk into the switch and gets as much back (g GPUs a node)."""
    held = {}  # rank -> the flows after which it holds its reduced slice
    for node in nodes:
        got = _in_network(x, "reduce_scatter", node, size, starts, prev, reductions, chunk, phase="nvls_rs")
        held.update({r: [k] for r, k in got.items()})
    if len(nodes) > 1:
        for i, part in enumerate(split(size, len(nodes[0]))):
            heads = [node[i] for node in nodes]
            held.update(_double_tree(x, heads, part, {r: _start_join(x.b, x.c, held[r]) for r in heads}, prev))
    if reductions.streaming and len(nodes) == 1:  # the slices go up again as they come down
        _in_network(x, "all_gather", nodes[0], size, starts, prev, reductions, chunk, "nvls_ag", fed=got)
        return
    ready = {r: _start_join(x.b, x.c, tasks) for r, tasks in held.items()}
    for node in nodes:
        _in_network(x, "all_gather", node, size, ready, prev, reductions, chunk, phase="nvls_ag")
