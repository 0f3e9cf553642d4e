"""How large a world starts, and whether it fits: the capacities of its packet pool, event heap
and queue-pair slots (all grow later with the work in flight), and the memory that building
the workload's task DAG, the routing tables and the world take. A scenario that would not fit
is refused with the estimate before anything large is built: first the fabric from its
numbers (``check_fabric_memory``), then the workload from the counts its sections will
produce (``check_memory`` with workload.size.workload_size), and once more after building
it for what is still to come (``check_memory(..., built=True)``; the only check of an
imported trace's size). The memory that counts is the least of the machine's available
memory, the process's address-space and data limits and its cgroup's memory limit
(``available_bytes``). No Numba: ``roce-emu validate`` runs these checks without loading
the engine."""

import os
import resource
from pathlib import Path

from ..config.schema import Scenario
from ..core import kinds as K
from ..core.state import CC_DTYPE, EV_DTYPE, FLOW_DTYPE, PKT_DTYPE, PORT_DTYPE, PQ_DTYPE, QP_DTYPE, TASK_DTYPE
from ..errors import ScenarioError
from ..fabric.topology import Fabric
from ..workload.size import WorkloadSize

#: bytes per routing-table row (node x host) at the peak of building the tables (fabric/routing.py),
#: as tracemalloc measures it on fat-trees, tori and leaf-spines, with a margin
ROUTE_ROW_BYTES = 80
STORED_ROUTE_ROW_BYTES = 16  # per extra route epoch (link failures): an offset and a port or two
NO_LIMIT = 1 << 62  #: a cgroup limit this large or "max" is none
MAX_MEMORY_SHARE = 0.8  # refuse a world that would need more than this share of the available memory

# Building the task DAG (workload/dag.py), at its peak in DagBuilder.build: the rows the builder
# kept as int64 columns (a flow's 5 and its collective's id; a task's 3 and a compute's 2; an
# edge's 2), and build's arrays beside them (a flow's int32 copies; a task's new id, host,
# durations, offsets, labels and dependency counts; an edge's sort key, its two ends and the
# int32 successor list): fitted to tracemalloc's peaks over every algorithm, with a margin
# (tests/test_sizing.py checks them against measured peaks)
BUILD_BYTES_PER_FLOW = 76
BUILD_BYTES_PER_TASK = 114
BUILD_BYTES_PER_EDGE = 46
#: a flow the builder adds one at a time (patterns; collectives other than ring and
#: hierarchical) also holds Python tuples while its pattern or collective is expanded
SINGLE_FLOW_BYTES = 110
# What the built workload keeps (workload.Workload): a flow's FlowTable row (25 bytes) and its
# id in its collective (8); a task's TaskTable row (42); an edge's int32 successor; a tenth more
KEPT_BYTES_PER_FLOW = 36
KEPT_BYTES_PER_TASK = 46
KEPT_BYTES_PER_EDGE = 4
# The world's records of them (run/world.py): a flow's FLOW_DTYPE row and its ECMP hash and
# int64 ends while its first hop is looked up; a task's TASK_DTYPE row and its fan-out
WORLD_BYTES_PER_FLOW = FLOW_DTYPE.itemsize + 24
WORLD_BYTES_PER_TASK = TASK_DTYPE.itemsize + 16

#: the key that sets each topology kind's size, for the refusal
SIZE_KEY = {
    "single_switch": "topology.hosts",
    "fat_tree": "topology.k",
    "leaf_spine": "topology.leaves",
    "fred": "topology.npus",
    "torus": "topology.dims",
    "mesh": "topology.dims",
    "multi_dim": "topology.dims",
    "rail_optimized": "topology.nodes",
    "custom": "topology",
}


def estimate_bytes(fabric: Fabric, size: WorkloadSize, route_epochs: int = 1, built: bool = False) -> int:
    """Memory to build the workload, the routes and the world and start it: the larger of the
    workload DAG's build and what comes after it, beside what the workload keeps: routing rows
    (node x host, per route epoch), the world's records of the flows and tasks, and its
    initial packet pool, event heap, ports and queue pairs (which grow later with the work in
    flight). ``built``: only what is still to come once the workload is built."""
    n_ports = len(fabric.port_node)
    rows = fabric.n_nodes * fabric.n_endpoints
    qps = first_qp_slots(size.flows, fabric.n_endpoints)
    pool = pool_capacity(n_ports, qps)
    per_qp = QP_DTYPE.itemsize + CC_DTYPE.itemsize + 8 * 2 * K.N_TIMERS + 4
    after = (
        rows * ROUTE_ROW_BYTES
        + (route_epochs - 1) * rows * STORED_ROUTE_ROW_BYTES
        + size.flows * WORLD_BYTES_PER_FLOW
        + size.tasks * WORLD_BYTES_PER_TASK
        + pool * (PKT_DTYPE.itemsize + 4)
        + 2 * EV_DTYPE.itemsize * heap_capacity(pool, n_ports, qps)
        + n_ports * (PORT_DTYPE.itemsize + K.NPRIO * PQ_DTYPE.itemsize)
        + qps * per_qp
    )
    if built:
        return after
    build = (
        size.flows * BUILD_BYTES_PER_FLOW
        + size.tasks * BUILD_BYTES_PER_TASK
        + size.edges * BUILD_BYTES_PER_EDGE
        + size.single_flows * SINGLE_FLOW_BYTES
    )
    kept = size.flows * KEPT_BYTES_PER_FLOW + size.tasks * KEPT_BYTES_PER_TASK + size.edges * KEPT_BYTES_PER_EDGE
    return max(build, kept + after)


