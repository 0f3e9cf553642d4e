"""fct.txt and pfc.txt in the HPCC ns-3 simulator's layout (``output.formats: [ns3]``), so that
its users' analysis scripts read roce-emu's runs.

- fct.txt: one line per finished flow, in the order they finish:
  ``sip dip sport dport size_bytes start_ns fct_ns standalone_fct_ns``; hosts as that
  simulator's IPs in 8-digit hex (``0x0b000001 + (id / 256) * 0x10000 + (id % 256) * 0x100``),
  source ports from 10000 per (source, destination) pair in start order, destination port 100
  (roce-emu does not model ports), the FCT to the sender's last ACK, and roce-emu's ideal FCT as the standalone one;
- pfc.txt: one line per PFC frame as it takes effect, ``time_ns node node_type if_index type``
  (node type 0 host, 1 switch; the device index counts the node's links from 1 in the
  topology file's order; type 1 pause, 0 resume).

Node ids are the scenario's: for a ``custom`` (or imported ns3) topology the ids of its file,
else roce-emu's node numbers (hosts first).
"""

import numpy as np

from ..core import kinds as K
from ..fabric.topology import Fabric

DPORT = 100
FIRST_SPORT = 10000


def ip_hex(node_id: int) -> str:
    return f"{0x0B000001 + (node_id // 256) * 0x10000 + (node_id % 256) * 0x100:08x}"


def node_ids(fabric: Fabric) -> list[int]:
    return fabric.node_ids if fabric.node_ids is not None else list(range(fabric.n_nodes))


def device_index(fabric: Fabric, topology) -> np.ndarray:
    """Each port's device index on its node, as ns-3 numbers them (from 1, one per link in
    the order the links were built: the topology file's for custom fabrics)."""
    index = np.zeros(len(fabric.port_node), np.int64)
    if getattr(topology, "kind", "") == "custom":
        ours = {v: i for i, v in enumerate(node_ids(fabric))}
        count: dict[int, int] = {}
        for a, b, _, _ in topology.links:
            for u, v in ((a, b), (b, a)):
                count[u] = count.get(u, 0) + 1
                index[fabric.port_towards(ours[u], ours[v])] = count[u]
        return index
    for ports in fabric.node_ports:
        for i, p in enumerate(ports):
            index[p] = i + 1
    return index


def source_ports(src: list[int], dst: list[int]) -> list[int]:
    """The simulator's source port of each flow, given in the order it starts them (its flow
    file's): from 10000 per (source, destination) pair (third.cc, ``portNumder``)."""
    seen: dict[tuple[int, int], int] = {}
    ports = []
    for pair in zip(src, dst):
        ports.append(FIRST_SPORT + seen.get(pair, 0))
        seen[pair] = seen.get(pair, 0) + 1
    return ports


def fct_text(flow_table: dict, fabric: Fabric) -> str:
    ids = node_ids(fabric)
    src, dst = flow_table["src"], flow_table["dst"]
    order = np.argsort(flow_table["start_ps"], kind="stable")
    sport = np.zeros(len(src), np.int64)
    sport[order] = source_ports(src[order].tolist(), dst[order].tolist())
    done = np.flatnonzero(flow_table["finish_ps"] >= 0)
    done = done[np.argsort(flow_table["finish_ps"][done], kind="stable")]
    lines = [
        f"{ip_hex(ids[src[f]])} {ip_hex(ids[dst[f]])} {sport[f]} {DPORT} {flow_table['bytes'][f]} "
        f"{flow_table['start_ps'][f] // 1000} {flow_table['fct_ps'][f] // 1000} "
        f"{flow_table['ideal_ps'][f] // 1000}"
        for f in done.tolist()
    ]
    return "".join(line + "\n" for line in lines)


def pfc_text(world, fabric: Fabric, topology, trace: np.ndarray) -> str:
    ids = node_ids(fabric)
    device = device_index(fabric, topology)
    node = world.port["node"]
    rows = trace[trace[:, 1] == K.TR_PFC]
    rows = rows[np.argsort(rows[:, 0], kind="stable")]
    lines = [
        f"{t // 1000} {ids[node[p]]} {0 if node[p] < fabric.n_endpoints else 1} {device[p]} {pause}"
        for t, _, p, _, pause, _ in rows.tolist()
    ]
    return "".join(line + "\n" for line in lines)
