"""Workload section -> the task DAG: explicit flows, expanded patterns, collectives and compute.

Flows and patterns start at their ``start_ns``. Collectives and compute tasks form one
iteration, repeated ``iterations`` times: an item waits per rank for the items named in
its ``after`` (the same rank's part, or the whole item if the rank took no part), and an
item without ``after`` waits for the rank's previous iteration.
"""

from dataclasses import dataclass, field, replace

import networkx as nx
import numpy as np

from ..config.schema import ALGORITHMS, Scenario
from ..errors import ScenarioError
from ..fabric.reduction import Reductions, check_reducing
from ..fabric.topology import Fabric
from ..units import ns_to_ps
from .background import poisson_flows
from .. import streams
from . import dim_algorithms
from .collectives import HIERARCHICAL, Collective, expand
from .dag import DagBuilder, FlowTable, GateTable, TaskTable, has_cycle
from .inference import Requests, add_inference, inference_hosts
from .items import Item
from .stage_model import DimTiming
from .stragglers import compute_durations, straggling_ranks
from .training import training_hosts, training_items


@dataclass
class Workload:
    flows: FlowTable
    tasks: TaskTable
    collectives: list = field(default_factory=list)  # Collective, task ids final
    iteration_ends: list = field(default_factory=list)  # per iteration: {rank: join task id}
    notes: list = field(default_factory=list)  # what an imported trace held that has no equivalent
    units: list = field(default_factory=list)  # (switch, neighbour) of each reduction unit, fabric/reduction.py
    gates: GateTable | None = None  # streaming in-switch reduction's per-packet gates (core/stream.py)
    #: scenario jobs (workload/jobs.py): each task's job, an index into ``jobs`` (final ids); None without jobs
    job: np.ndarray | None = None
    jobs: list = field(default_factory=list)  # jobs.JobPart per job
    start_ps: int = 0  # the first iteration's window starts here (a job's start)
    own: np.ndarray | None = None  # a job's view (jobs.job_view): the tasks that are the job's; None: all
    stragglers: list = field(default_factory=list)  # {rank, host, factor} of each straggling rank (stragglers.py)
    requests: Requests = field(default_factory=Requests)  # inference requests (inference.py), final task ids

    def __len__(self) -> int:
        return len(self.flows)

    def own_tasks(self) -> np.ndarray:
        """True for each task this workload (or this job's view of it) counts as its own."""
        return np.ones(len(self.tasks), bool) if self.own is None else self.own


def collective_flow_mask(workload: Workload) -> np.ndarray:
    """True for each flow that belongs to a collective."""
    mask = np.zeros(len(workload.flows), bool)
    for c in workload.collectives:
        mask[c.flows] = True
    return mask


NOTHING_TO_DO = "nothing to do: give flows, patterns, collectives, compute, training, chakra or inference"


def build_workload(scenario: Scenario, fabric: Fabric, source: str, items: list[Item] | None = None) -> Workload:
    """Expand the workload into the task DAG; check host ids, names and sizes against the fabric.
    In-network collectives name the switch reduction units they use by provisional ids, listed in
    ``units`` (fabric.reduction.place_units adds them to the fabric). ``items``: workload_items'
    result if the caller has it (the size count made before building does), else made here. A
    scenario with jobs is built job by job (jobs.build_jobs). The scenario's stragglers and
    compute jitter then set the compute tasks' durations (stragglers.py)."""
    if scenario.jobs:
        from .jobs import build_jobs  # which builds each job with this module

        workload = build_jobs(scenario, fabric, source)
    else:
        b = DagBuilder()
        reductions = Reductions(fabric, scenario.network.switch)
        part = add_workload(b, scenario, fabric, source, reductions, items)
        if len(b) == 0:
            raise ScenarioError(source, "workload", NOTHING_TO_DO)
        workload = finish_workload(b, source, reductions, [part])[0]
    workload.stragglers = straggling_ranks(scenario, fabric.n_hosts, source)
    durations = compute_durations(workload.tasks, scenario, workload.stragglers, source)
    if durations is not None:
        workload.tasks = replace(workload.tasks, duration_ps=durations)
    return workload