def first_qp_slots(n_flows: int, n_hosts: int) -> int:
    """Queue-pair slots a world starts with (World.qp grows by doubling when flows in flight
    need more): room for a few flows per host, never more than there are flows."""
    return max(1, min(n_flows, 4 * n_hosts + 64))


def pool_capacity(n_ports: int, n_qps: int) -> int:
    return 4096 + 64 * n_ports + 4 * n_qps


def available_bytes() -> tuple[int, str]:
    """(bytes this process can still allocate, where: the end of "N GB is ..."): the least of the machine's
    available memory (MemAvailable), the room under the process's address-space and data
    limits (RLIMIT_AS against its virtual size, RLIMIT_DATA against its data segment) and
    under its cgroup's memory limit (memory.max, and those of the cgroups above it)."""
    status = _proc_kb("/proc/self/status")
    meminfo = _proc_kb("/proc/meminfo")
    choices = [(meminfo.get("MemAvailable", _free_pages()), "available on the machine (MemAvailable)")]
    for limit, used, name in (
        (resource.RLIMIT_AS, "VmSize", "left under the process's address-space limit (RLIMIT_AS)"),
        (resource.RLIMIT_DATA, "VmData", "left under the process's data-segment limit (RLIMIT_DATA)"),
    ):
        soft = resource.getrlimit(limit)[0]
        if soft != resource.RLIM_INFINITY:
            choices.append((soft - status.get(used, 0), name))
    room = cgroup_room()
    if room is not None:
        choices.append((room, "left under the process's cgroup memory limit"))
    return min(choices)


def _proc_kb(path: str) -> dict[str, int]:
    """The ``Name: value kB`` lines of a /proc file, in bytes (empty where there is none)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:  # pragma: no cover - not on Linux
        return {}
    out = {}
    for line in lines:
        name, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB" and parts[0].isdigit():
            out[name] = int(parts[0]) * 1024
    return out


def _free_pages() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not on Linux
        return 1 << 62


def cgroup_room(root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> int | None:
    """Bytes left under the tightest memory limit of this process's cgroup (named in
    ``membership``) and the cgroups above it, or None without a limit: memory.max against
    memory.current (cgroup v2), or memory.limit_in_bytes against memory.usage_in_bytes in the
    memory controller's hierarchy (cgroup v1)."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:  # pragma: no cover - not on Linux
        return None
    room = None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            top, limit_file, usage_file = root, "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            top, limit_file, usage_file = root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        group = top / path.strip().lstrip("/")
        while True:
            try:
                limit = int((group / limit_file).read_text().replace("max", str(NO_LIMIT)))
                if limit < NO_LIMIT:
                    left = limit - int((group / usage_file).read_text())
                    room = left if room is None else min(room, left)
            except (OSError, ValueError):
                pass
            if group == top or top not in group.parents:
                break
            group = group.parent
    return room


def check_memory(
    scenario: Scenario,
    fabric: Fabric,
    size: WorkloadSize,
    source: str,
    route_epochs: int = 1,
    built: bool = False,
) -> None:
    """Refuse a scenario whose workload, routes and world would not fit in memory, with the
    estimate (``built``: only what is still to come after the workload was built)."""
    iterations = scenario.workload.iterations
    workload = f"{size.flows:,} flows, {size.tasks:,} tasks and {size.edges:,} dependencies"
    if iterations > 1 and scenario.workload.chakra is None:
        workload += f" over {iterations} iterations"
    key = SIZE_KEY[scenario.topology.kind]
    _refuse_above(
        estimate_bytes(fabric, size, route_epochs, built),
        f"{fabric.n_hosts} hosts; {workload}",
        source,
        key,
        f"{key} or the workload{' (workload.iterations)' if iterations > 1 else ''}",
    )


def check_fabric_memory(scenario: Scenario, hosts: int, nodes: int, source: str) -> None:
    """Before building a fabric: its routing rows and graph alone must fit."""
    key = SIZE_KEY[scenario.topology.kind]
    _refuse_above(
        nodes * hosts * ROUTE_ROW_BYTES + nodes * 2000, f"{nodes} nodes x {hosts} hosts of routes", source, key, key
    )


def _refuse_above(need: int, what: str, source: str, key: str, smaller: str) -> None:
    room, where = available_bytes()
    if need > MAX_MEMORY_SHARE * room:
        raise ScenarioError(
            source,
            key,
            f"needs about {need / 1e9:.1f} GB to build ({what}), but {max(room, 0) / 1e9:.1f} GB is {where}: "
            f"make {smaller} smaller",
        )


def heap_capacity(pool_cap: int, n_ports: int, n_qps: int) -> int:
    # every packet has at most one pending event; plus a TX_DONE and a wake-up per port,
    # and per queue pair a start, a retransmission timer and the CC timers; and a trace sample
    # (flow starts and compute tasks the DAG releases, and the timers that outlive their queue
    # pairs, grow the heap through ST_HEAP_LOW; the roots and link actions are added at build)
    return pool_cap + 2 * n_ports + (2 + K.N_TIMERS) * n_qps + 1 + K.HEAP_MARGIN
