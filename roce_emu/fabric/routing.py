"""Next-hop tables: ECMP over all shortest paths (Clos), dimension-order routing (torus, mesh)
or rail routing (rail_optimized).

The result is CSR over rows ``node * n_endpoints + dst``: the egress ports a packet for
endpoint ``dst`` (a host or a reduction unit) may take at ``node``. Endpoints never forward;
the engine picks among several ports by flow hash, so a flow keeps one path (no reordering).

With dead links (a ``link_down`` fault), shortest paths are taken over the links left;
dimension-order routing keeps a switch's route where its whole path is intact and
takes a shortest path over the links left otherwise. Rail routing keeps NVLink for traffic
within a node (and PXN's first hop) and takes shortest paths over the leaves and spines for
the rest, over the links left. A switch cut off from a host has no route to it (an empty
row: the engine drops such packets).
"""

from collections import deque

import numpy as np

from .topology import Fabric


def build_routes(fabric: Fabric, dead: frozenset[int] = frozenset()) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, ports): CSR rows node * n_endpoints + dst, avoiding the ports in dead (both ports
    of every dead link). A host's row keeps its uplink: it has no other way out. A multi_dim NPU
    with a NIC link per dimension link (``port_pass``) sends by those onto its router's
    choices, so that the NIC and the router agree."""
    H = fabric.n_endpoints
    if fabric.routing == "dor":
        per_switch = _dor_choices(fabric, dead)
    elif fabric.routing in ("rail", "rail_pxn"):
        per_switch = _rail_choices(fabric, dead, pxn=fabric.routing == "rail_pxn")
    else:
        per_switch = _shortest_path_choices(fabric, dead)
    rows: list[tuple[int, ...]] = []
    attach = [fabric.host_attachment(h) for h in range(H)]
    cut_through = fabric.port_cut_through
    # the dimension link a multi_dim NIC link sends onto -> the NIC's port
    nic_link = {int(fabric.port_pass[fabric.port_peer[p]]): int(p) for p in np.flatnonzero(cut_through)}
    for node in range(fabric.n_nodes):
        if node < H:
            uplinks = tuple(p for p in fabric.node_ports[node] if not cut_through[p])
            if len(uplinks) == len(fabric.node_ports[node]):
                rows.extend(() if h == node else uplinks for h in range(H))
                continue
            # NIC links: those onto the router's choices, where it has any (else the host
            # link, to be dropped by the router like any packet with no route)
            router = per_switch[attach[node]]
            for h in range(H):
                choices = () if h == node else tuple(nic_link[p] for p in router.get(attach[h], ()))
                rows.append(() if h == node else (choices or uplinks))
            continue
        table = per_switch[node]
        for h in range(H):
            a = attach[h]
            rows.append((fabric.port_towards(node, h),) if a == node else table[a])
    counts = np.fromiter((len(r) for r in rows), np.int64, len(rows))
    off = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(counts, out=off[1:])
    ports = np.fromiter((p for r in rows for p in r), np.int32, int(off[-1]))
    return off, ports


def _hops(neighbours: dict, start: dict[int, int], within: set[int] | None = None) -> dict[int, int]:
    """Hops to every switch reached from ``start`` (switch: its hops), breadth first over
    ``neighbours`` ((switch, port) pairs per switch), entering only switches ``within`` if given."""
    dist = dict(start)
    frontier = deque(start)
    while frontier:
        u = frontier.popleft()
        for v, _ in neighbours[u]:
            if v not in dist and (within is None or v in within):
                dist[v] = dist[u] + 1
                frontier.append(v)
    return dist


def _downhill(live_s: list[tuple[int, int]], dist: dict[int, int], s: int) -> tuple[int, ...]:
    """Switch s's ports to neighbours one hop nearer the target (``dist``; s outside it: one hop
    beyond its nearest neighbour)."""
    near = [dist[v] for v, _ in live_s if v in dist]
    if not near:
        return ()
    here = dist.get(s, 1 + min(near))
    return tuple(p for v, p in live_s if dist.get(v, -1) == here - 1)


def _switch_neighbours(fabric: Fabric, s: int, dead: frozenset[int]) -> list[tuple[int, int]]:
    """(neighbour switch, port) pairs of switch s over live links, in port order."""
    out = []
    for p in fabric.node_ports[s]:
        v = int(fabric.port_node[fabric.port_peer[p]])
        if v >= fabric.n_endpoints and p not in dead:
            out.append((v, p))
    return out


def _shortest_path_choices(fabric: Fabric, dead: frozenset[int]) -> dict[int, dict[int, tuple[int, ...]]]:
    """For every switch s and every host-attachment switch a: ports of s on shortest paths to a."""
    H = fabric.n_endpoints
    switches = range(H, fabric.n_nodes)
    neighbours = {s: _switch_neighbours(fabric, s, dead) for s in switches}
    targets = sorted({fabric.host_attachment(h) for h in range(H)})
    choices: dict[int, dict[int, tuple[int, ...]]] = {s: {} for s in switches}
    for a in targets:
        dist = _hops(neighbours, {a: 0})
        for s in switches:
            if s == a or s not in dist:
                choices[s][a] = ()
                continue
            choices[s][a] = tuple(p for v, p in neighbours[s] if dist.get(v, -1) == dist[s] - 1)
    return choices


def _dor_choices(fabric: Fabric, dead: frozenset[int]) -> dict[int, dict[int, tuple[int, ...]]]:
    """Dimension-order routing: correct dimension 0 first; on a torus the shorter way round
    (ties go the positive way). Where a dead link cuts the dimension-order path, the
    shortest-path choices over the live links instead (loop-free: an intact dimension-order
    path is also shortest in the damaged fabric)."""
    coord = {n: fabric.graph.nodes[n]["coord"] for n in range(fabric.n_endpoints, fabric.n_nodes)}
    by_coord = {c: n for n, c in coord.items()}
    choices: dict[int, dict[int, tuple[int, ...]]] = {}
    for s, c in coord.items():
        choices[s] = {}
        for t, target in coord.items():
            if s == t:
                choices[s][t] = ()
                continue
            d = next(i for i in range(len(c)) if c[i] != target[i])
            size = fabric.dims[d]
            step = 1 if target[d] > c[d] else -1
            if fabric.wrap:
                forward = (target[d] - c[d]) % size
                step = 1 if forward <= size - forward else -1
            nxt = list(c)
            nxt[d] = (c[d] + step) % size
            choices[s][t] = (fabric.port_towards(s, by_coord[tuple(nxt)]),)
    if not dead:
        return choices
    shortest = _shortest_path_choices(fabric, dead)
    peer_node = fabric.port_node[fabric.port_peer]
    for t in coord:
        intact = {t: True}
        for s in coord:
            path = []
            node = s
            while node not in intact:  # walk the dimension-order path until a known node
                path.append(node)
                node = int(peer_node[choices[node][t][0]])
            ok = intact[node]
            for u in reversed(path):
                ok = ok and choices[u][t][0] not in dead
                intact[u] = ok
        for s in coord:
            if not intact[s]:
                choices[s][t] = shortest[s][t]
    return choices


def _rail_choices(fabric: Fabric, dead: frozenset[int], pxn: bool) -> dict[int, dict[int, tuple[int, ...]]]:
    """Rail routing on a rail_optimized fabric, towards each GPU's router a (node m, rail r):

    - a GPU router of node m sends over its NVLink to the NVSwitch, which delivers to a;
    - with ``pxn``, a GPU router of another node and another rail also sends over its NVLink;
      that node's NVSwitch passes it to its GPU of rail r, which sends it over its rail;
    - every other hop takes the shortest paths over the leaves and spines to a (ECMP), which
      never pass through another GPU or an NVSwitch: same-rail traffic stays on its rail's
      leaves, cross-rail traffic crosses a spine.

    An NVSwitch's reduction units (``algorithm: nvls``) are reached from the GPU routers of its
    node, over their NVLink, and from nowhere else.

    A GPU router whose NVLink way is cut (a dead link) takes the leaves and spines instead, so
    no route loops: the scale-out routes never enter an NVSwitch, and an NVSwitch's only
    forward for another node goes to a router that sends it out."""
    H = fabric.n_endpoints
    nodes = fabric.graph.nodes
    switches = range(H, fabric.n_nodes)
    live = {s: _switch_neighbours(fabric, s, dead) for s in switches}
    scale_out = {s for s in switches if nodes[s]["role"] in ("leaf", "spine")}
    nvswitch = {nodes[s]["node"]: s for s in switches if nodes[s]["role"] == "nvswitch"}
    router = {(nodes[s]["node"], nodes[s]["rail"]): s for s in switches if nodes[s]["role"] == "gpu"}
    choices: dict[int, dict[int, tuple[int, ...]]] = {s: {} for s in switches}
    targets = sorted({fabric.host_attachment(h) for h in range(H)})

    def towards(s: int, v: int) -> tuple[int, ...]:
        return tuple(p for w, p in live[s] if w == v)

    # a target's distances over the leaves and spines depend only on its live scale-out neighbours
    # (its leaf), and so does every switch's choice but those next to it: computed once per leaf
    by_leaf: dict[tuple[int, ...], tuple[dict[int, int], dict[int, tuple[int, ...]]]] = {}
    for a in targets:
        if nodes[a]["role"] == "nvswitch":  # its reduction units (nvls): from its own node's GPUs, over NVLink
            for s in switches:
                own = nodes[s]["role"] == "gpu" and nodes[s]["node"] == nodes[a]["node"]
                choices[s][a] = towards(s, a) if own else ()
            continue
        m, r = nodes[a]["node"], nodes[a]["rail"]
        leaf = tuple(v for v, _ in live[a] if v in scale_out)
        if leaf not in by_leaf:
            dist = _hops(live, dict.fromkeys(leaf, 1), scale_out)  # over the leaves and spines only
            shared = {s: _downhill(live[s], dist, s) for s in switches if nodes[s]["role"] != "nvswitch"}
            by_leaf[leaf] = dist, shared
        dist, shared = by_leaf[leaf]
        near_a = {s: _downhill(live[s], {**dist, a: 0}, s) for s in {v for v, _ in live[a]}}

        def out(s: int) -> tuple[int, ...]:
            """s's ports on shortest paths over the leaves and spines to a (a GPU router: by its leaf)."""
            return near_a[s] if s in near_a else shared[s]

        for s in switches:
            role = nodes[s]["role"]
            if s == a:
                choices[s][a] = ()
            elif role in ("leaf", "spine"):
                choices[s][a] = out(s)
            elif role == "nvswitch":
                relay = a if nodes[s]["node"] == m else router[nodes[s]["node"], r]
                choices[s][a] = towards(s, relay)
            else:  # a GPU router
                n, g = nodes[s]["node"], nodes[s]["rail"]
                nvlink: tuple[int, ...] = ()
                if n == m or (pxn and g != r):
                    hub = nvswitch[n]
                    relay = a if n == m else router[n, r]
                    if towards(hub, relay) and (n == m or out(relay)):
                        nvlink = towards(s, hub)
                choices[s][a] = nvlink or out(s)
    return choices