@dataclass
class WorkloadPart:
    """What add_workload added to a DagBuilder, in provisional task ids."""

    collectives: list
    iteration_ends: list
    notes: list
    requests: Requests = field(default_factory=Requests)


def add_workload(
    b: DagBuilder, scenario: Scenario, fabric: Fabric, source: str, reductions: Reductions, items: list[Item] | None
) -> WorkloadPart:
    """Add the scenario's workload section to ``b``: flows and patterns, then the iterations of
    its collectives, compute and training, or of its Chakra trace; and its inference requests."""
    _add_flows_and_patterns(b, scenario, fabric, source)
    if items is None:
        items = workload_items(scenario, fabric, source)
    collectives, iteration_ends = _add_iterations(b, scenario, fabric, source, reductions, items)
    notes = []
    if scenario.workload.chakra is not None:
        from .chakra import add_chakra  # protobuf, only for traces

        collectives, iteration_ends, notes = add_chakra(
            b,
            scenario.workload.chakra,
            fabric,
            scenario.network.nic.data_priority,
            scenario.workload.iterations,
            source,
            reductions,
        )
    requests = Requests()
    inference = scenario.workload.inference
    if inference is not None:
        hosts = inference_hosts(inference, fabric.n_hosts, source)
        requests = add_inference(b, inference, hosts, scenario.network.nic.data_priority, scenario.seed)
    return WorkloadPart(collectives, iteration_ends, notes, requests)


def finish_workload(
    b: DagBuilder, source: str, reductions: Reductions, parts: list[WorkloadPart]
) -> tuple[Workload, np.ndarray]:
    """Build the DAG ``b`` holds (refused if its tasks wait for each other in a cycle), each
    part's collectives and iteration ends renumbered (in place) to the final task ids. The
    workload has every part's collectives, notes and requests, and the iteration ends of a single part
    (jobs keep theirs per job); with it, each provisional id's final id."""
    flows, tasks, new_id = b.build()
    if not b.in_creation_order() and has_cycle(tasks):
        raise ScenarioError(source, "workload", "the tasks wait for each other in a cycle")
    for part in parts:
        for c in part.collectives:
            c.flows = new_id[c.flows]
            c.end = {r: int(new_id[k]) for r, k in c.end.items()}
        part.iteration_ends = [{r: int(new_id[k]) for r, k in e.items()} for e in part.iteration_ends]
    collectives = [c for part in parts for c in part.collectives]
    notes = [note for part in parts for note in part.notes]
    ends = parts[0].iteration_ends if len(parts) == 1 else []
    gates = b.gate_table(new_id)
    workload = Workload(flows, tasks, collectives, ends, notes, list(reductions.ports), gates if len(gates) else None)
    workload.requests = Requests.joined([part.requests.renumbered(new_id) for part in parts])
    return workload, new_id


def _add_flows_and_patterns(b: DagBuilder, scenario: Scenario, fabric: Fabric, source: str) -> None:
    H = fabric.n_hosts
    default_prio = scenario.network.nic.data_priority
    for i, flow in enumerate(scenario.workload.flows):
        for end in ("src", "dst"):
            _check_host(source, f"workload.flows.{i}.{end}", getattr(flow, end), H)
        if flow.src == flow.dst:
            raise ScenarioError(
                source, f"workload.flows.{i}.dst", f"{flow.dst} is not allowed: a flow needs two different hosts"
            )
        b.flow(
            flow.src,
            flow.dst,
            flow.bytes,
            flow.priority or default_prio,
            f"flows.{i}",
            earliest_ps=ns_to_ps(flow.start_ns),
        )
    rng = streams.rng(scenario.seed, streams.PATTERNS)
    for i, pattern in enumerate(scenario.workload.patterns):
        key = f"workload.patterns.{i}"
        hosts = checked_hosts(source, key, pattern.hosts if pattern.hosts is not None else "all", H)
        if pattern.kind == "poisson":  # its own stream: adding one leaves the other patterns' draws alone
            own = streams.rng(scenario.seed, streams.HASHES, i)
            for src, dst, nbytes, t in zip(
                *(a.tolist() for a in poisson_flows(pattern, hosts, host_rates(fabric), own, source, key))
            ):
                b.flow(src, dst, nbytes, default_prio, f"patterns.{i}", earliest_ps=ns_to_ps(t))
            continue
        start = ns_to_ps(pattern.start_ns)
        assert pattern.bytes is not None  # every kind but poisson needs it (the schema checks)
        for src, dst in _expand(pattern, hosts, fabric, rng, source, key):
            b.flow(src, dst, pattern.bytes, default_prio, f"patterns.{i}", earliest_ps=start)


