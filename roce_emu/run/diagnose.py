"""Explain a stalled run: paused ports and priorities, the pause cycle if any, links down, the stuck flows."""

import networkx as nx
import numpy as np

from ..core import kinds as K
from ..core.paths import flow_path
from ..core.state import World
from ..fabric.topology import Fabric
from ..units import ps_to_ns
from .world import flows_now


def _links_down(world: World, names: list[str]) -> list[str]:
    port = world.port
    return [
        f"{names[port[p]['node']]}-{names[port[port[p]['peer_port']]['node']]}"
        for p in np.flatnonzero(port["down"] != 0)
        if p < port[p]["peer_port"]
    ]


def _cut_off(world: World, f: int) -> bool:
    """No live path for the flow's data in the routes in use now (a failure cut it off)."""
    r = world.flow[f]
    off = world.route_off[int(world.meta[K.M_ROUTE_EPOCH])]
    path = flow_path(
        off,
        world.route_ports,
        world.port["node"],
        world.port["peer_port"],
        world.port["pass_to"],
        int(world.cfg[K.CFG_N_HOSTS]),
        int(r["src"]),
        int(r["dst"]),
        int(r["ecmp_hash"]),
    )
    reached = world.port["node"][world.port["peer_port"][path[-1]]] == r["dst"] if len(path) else False
    return not reached or bool((world.port["down"][path] != 0).any())


def _acked(world: World, f: int) -> int:
    """Packets of flow f its sender has the ACK of (0 before it starts)."""
    qp = int(world.flow[f]["qp"])
    return int(world.qp[qp]["snd_una"]) if qp >= 0 else 0


def stall_report(world: World, fabric: Fabric, limit: int = 6) -> tuple[bool, str]:
    """(is a PFC deadlock, one line): a cycle of paused links or a plain stall, with where and who."""
    port = world.port
    names = fabric.names
    mtu = int(world.cfg[K.CFG_MTU])
    t_ns = ps_to_ns(world.stats[K.C_NOW_PS])
    quiet_ns = ps_to_ns(world.stats[K.C_NOW_PS] - world.stats[K.C_LAST_PROGRESS_PS])
    # switch-to-switch ports first: those are the ones a deadlock cycle runs through
    paused = sorted(
        np.argwhere(world.pq["paused"] != 0).tolist(), key=lambda pp: (bool(port[pp[0]]["at_host"]), pp[0], pp[1])
    )
    waits = nx.DiGraph()
    described = []
    for p, prio in paused:
        u = int(port[p]["node"])
        v = int(port[port[p]["peer_port"]]["node"])
        waits.add_edge(u, v, prio=int(prio))
        described.append(f"{names[u]}->{names[v]} prio {prio} ({int(world.pq[p, prio]['bytes'])} B queued)")
    flow = flows_now(world)
    stuck = np.flatnonzero(flow["state"] != K.FL_DONE)
    stuck_text = ", ".join(
        f"{f} ({names[flow[f]['src']]}->{names[flow[f]['dst']]}, {_acked(world, f)}/{-(-flow[f]['size_bytes'] // mtu)} "
        f"packets acked{', no live path' if _cut_off(world, f) else ''})"
        for f in stuck[:limit]
    )
    if len(stuck) > limit:
        stuck_text += f", and {len(stuck) - limit} more"
    ports_text = "; ".join(described[:limit]) + (
        f"; and {len(described) - limit} more" if len(described) > limit else ""
    )
    try:
        cycle = nx.find_cycle(waits)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        loop = " -> ".join(names[u] for u, _ in cycle) + f" -> {names[cycle[0][0]]}"
        head = f"PFC deadlock at t={t_ns:.0f} ns: pause cycle {loop}"
    else:
        head = f"stall at t={t_ns:.0f} ns: no flow progressed for {quiet_ns:.0f} ns"
    down = _links_down(world, names)
    down_text = f"; links down: {', '.join(down[:limit])}{' and more' if len(down) > limit else ''}" if down else ""
    return cycle is not None, (
        f"{head}; paused ports: {ports_text or 'none'}{down_text}; stuck flows ({len(stuck)}): {stuck_text or 'none'}"
    )
