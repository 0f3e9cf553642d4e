"""A Chakra execution trace (``workload.chakra``) as the task DAG.

Each rank's nodes become tasks on that rank's host, in dependency order:

- COMP: a compute task of ``duration_micros`` (or ``num_ops`` FLOPs at ``device_tflops``);
- COMM_COLL with a ``comm_type`` roce-emu runs (all-reduce, all-gather, reduce-scatter,
  all-to-all) and a ``comm_size``: one collective over the ranks of its group, matched across
  ranks by order (the k-th collective of a group on every rank is the same collective). The
  group is every rank, or with ``involved_dim`` the ranks that share their coordinates in the
  dimensions the collective does not span (on a ``multi_dim`` fabric);
- COMM_SEND / COMM_RECV: one flow from the sender, matched with the receive by (source,
  destination, tag) in order; the receive is done when the flow has arrived and its own
  dependencies are;
- anything else (other collective types, collectives without type or size, memory and
  metadata nodes): a zero-time point that keeps the dependencies, counted in the notes.

``data_deps`` and ``ctrl_deps`` both become edges. Dependencies on nodes the file does not
hold are dropped, and counted. Iterations repeat the trace; a rank's next iteration starts
when all of its previous one has finished.
"""

import heapq
from collections import Counter, defaultdict, deque

import numpy as np

from ..config.schema import ALGORITHMS
from ..errors import ScenarioError
from ..importers.chakra import COLLECTIVES, TraceNode, read_traces
from ..fabric.reduction import check_reducing
from .collectives import HIERARCHICAL, Collective, expand
from .dag import DagBuilder

PS_PER_US = 1_000_000


def _order(path, nodes: list[TraceNode], notes: Counter) -> list[TraceNode]:
    """The nodes in dependency order (the smallest id first among the ready ones); each node's
    ``deps`` are the dependencies kept.

    Dependencies on nodes the file does not hold are dropped. Converted PyTorch traces can
    hold cycles through control dependencies (a CPU operator waiting for the kernel it
    launched, which waits for its data); where nothing is ready, the smallest-id node whose data
    dependencies are met goes ahead without its control dependencies left. Both are counted
    in the notes. A cycle of data dependencies is an error."""
    by_id = {}
    for n in nodes:
        if n.id in by_id:
            raise ScenarioError(str(path), f"node {n.id}", "the node id is used twice")
        by_id[n.id] = n
    waiting = {}  # node id -> [data deps unmet, control deps unmet]
    after = defaultdict(list)  # node id -> (dependent, is_data)
    for n in nodes:
        data = [d for d in dict.fromkeys(n.data_deps) if d in by_id and d != n.id]
        ctrl = [d for d in dict.fromkeys(n.ctrl_deps) if d in by_id and d != n.id and d not in data]
        notes["dependencies on nodes the trace does not hold: dropped"] += (
            len(set(n.data_deps) | set(n.ctrl_deps)) - len(data) - len(ctrl)
        )
        waiting[n.id] = [len(data), len(ctrl)]
        for d in data:
            after[d].append((n.id, True))
        for d in ctrl:
            after[d].append((n.id, False))
        n.deps = []
    ready = sorted(i for i, (dw, cw) in waiting.items() if dw == cw == 0)
    out: list = []
    released: set = set()
    while len(out) < len(nodes):
        if not ready:
            stuck = [i for i, (dw, cw) in waiting.items() if i not in released and dw == 0 and cw > 0]
            if not stuck:
                first = min(i for i, (dw, _) in waiting.items() if dw > 0)
                raise ScenarioError(str(path), f"node {first}", "its data dependencies form a cycle")
            i = min(stuck)
            notes["control dependencies that closed a cycle: dropped"] += waiting[i][1]
            waiting[i][1] = 0
            heapq.heappush(ready, i)
        i = heapq.heappop(ready)
        released.add(i)
        out.append(by_id[i])
        for j, is_data in after[i]:
            if j in released:
                continue  # went ahead without this control dependency
            by_id[j].deps.append(i)
            waiting[j][0 if is_data else 1] -= 1
            if waiting[j] == [0, 0]:
                heapq.heappush(ready, j)
    return out


class _Rank:
    def __init__(self, rank, host, path, order):
        self.rank, self.host, self.path, self.order = rank, host, path, order
        self.pos = 0
        self.done = {}  # node id -> task id (this iteration)
        self.coll_seen = Counter()  # group -> collectives met so far