def host_rates(fabric: Fabric) -> np.ndarray:
    """Each host's link rate (b/s), by host id: the rate of its first port."""
    return fabric.port_rate_bps[[fabric.node_ports[h][0] for h in range(fabric.n_hosts)]]


def checked_hosts(source: str, key: str, hosts, n_hosts: int, minimum: int = 2) -> list[int]:
    """The host ids a section names (``"all"``: every host), each checked to exist, at least
    ``minimum`` of them (ScenarioError naming ``key``)."""
    hosts = list(range(n_hosts)) if hosts == "all" else list(hosts)
    for j, h in enumerate(hosts):
        _check_host(source, f"{key}.hosts.{j}", h, n_hosts)
    if len(set(hosts)) != len(hosts) or len(hosts) < minimum:
        raise ScenarioError(
            source, f"{key}.hosts", f"needs at least {minimum} distinct host{'s' if minimum > 1 else ''}, each once"
        )
    return hosts


def scenario_items(scenario: Scenario, fabric: Fabric, source: str) -> list[Item]:
    """The workload's collectives, compute tasks and training iterations as items, hosts checked,
    in the order the scenario gives them (build_workload and size.workload_size both start here)."""
    items = []
    H = fabric.n_hosts
    for i, spec in enumerate(scenario.workload.collectives):
        key = f"workload.collectives.{i}"
        hosts = checked_hosts(source, key, spec.hosts, H)
        items.append(
            Item(
                key,
                spec.name or f"{spec.kind}{i}",
                "collective",
                list(spec.after),
                groups=[hosts],
                collective=spec.kind,
                algorithm=spec.algorithm,
                nbytes=spec.bytes,
                chunks=spec.chunks,
                channels=spec.channels,
                scheduler=spec.scheduler,
                named=spec.name is not None,
            )
        )
    for i, task in enumerate(scenario.workload.compute):
        key = f"workload.compute.{i}"
        items.append(
            Item(
                key,
                task.name,
                "compute",
                list(task.after),
                hosts=checked_hosts(source, key, task.hosts, H, 1),
                duration_ps=ns_to_ps(task.duration_ns),
            )
        )
    training = scenario.workload.training
    if training is not None:
        hosts = checked_hosts(source, "workload.training", training_hosts(training, H), H, 1)
        node_size = scenario.topology.gpus_per_node if scenario.topology.kind == "rail_optimized" else None
        items.extend(training_items(training, hosts, H, source, node_size, scenario.seed, slow_hosts(scenario, H)))
    return items


def slow_hosts(scenario: Scenario, n_hosts: int) -> dict[int, float]:
    """The stragglers' compute factors by host, for a parameter server's aggregation groups; none
    where the stragglers do not fit these ranks (build_workload names the error)."""
    if not scenario.stragglers:
        return {}
    try:
        return {s["host"]: s["factor"] for s in straggling_ranks(scenario, n_hosts, "")}
    except ScenarioError:
        return {}


