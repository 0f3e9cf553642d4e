"""How large a scenario's workload will be, counted from its sections before anything is built:
its flows, tasks and DAG edges. run/sizing.py turns the counts into bytes and refuses a
scenario that would not fit before the builder (dag.DagBuilder) allocates anything large.

The counts follow the builder (workload/__init__.py) item by item and iteration by iteration:
flows exactly (each collective's own count, collectives.dag_size), tasks and edges as the
most the builder adds. An imported Chakra trace is counted only once it is built."""

from collections import Counter
from dataclasses import dataclass

from ..config.schema import Scenario
from ..fabric.reduction import Reductions
from ..fabric.topology import Fabric
from . import Workload, check_collective, checked_hosts, host_rates, neighbour_pairs, workload_items
from .background import expected_flows
from .collectives import Collective, dag_size, one_at_a_time
from .items import Item


@dataclass(frozen=True)
class WorkloadSize:
    flows: int
    tasks: int
    edges: int  #: dependencies between tasks (the DAG's successor lists)
    single_flows: int = 0  #: of the flows, those the builder adds one at a time (Python objects while it does)

    @classmethod
    def of(cls, workload: Workload) -> "WorkloadSize":
        """The size of a built workload."""
        return cls(len(workload.flows), len(workload.tasks), len(workload.tasks.succ))

    @classmethod
    def total(cls, sizes: "list[WorkloadSize]") -> "WorkloadSize":
        """The size of several workloads in one DAG (a scenario's jobs)."""
        return cls(*(sum(getattr(s, name) for s in sizes) for name in ("flows", "tasks", "edges", "single_flows")))


def workload_size(
    scenario: Scenario, fabric: Fabric, source: str, items: list[Item] | None = None
) -> WorkloadSize | None:
    """The flows, tasks and edges build_workload will make, counted without making them (None
    for a Chakra trace, which only its import can count). Raises the ScenarioError the builder
    would for a host, name or collective it refuses. ``items``: workload_items' result if the
    caller has it (to hand the same to build_workload), else made here. A scenario with jobs
    counts each job's."""
    if scenario.jobs:
        from .jobs import job_inputs  # which builds on this package

        sizes = [workload_size(job.scenario, fabric, source, job.items) for job in job_inputs(scenario, fabric, source)]
        return None if None in sizes else WorkloadSize.total([s for s in sizes if s is not None])
    if scenario.workload.chakra is not None:
        return None
    patterns = _pattern_flows(scenario, fabric, source)
    flows, tasks, edges = 0, 0, 0  # of one iteration
    if items is None:
        items = workload_items(scenario, fabric, source)
    reductions = Reductions(fabric, scenario.network.switch.reduction_slots)  # a copy: counting names units
    singles = 0  # per iteration
    ranks: set[int] = set()  # every rank an iteration's join waits for
    taking_part = 0  # (item, rank) pairs: the edges into the iteration's joins
    # edges from each collective flow's two ranks' entries (collectives._wait_to_enter), per
    # iteration, and of them those the first iteration has (an item without after waits for nothing there)
    entries, first_entries = 0, 0
    for item in items:
        waits = max(1, len(item.after))
        if item.kind == "compute":
            tasks += len(item.hosts)
            edges += waits * len(item.hosts)
            ranks.update(item.hosts)
            taking_part += len(item.hosts)
        elif item.kind == "send":
            flows += len(item.pairs)
            edges += waits * len(item.pairs)
            ends = {r for pair in item.pairs for r in pair}
            several = [n for n in Counter(r for pair in item.pairs for r in pair).values() if n > 1]
            tasks, edges = tasks + len(several), edges + sum(several)  # a join per rank in several pairs
            ranks.update(ends)
            taking_part += len(ends)
        else:
            for group in item.groups:
                check_collective(source, item, group, fabric)
                c = Collective(item.name, item.collective, item.algorithm, group, item.nbytes, item.chunks, 0)
                c.channels = item.channels
                f, joins, e = dag_size(c, fabric.dims, reductions, fabric.dim_algorithms)
                starts = len(group) * item.chunks * item.channels  # a start join per rank, chunk and channel
                flows, tasks, edges = flows + f, tasks + joins, edges + e + waits * starts
                entries += 2 * f
                first_entries += 2 * f if item.after else 0
                singles += f if one_at_a_time(c) else 0
                ranks.update(group)
                taking_part += len(group)
    tasks += len(ranks) + len(items)  # the iteration's join per rank, and per item one for ranks outside it
    edges += taking_part + len(items) * len(ranks)
    its = scenario.workload.iterations if items else 0
    flows = len(scenario.workload.flows) + patterns + its * flows
    edges = its * edges + (its - 1) * entries + first_entries if its else 0
    return WorkloadSize(flows, flows + its * tasks, edges, patterns + its * singles)


def _pattern_flows(scenario: Scenario, fabric: Fabric, source: str) -> int:
    """The flows the patterns expand into (poisson: how many it draws on average)."""
    total = 0
    for i, pattern in enumerate(scenario.workload.patterns):
        key = f"workload.patterns.{i}"
        hosts = checked_hosts(source, key, pattern.hosts if pattern.hosts is not None else "all", fabric.n_hosts)
        h = len(hosts)
        if pattern.kind == "poisson":
            total += round(expected_flows(pattern, hosts, host_rates(fabric), source, key))
        elif pattern.kind == "all_to_all":
            total += h * (h - 1)
        elif pattern.kind == "incast":
            total += h - ((hosts[0] if pattern.dst is None else pattern.dst) in hosts)
        elif pattern.kind == "neighbours":
            total += len(neighbour_pairs(fabric, hosts, source, key))
        else:  # permutation, weight_streaming: one flow per host
            total += h
    return total