def add_chakra(b: DagBuilder, spec, fabric, prio: int, iterations: int, source: str, reductions=None):
    """Add the trace's tasks to the builder; (collectives, iteration ends, notes)."""
    traces = read_traces(spec.prefix)
    n_ranks = len(traces)
    hosts = list(spec.ranks) if spec.ranks is not None else list(range(n_ranks))
    if len(hosts) != n_ranks:
        raise ScenarioError(
            source, "workload.chakra.ranks", f"{len(hosts)} hosts for {n_ranks} trace files (one host per rank)"
        )
    if len(set(hosts)) != len(hosts):
        raise ScenarioError(source, "workload.chakra.ranks", "each host may take one rank only")
    for r, h in enumerate(hosts):
        if not 0 <= h < fabric.n_hosts:
            key = f"workload.chakra.ranks.{r}" if spec.ranks is not None else "workload.chakra.prefix"
            raise ScenarioError(
                source, key, f"rank {r} needs host {h}; host ids run from 0 to {fabric.n_hosts - 1} on this topology"
            )
    notes: Counter = Counter()
    ranks = [_Rank(r, hosts[r], path, _order(path, nodes, notes)) for r, (path, nodes) in enumerate(traces)]
    collectives: list = []
    ends: list = []
    previous: dict = {}
    for it in range(iterations):
        _one_iteration(b, spec, fabric, prio, it, ranks, previous, collectives, notes, source, reductions)
        previous = {}
        for rk in ranks:
            depended = {d for n in rk.order for d in n.deps}
            sinks = [rk.done[n.id] for n in rk.order if n.id not in depended]
            previous[rk.rank] = b.join("iteration", it, after=sinks)
        ends.append({ranks[r].host: k for r, k in previous.items()})
    text = [f"{count} {what}" for what, count in sorted(notes.items()) if count]
    return collectives, ends, text


def _group(node: TraceNode, rk: _Rank, ranks: list[_Rank], fabric) -> tuple:
    """The ranks a collective spans: all, or those sharing rk's coordinates outside involved_dim."""
    dims = node.involved_dim
    if not dims or all(dims):
        return tuple(range(len(ranks)))
    if not fabric.dims or len(dims) != len(fabric.dims) or fabric.host_coords is None:
        raise ScenarioError(
            str(rk.path), f"node {node.id}", f"involved_dim {dims} needs a multi_dim fabric of {len(dims)} dimensions"
        )
    coords = [np.asarray(fabric.host_coords[r.host]) for r in ranks]
    fixed = [d for d, on in enumerate(dims) if not on]
    mine = coords[rk.rank][fixed]
    return tuple(r for r in range(len(ranks)) if np.array_equal(coords[r][fixed], mine))


def _one_iteration(b, spec, fabric, prio, it, ranks, previous, collectives, notes, source, reductions):
    for rk in ranks:
        rk.pos = 0
        rk.done = {}
        rk.coll_seen = Counter()
    pending = {}  # (group, k) -> {rank: (node, waits)}
    sends = defaultdict(deque)  # (src rank, dst rank, tag) -> flow task ids
    left = sum(len(rk.order) for rk in ranks)
    while left:
        progress = 0
        for rk in ranks:
            while rk.pos < len(rk.order):
                node = rk.order[rk.pos]
                if any(d not in rk.done for d in node.deps):
                    break  # waits for a collective or a receive not yet matched
                waits = [rk.done[d] for d in node.deps] or ([previous[rk.rank]] if rk.rank in previous else [])
                kind = COLLECTIVES.get(node.comm_type) if node.type == "COMM_COLL_NODE" else None
                if kind is not None and node.comm_size > 0:
                    if node.pg_name:
                        notes[
                            "collectives naming a process group (pg_name): roce-emu does not read ASTRA-sim's "
                            "communicator-group file; they span all ranks, or involved_dim's group"
                        ] += 1
                    group = _group(node, rk, ranks, fabric)
                    if len(group) > 1:
                        key = (group, rk.coll_seen[group])
                        rk.coll_seen[group] += 1
                        pending.setdefault(key, {})[rk.rank] = (node, waits)
                        rk.pos += 1
                        continue  # done when the collective is expanded
                    notes["collectives over one rank: zero time"] += 1
                elif node.type == "COMM_COLL_NODE":
                    what = node.comm_type or "without comm_type"
                    notes[
                        f"COMM_COLL nodes {what}{'' if node.comm_size > 0 else ' or comm_size'}: no roce-emu "
                        f"equivalent, kept as zero-time dependency points"
                    ] += 1
                if node.type == "COMM_RECV_NODE":
                    queue = sends[(node.peer, rk.rank, node.tag)]
                    if not queue:
                        break  # the matching send is not there yet
                    waits = waits + [queue.popleft()]
                task = _task(b, node, rk, ranks, waits, prio, it, spec, notes)
                rk.done[node.id] = task
                if node.type == "COMM_SEND_NODE":
                    sends[(rk.rank, node.peer, node.tag)].append(task)
                rk.pos += 1
                left -= 1
                progress += 1
        for key in [k for k, parts in pending.items() if len(parts) == len(k[0])]:
            parts = pending.pop(key)
            _expand(b, key, parts, ranks, spec, fabric, prio, it, collectives, source, reductions)
            left -= len(parts)
            progress += 1
        if not progress:
            raise _stuck(ranks, pending)