def in_dependency_order(items: list[Item], source: str) -> list[Item]:
    """The items in an order where each comes after the items it names (names unique, no cycle)."""
    by_name: dict[str, Item] = {}
    for item in items:
        if item.name in by_name:
            first = by_name[item.name]
            at, other = (first, item) if first.named and not item.named else (item, first)
            raise ScenarioError(
                source, at.at("name"), f"'{item.name}' is not allowed: {other.key} has that name already"
            )
        by_name[item.name] = item
    ordered: list[Item] = []
    state: dict[str, str] = {}

    def visit(item, trail):
        if state.get(item.name) == "done":
            return
        if state.get(item.name) == "visiting":
            raise ScenarioError(
                source, f"{item.key}.after", f"waits for itself through {' -> '.join(trail + [item.name])}"
            )
        state[item.name] = "visiting"
        for j, other in enumerate(item.after):
            if other not in by_name:
                raise ScenarioError(
                    source,
                    f"{item.key}.after.{j}",
                    f"'{other}' is not allowed: no collective or compute has that name (names: {', '.join(by_name)})",
                )
            visit(by_name[other], trail + [item.name])
        state[item.name] = "done"
        ordered.append(item)

    for item in items:
        visit(item, [])
    return ordered


def workload_items(scenario: Scenario, fabric: Fabric, source: str) -> list[Item]:
    """The collectives, compute tasks and training steps of one iteration as items, each after
    the items it waits for."""
    return in_dependency_order(scenario_items(scenario, fabric, source), source)


def _add_iterations(b: DagBuilder, scenario: Scenario, fabric: Fabric, source: str, reductions, items: list[Item]):
    if not items:
        return [], []
    prio = scenario.network.nic.data_priority
    for item in items:
        if item.kind == "collective":
            for group in item.groups:
                check_collective(source, item, group, fabric)
    collectives: list[Collective] = []
    ends: list[dict[int, int]] = []  # per iteration: rank -> the join that ends its part
    previous: dict[int, int] = {}
    timing = dim_timing(scenario, fabric)
    rates = host_rates(fabric)
    for it in range(scenario.workload.iterations):
        done: dict[str, dict[int, int]] = {}
        whole: dict[str, int] = {}

        def waits(rank, item):
            if not item.after:
                return [previous[rank]] if rank in previous else []
            out = []
            for other in item.after:
                if rank in done[other]:
                    out.append(done[other][rank])
                else:  # the rank took no part in it: wait for all of it
                    if other not in whole:
                        whole[other] = b.join(other, it, after=list(done[other].values()))
                    out.append(whole[other])
            return out

        def pull_waits(server, rank, item):
            out = [previous[rank]] if rank in previous else []
            back = it - 1 - item.staleness if item.staleness is not None else -1
            if back >= 0 and server in ends[back]:
                out.append(ends[back][server])
            return out

        for item in items:
            if item.kind == "compute":
                done[item.name] = {
                    h: b.compute(h, item.duration_ps, item.name, it, after=waits(h, item)) for h in item.hosts
                }
            elif item.kind == "send":
                sent: dict[int, list[int]] = {}  # rank -> the flows it sends or receives
                for src, dst in item.pairs:
                    after = pull_waits(src, dst, item) if item.pull else waits(src, item)
                    k = b.flow(src, dst, item.nbytes, prio, item.name, it, after=after)
                    if item.scheduled:
                        port = b.queue_ids([("update receiver", dst)], ordered=False)
                        length = transfer_ps(item.nbytes, rates[src], rates[dst])
                        b.dispatched([k], port, [length], [k], [item.deadline_ps])
                    for r in (src, dst, *item.counts_for.get(src, ())):
                        sent.setdefault(r, []).append(k)
                # a rank in several pairs (a parameter server) is done with the item once all its flows are
                done[item.name] = {
                    r: ks[0] if len(ks) == 1 else b.join(item.name, it, after=ks) for r, ks in sent.items()
                }
            else:
                done[item.name] = {}
                for g, group in enumerate(item.groups):
                    c = Collective(
                        item.name,
                        item.collective,
                        item.algorithm,
                        group,
                        item.nbytes,
                        item.chunks,
                        it,
                        group=g,
                        scheduler=item.scheduler,
                        channels=item.channels,
                        pair_bytes=item.pair_bytes,
                    )
                    expand(
                        b,
                        c,
                        prio,
                        {r: waits(r, item) for r in group},
                        fabric.host_coords,
                        fabric.dims,
                        timing,
                        reductions,
                        fabric.dim_algorithms,
                    )
                    collectives.append(c)
                    done[item.name].update(c.end)
        per_rank: dict[int, list[int]] = {}
        for ranks in done.values():
            for r, k in ranks.items():
                per_rank.setdefault(r, []).append(k)
        previous = {r: b.join("iteration", it, after=ks) for r, ks in sorted(per_rank.items())}
        ends.append(previous)
    return collectives, ends


