"""links.csv: how busy each direction of each link was, per priority, and the hottest links.

Every port of the engine is one direction of one link (its node to its peer's node). The
engine counts the wire bytes each port sent per priority (PQ_DTYPE tx_bytes): every packet
counts, with its preamble and inter-frame gap (packets.wire_bytes): data, ACKs, NACKs, CNPs
and PFC PAUSE/RESUME frames, each under the priority it carries (control packets use the
control priority 0; ACKs and NACKs their flow's priority with network.switch.ack_queue:
data). A packet counts when its port starts to send it, so one still on the wire when the
run stops counts whole, and one a lossy port loses counts (it was sent); what a switch
discards from its queues when their link goes down was never sent and does not count.

Busy time is the serialisation time of those bytes at the link's nominal rate (the fabric's;
a slow_link fault's lower rate is not taken into account), floored to the picosecond;
utilization is the busy time over the run's duration (run_end_ps): from 0 to the end of its
workload, when its last task (flow or compute) finished and its last flow's sender had every
ACK, or to when the run stopped if it stopped before (summary.json sim_time_ns); not to the
last event, which can be a timer of a finished flow long after the end. A saturated link in a
long run comes near 1; with fast_forward: trains a train counts whole at the port it
passes, as it does for the queue statistics.
"""

import numpy as np

from ..core import kinds as K
from ..core.state import World
from ..fabric.topology import Fabric
from ..units import bps_to_gbps, format_ps_as_ns

LINK_COLUMNS = (
    "link",
    "node_from",
    "node_to",
    "tier",
    "priority",
    "rate_gbps",
    "wire_bytes",
    "busy_ns",
    "utilization",
)

#: links named in summary.json hottest_links
HOTTEST = 5


def link_ids(fabric: Fabric) -> np.ndarray:
    """Each port's link: its row in ``roce-emu topo --links`` (0 = the first link listed,
    fabric/summary.link_rows: links sorted by their lower, then higher node)."""
    ends = (
        np.minimum(fabric.port_node, fabric.port_node[fabric.port_peer]),
        np.maximum(fabric.port_node, fabric.port_node[fabric.port_peer]),
    )
    order = np.lexsort((ends[1], ends[0]))  # ports by (lower node, higher node): the two of a link side by side
    ids = np.empty(len(order), np.int64)
    ids[order] = np.arange(len(order)) // 2
    return ids


def busy_ps(wire_bytes: int, rate_bps: int) -> int:
    """Serialisation time of ``wire_bytes`` at ``rate_bps``, floored to the picosecond, as the
    engine's paths.ser_ps, in Python's unbounded integers: a run's bytes times 8e12 overflow
    int64 beyond about 1 MB."""
    return int(wire_bytes) * 8_000_000_000_000 // int(rate_bps)


def run_end_ps(world: World) -> int:
    """When the workload ended: its last task (a flow's data at its receiver, a compute task)
    finished and its last flow's sender had every ACK; when the run stopped if one did not."""
    finish = np.concatenate([world.task["finish_ps"], world.flow["finish_ps"]]).astype(np.int64)
    if len(finish) and (finish >= 0).all():
        return int(finish.max())
    return int(world.stats[K.C_NOW_PS])


def port_bytes(world: World) -> np.ndarray:
    """Wire bytes sent by each port (rows) of each priority (columns)."""
    return np.asarray(world.pq["tx_bytes"], np.int64)


def link_rows(world: World, fabric: Fabric) -> list[tuple]:
    """links.csv rows: every direction of every link, one row per priority any port sent on in
    the run (so idle links are listed too, with 0 bytes), by link, direction, priority."""
    sent = port_bytes(world)
    duration_ps = run_end_ps(world)
    prios = np.flatnonzero(sent.sum(axis=0) > 0).tolist()
    ids = link_ids(fabric)
    node, peer, names = fabric.port_node, fabric.port_peer, fabric.names
    rows = []
    for p in sorted(range(len(ids)), key=lambda p: (ids[p], node[p])):
        rate = int(fabric.port_rate_bps[p])
        for prio in prios:
            busy = busy_ps(sent[p, prio], rate)
            rows.append(
                (
                    int(ids[p]),
                    names[node[p]],
                    names[node[peer[p]]],
                    fabric.port_tier[p],
                    prio,
                    f"{bps_to_gbps(rate):g}",
                    int(sent[p, prio]),
                    format_ps_as_ns(busy),
                    repr(busy / duration_ps) if duration_ps > 0 else "",
                )
            )
    return rows


def hottest_links(world: World, fabric: Fabric, top: int = HOTTEST) -> list[dict]:
    """summary.json hottest_links: the ``top`` directions of links with the highest utilization
    (all priorities; ties by link order), each {from, to, tier, utilization} (6 decimals); none
    that sent nothing."""
    duration_ps = run_end_ps(world)
    if duration_ps <= 0:
        return []
    total = port_bytes(world).sum(axis=1)
    busy = [busy_ps(b, r) for b, r in zip(total.tolist(), fabric.port_rate_bps.tolist())]
    ids = link_ids(fabric)
    order = sorted((p for p in range(len(busy)) if busy[p] > 0), key=lambda p: (-busy[p], ids[p], fabric.port_node[p]))
    names = fabric.names
    return [
        {
            "from": names[fabric.port_node[p]],
            "to": names[fabric.port_node[fabric.port_peer[p]]],
            "tier": fabric.port_tier[p],
            "utilization": round(busy[p] / duration_ps, 6),
        }
        for p in order[:top]
    ]