def _task(b, node, rk, ranks, waits, prio, it, spec, notes) -> int:
    if node.type == "COMP_NODE":
        if node.duration_us > 0:
            ps = node.duration_us * PS_PER_US
        elif node.num_ops > 0 and spec.device_tflops:
            ps = int(round(node.num_ops / (spec.device_tflops * 1e12) * 1e12))
        else:
            ps = 0
            notes["COMP nodes without duration_micros (or num_ops with device_tflops): zero time"] += 1
        return b.compute(rk.host, ps, node.name or f"node{node.id}", it, after=waits)
    if node.type == "COMM_SEND_NODE":
        if not 0 <= node.peer < len(ranks) or node.peer == rk.rank or node.comm_size <= 0:
            raise ScenarioError(
                str(rk.path),
                f"node {node.id}",
                f"COMM_SEND needs comm_dst (a rank 0-{len(ranks) - 1} other than {rk.rank}) and comm_size > 0",
            )
        return b.flow(
            rk.host, ranks[node.peer].host, node.comm_size, prio, node.name or f"send{node.id}", it, after=waits
        )
    if node.type not in ("COMM_COLL_NODE", "COMM_RECV_NODE"):
        notes[f"{node.type} nodes: no roce-emu equivalent, kept as zero-time dependency points"] += 1
    return b.join(node.name or f"node{node.id}", it, after=waits)


def _expand(b, key, parts, ranks, spec, fabric, prio, it, collectives, source, reductions):
    group, k = key
    first = parts[group[0]][0]
    kind = COLLECTIVES[first.comm_type]
    for r in group:
        node = parts[r][0]
        if (node.comm_type, node.comm_size) != (first.comm_type, first.comm_size):
            raise ScenarioError(
                str(ranks[r].path),
                f"node {node.id}",
                f"collective {k} of ranks {list(group)} is "
                f"{node.comm_type} of {node.comm_size} B here but {first.comm_type} of "
                f"{first.comm_size} B on rank {group[0]} (node {first.id})",
            )
    algorithm = spec.algorithms.get(kind, ALGORITHMS[kind][0])
    if algorithm not in ALGORITHMS[kind]:
        raise ScenarioError(
            source,
            f"workload.chakra.algorithms.{kind}",
            f"'{algorithm}' is not allowed for {kind} (allowed: {', '.join(ALGORITHMS[kind])})",
        )
    hosts = [ranks[r].host for r in group]
    if algorithm == "halving_doubling" and len(hosts) & (len(hosts) - 1):
        raise ScenarioError(
            source,
            f"workload.chakra.algorithms.{kind}",
            f"halving_doubling needs a power-of-two group, not {len(hosts)} ranks",
        )
    if algorithm in HIERARCHICAL and sorted(hosts) != list(range(fabric.n_hosts)):
        raise ScenarioError(
            source,
            f"workload.chakra.algorithms.{kind}",
            "hierarchical runs over all hosts of a multi_dim, torus or mesh fabric",
        )
    key = f"workload.chakra.algorithms.{kind}"
    check_reducing(fabric, algorithm, hosts, source, key, hosts_key=key)
    nbytes = max(first.comm_size, len(hosts))  # at least a byte per rank
    # the group's first rank tells disjoint groups apart; k tells a group's collectives apart
    c = Collective(f"{(first.name or kind)[:60]}#{k}", kind, algorithm, hosts, nbytes, 1, it, group=min(hosts))
    waits = {ranks[r].host: parts[r][1] for r in group}
    expand(b, c, prio, waits, fabric.host_coords, fabric.dims, reductions=reductions, algorithms=fabric.dim_algorithms)
    collectives.append(c)
    for r in group:
        ranks[r].done[parts[r][0].id] = c.end[ranks[r].host]


def _stuck(ranks, pending) -> ScenarioError:
    """No rank can go on: a collective some ranks never reach, or a receive without its send."""
    for (group, k), parts in sorted(pending.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        missing = [r for r in group if r not in parts]
        node = next(iter(parts.values()))[0]
        return ScenarioError(
            str(ranks[missing[0]].path),
            "",
            f"collective {k} of ranks {list(group)} "
            f"({node.comm_type} of {node.comm_size} B, node {node.id} on rank {min(parts)}) "
            f"never comes on rank {missing[0]}",
        )
    rk = next(r for r in ranks if r.pos < len(r.order))
    node = rk.order[rk.pos]
    return ScenarioError(
        str(rk.path),
        f"node {node.id}",
        f"{node.type} waits for a send from rank {node.peer} with tag {node.tag} that never comes",
    )