def transfer_ps(nbytes: int, src_bps: float, dst_bps: float) -> int:
    """How long ``nbytes`` take at the slower of two hosts' link rates, in ps (a scheduled send's rank in
    its receiver's queue: shortest first)."""
    return int(np.ceil(nbytes * 8e12 / min(src_bps, dst_bps)))


def dim_timing(scenario: Scenario, fabric: Fabric) -> DimTiming:
    """A fabric's dimensions for the collective schedulers' models (themis.py, stage_model.py):
    each dimension's link rate; a ring step's latency on it (the links' delays between two
    routers, and a full frame's serialisation at each of them and at the sender); the headers;
    whether a connection's flows go in order; and the rate of the NIC port every dimension
    shares, where an NPU has a single one."""
    net = scenario.network
    frame_bits = net.frame_bytes * 8
    step = tuple(
        ring_step_s(h, d, r, frame_bits) for r, d, h in zip(fabric.dim_rates_bps, fabric.dim_delays_s, fabric.dim_hops)
    )
    host_ports = np.flatnonzero(fabric.port_node < fabric.n_hosts)
    single = len(host_ports) == fabric.n_hosts
    algorithms, links = dim_algorithms.of_fabric(fabric)
    return DimTiming(
        tuple(fabric.dim_rates_bps),
        step,
        wire=net.frame_bytes / net.mtu_bytes,
        in_order=net.nic.queue_pair == "connection",
        nic_bps=float(fabric.port_rate_bps[host_ports].min()) if single else 0.0,
        links=links,
        direct=tuple(a == "direct" for a in algorithms),
    )


def ring_step_s(hops: int, delay_s: float, rate_bps: float, frame_bits: float) -> float:
    """A ring step's latency between two NPUs ``hops`` links apart: each link's delay, and a full
    frame's serialisation at the sender and at each hop."""
    return hops * delay_s + (hops + 1) * frame_bits / rate_bps


def check_collective(source: str, spec: Item, hosts: list[int], fabric: Fabric) -> None:
    """Refuse a collective its algorithm cannot run on these hosts and this fabric (one line naming the key)."""
    p = len(hosts)
    if spec.algorithm not in ALGORITHMS[spec.collective]:
        raise ScenarioError(
            source,
            spec.at("algorithm"),
            f"'{spec.algorithm}' is not allowed for {spec.collective} "
            f"(allowed: {', '.join(ALGORITHMS[spec.collective])})",
        )
    if spec.scheduler != "baseline" and spec.algorithm != "hierarchical":
        raise ScenarioError(
            source,
            spec.at("scheduler"),
            f"'{spec.scheduler}' orders the dimensions of a hierarchical "
            f"all-reduce; this one is {spec.algorithm} (allowed here: "
            f"baseline)",
        )
    check_reducing(fabric, spec.algorithm, hosts, source, spec.at("algorithm"), spec.at("hosts"))
    if spec.algorithm == "halving_doubling" and p & (p - 1):
        raise ScenarioError(source, spec.at("hosts"), f"halving_doubling needs a power-of-two number of ranks, not {p}")
    if spec.algorithm in HIERARCHICAL:
        if (
            not fabric.dims
            or fabric.host_coords is None
            or len(fabric.host_coords) != fabric.n_hosts
            or fabric.n_hosts != int(np.prod(fabric.dims))
        ):
            raise ScenarioError(
                source,
                spec.at("algorithm"),
                f"{spec.algorithm} needs a multi_dim, rail_optimized, torus or mesh topology with one host per router",
            )
        if sorted(hosts) != list(range(fabric.n_hosts)):
            raise ScenarioError(source, spec.at("hosts"), f"{spec.algorithm} runs over all hosts")
    if spec.nbytes < p * spec.chunks * spec.channels:
        raise ScenarioError(
            source,
            spec.at("bytes"),
            f"'{spec.name}' moves {spec.nbytes} bytes, fewer than one per rank and chunk ({p} x {spec.chunks})"
            if spec.channels == 1
            else f"'{spec.name}' moves {spec.nbytes} bytes, fewer than one per rank, chunk and channel "
            f"({p} x {spec.chunks} x {spec.channels})",
        )


