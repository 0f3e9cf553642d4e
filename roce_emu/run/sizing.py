"""How large a world starts, and whether it fits: the capacities of its packet pool, event heap
and queue-pair slots (all grow later with the work in flight), and the memory they and the
routing tables take. A scenario that would not fit in the free memory is refused with the
estimate. No Numba: ``roce-emu validate`` runs these checks without loading the engine."""

import os

from ..core import kinds as K
from ..core.state import CC_DTYPE, EV_DTYPE, FLOW_DTYPE, PKT_DTYPE, PORT_DTYPE, PQ_DTYPE, QP_DTYPE, TASK_DTYPE
from ..errors import ScenarioError
from ..fabric.topology import Fabric
from ..workload import Workload

#: bytes per routing-table row while it is built in Python (a tuple in a list) and then stored
ROUTE_ROW_BYTES = 120
STORED_ROUTE_ROW_BYTES = 16  # per extra route epoch (link failures): an offset and a port or two
MAX_MEMORY_SHARE = 0.8  # refuse a world that would need more than this share of the free memory


def estimate_bytes(fabric: Fabric, workload: Workload, route_epochs: int = 1) -> int:
    """Memory to build and start the world: routing rows (node x host, per route epoch), packets
    and events for the initial pools, the first queue pairs, per-flow and per-task records.
    Pools grow later with the work in flight."""
    n_ports = len(fabric.port_node)
    rows = fabric.n_nodes * fabric.n_endpoints
    n_flows, n_tasks = len(workload.flows), len(workload.tasks)
    qps = first_qp_slots(n_flows, fabric.n_endpoints)
    pool = pool_capacity(n_ports, qps)
    per_qp = QP_DTYPE.itemsize + CC_DTYPE.itemsize + 8 * 2 * K.N_TIMERS + 4
    routes = rows * ROUTE_ROW_BYTES + (route_epochs - 1) * rows * STORED_ROUTE_ROW_BYTES
    return (
        routes
        + pool * (PKT_DTYPE.itemsize + 4)
        + 2 * EV_DTYPE.itemsize * heap_capacity(pool, n_ports, qps)
        + n_ports * (PORT_DTYPE.itemsize + K.NPRIO * PQ_DTYPE.itemsize)
        + qps * per_qp
        + n_flows * FLOW_DTYPE.itemsize
        + n_tasks * (TASK_DTYPE.itemsize + 200)
        + len(workload.tasks.succ) * 4
    )


def first_qp_slots(n_flows: int, n_hosts: int) -> int:
    """Queue-pair slots a world starts with (World.qp grows by doubling when flows in flight
    need more): room for a few flows per host, never more than there are flows."""
    return max(1, min(n_flows, 4 * n_hosts + 64))


def pool_capacity(n_ports: int, n_qps: int) -> int:
    return 4096 + 64 * n_ports + 4 * n_qps


def available_bytes() -> int:
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not on Linux
        return 1 << 62


def check_memory(fabric: Fabric, workload: Workload, source: str, route_epochs: int = 1) -> None:
    """Refuse a scenario whose world would not fit in memory, with the estimate."""
    _refuse_above(
        estimate_bytes(fabric, workload, route_epochs),
        f"{fabric.n_nodes} nodes x {fabric.n_endpoints} hosts of routes x {route_epochs} route epochs, "
        f"{len(workload.flows)} flows",
        source,
    )


def check_fabric_memory(hosts: int, nodes: int, source: str) -> None:
    """Before building a fabric: its routing rows and graph alone must fit."""
    _refuse_above(nodes * hosts * ROUTE_ROW_BYTES + nodes * 2000, f"{nodes} nodes x {hosts} hosts of routes", source)


def _refuse_above(need: int, what: str, source: str) -> None:
    free = available_bytes()
    if need > MAX_MEMORY_SHARE * free:
        raise ScenarioError(
            source,
            "topology",
            f"needs about {need / 1e9:.1f} GB to build ({what}), but "
            f"{free / 1e9:.1f} GB is free: make the fabric or the workload smaller",
        )


def heap_capacity(pool_cap: int, n_ports: int, n_qps: int) -> int:
    # every packet has at most one pending event; plus a TX_DONE and a wake-up per port,
    # and per queue pair a start, a retransmission timer and the CC timers; and a trace sample
    # (flow starts and compute tasks the DAG releases, and the timers that outlive their queue
    # pairs, grow the heap through ST_HEAP_LOW; the roots and link actions are added at build)
    return pool_cap + 2 * n_ports + (2 + K.N_TIMERS) * n_qps + 1 + K.HEAP_MARGIN