def _check_host(source: str, key: str, host: int, n_hosts: int) -> None:
    if not 0 <= host < n_hosts:
        raise ScenarioError(
            source, key, f"{host} is not allowed: host ids run from 0 to {n_hosts - 1} on this topology"
        )


def _expand(pattern, hosts, fabric, rng, source, key):
    if pattern.kind == "all_to_all":
        return [(s, d) for s in hosts for d in hosts if s != d]
    if pattern.kind == "incast":
        dst = hosts[0] if pattern.dst is None else pattern.dst
        _check_host(source, f"{key}.dst", dst, fabric.n_hosts)
        return [(s, dst) for s in hosts if s != dst]
    if pattern.kind == "permutation":
        # a random derangement: every host sends to one other and receives from one other
        while True:
            order = rng.permutation(len(hosts))
            if all(order[i] != i for i in range(len(hosts))):
                return [(hosts[i], hosts[order[i]]) for i in range(len(hosts))]
    if pattern.kind == "neighbours":
        return neighbour_pairs(fabric, hosts, source, key)
    if pattern.kind == "weight_streaming":
        return _weight_streaming(fabric, hosts, source, key)
    raise AssertionError(pattern.kind)


def _weight_streaming(fabric: Fabric, hosts, source, key):
    """(I/O controller, host) for every host: the controller nearest to it, in switch hops
    between the switches they hang off (ties: the lower controller)."""
    if not fabric.n_io:
        raise ScenarioError(
            source,
            f"{key}.kind",
            "'weight_streaming' needs I/O controllers: give topology.io_controllers (mesh or fred)",
        )
    switches = fabric.switch_graph()
    controllers = range(fabric.n_hosts, fabric.n_hosts + fabric.n_io)
    dist = [nx.single_source_shortest_path_length(switches, fabric.host_attachment(c)) for c in controllers]
    pairs = []
    for h in hosts:
        at = fabric.host_attachment(h)
        nearest = min(range(len(dist)), key=lambda i: (dist[i][at], i))
        pairs.append((controllers[nearest], h))
    return sorted(pairs)


def neighbour_pairs(fabric: Fabric, hosts, source, key):
    """Each host sends to the host on the next router along every dimension (torus/mesh)."""
    if not fabric.dims:
        raise ScenarioError(source, f"{key}.kind", "'neighbours' needs a torus or mesh topology")
    per_node = fabric.n_hosts // int(np.prod(fabric.dims))
    chosen = set(hosts)
    pairs = []
    for h in hosts:
        router = fabric.host_attachment(h)
        coord = fabric.graph.nodes[router]["coord"]
        for d, size in enumerate(fabric.dims):
            nxt = list(coord)
            nxt[d] = coord[d] + 1
            if nxt[d] == size:
                if not fabric.wrap:
                    continue
                nxt[d] = 0
            index = int(np.ravel_multi_index(tuple(nxt), fabric.dims))
            dst = index * per_node + h % per_node
            if dst in chosen and dst != h:
                pairs.append((h, dst))
    return pairs
