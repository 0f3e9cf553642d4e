"""Fabrics as networkx graphs, flattened into ports (one per direction of every link).

Nodes are numbered hosts first (0..H-1, the ids scenario files use), then the I/O controllers
of a mesh or FRED fabric (``io0``, ...), then the switches' reduction units if the workload
reduces in the network (fabric/reduction.py), then switches. Hosts, I/O controllers and units
are the engine's endpoints: they own a NIC and terminate flows.
Every edge carries ``rate_bps``, ``prop_ps`` and its ``tier`` (host, edge_agg, ...).
Torus, mesh, multi_dim and rail_optimized routers get a ``coord``; each host is attached to one router.
"""

from dataclasses import dataclass, field
from itertools import product

import networkx as nx
import numpy as np

from ..config.schema import Custom, FatTree, Fred, LeafSpine, Mesh, MultiDim, RailOptimized, SingleSwitch, Torus
from ..units import gbps_to_bps, ns_to_ps, ns_to_s


@dataclass
class Fabric:
    kind: str
    graph: nx.Graph
    n_hosts: int
    names: list[str]
    routing: str  # "ecmp" (shortest paths), "dor" (dimension order), "rail" or "rail_pxn" (routing.py)
    dims: tuple[int, ...] = ()
    wrap: bool = False
    host_coords: list[tuple[int, ...]] | None = None  # grid coordinate of each host (one per router)
    node_ids: list[int] | None = None  # custom fabrics: each node's id in the scenario (None: its index)
    dim_rates_bps: tuple[float, ...] = ()  # grids and multi_dim: each dimension's link rate
    dim_delays_s: tuple[float, ...] = ()  # ... its links' one-way delay
    dim_hops: tuple[int, ...] = ()  # ... links between two routers in it (2 through a switch)
    dim_algorithms: tuple[str, ...] = ()  # multi_dim: how hierarchical collectives run in each dimension; (): ring
    dim_links: tuple[int, ...] = ()  # multi_dim: an NPU's links in each dimension; (): one
    n_io: int = 0  # I/O controllers (ids n_hosts .. n_hosts + n_io - 1)
    n_units: int = 0  # reduction units (the next n_units ids), see fabric/reduction.py
    # flattened ports, filled by flatten()
    port_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    port_peer: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # the peer's port on the same link
    port_rate_bps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    port_prop_ps: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    port_tier: list[str] = field(default_factory=list)
    node_ports: list[list[int]] = field(default_factory=list)  # ports owned by each node
    # where a packet arriving on this port must leave its node, -1: by the routes
    port_pass: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def n_endpoints(self) -> int:
        """Hosts, I/O controllers and reduction units: the nodes with a NIC (the engine's hosts)."""
        return self.n_hosts + self.n_io + self.n_units

    @property
    def n_switches(self) -> int:
        return self.n_nodes - self.n_endpoints

    def switch_graph(self) -> nx.Graph:
        """The switches and the links between them (a view of the graph)."""
        return self.graph.subgraph(range(self.n_endpoints, self.n_nodes))

    @property
    def n_links(self) -> int:
        return self.graph.number_of_edges()

    @property
    def port_cut_through(self) -> np.ndarray:
        """Ports whose peer passes what they send on (multi_dim NIC links): True per port."""
        return self.port_pass[self.port_peer] >= 0

    def port_towards(self, node: int, neighbour: int) -> int:
        for p in self.node_ports[node]:
            if self.port_node[self.port_peer[p]] == neighbour:
                return p
        raise KeyError((node, neighbour))

    def host_attachment(self, host: int) -> int:
        """The switch a host hangs off."""
        return next(iter(self.graph.neighbors(host)))


class _Builder:
    """Collects nodes and links in a deterministic order."""

    def __init__(self, topo, n_hosts: int):
        self.topo = topo
        self.graph = nx.Graph()
        self.links = 0  # links added (a MultiGraph counts its edges in time linear in them)
        self.names = [f"h{h}" for h in range(n_hosts)]
        for h in range(n_hosts):
            self.graph.add_node(h, layer=0, host=True)

    def io_controllers(self, count: int) -> list[int]:
        """I/O controllers io0, io1, ...: endpoints numbered right after the hosts (call first)."""
        assert len(self.names) == self.graph.number_of_nodes()
        ids = []
        for i in range(count):
            ids.append(len(self.names))
            self.graph.add_node(ids[-1], layer=0, host=True, io=True)
            self.names.append(f"io{i}")
        return ids

    def switch(self, name: str, layer: int, **attrs) -> int:
        n = len(self.names)
        self.names.append(name)
        self.graph.add_node(n, layer=layer, host=False, **attrs)
        return n

    def link(self, u: int, v: int, tier: str, rate_gbps: float | None = None) -> None:
        """A link of this tier: its delay from the tier, its rate too unless given."""
        spec = self.topo.tier_link(tier)
        self.edge(u, v, tier, spec.rate_gbps if rate_gbps is None else rate_gbps, spec.delay_ns)

    def edge(self, u: int, v: int, tier: str, rate_gbps: float, delay_ns: float, **attrs) -> None:
        """A link of the given rate and delay, in the engine's units (bit/s, ps), with extra attributes."""
        self.graph.add_edge(u, v, tier=tier, rate_bps=gbps_to_bps(rate_gbps), prop_ps=ns_to_ps(delay_ns), **attrs)
        self.links += 1


def fabric_size(topo) -> tuple[int, int]:
    """(hosts, nodes) of a topology section, from its numbers alone (before building anything)."""
    if isinstance(topo, SingleSwitch):
        return topo.hosts, topo.hosts + 1
    if isinstance(topo, FatTree):
        half = topo.k // 2
        hosts = topo.k * half * half * topo.oversubscription
        return hosts, hosts + topo.k * topo.k + half * half
    if isinstance(topo, LeafSpine):
        hosts = topo.leaves * topo.hosts_per_leaf
        return hosts, hosts + topo.leaves + topo.spines
    if isinstance(topo, Fred):
        return topo.npus, topo.npus + topo.io_controllers + topo.npus // topo.group_size + 1
    if isinstance(topo, (Torus, Mesh)):
        routers = int(np.prod(topo.dims))
        io = getattr(topo, "io_controllers", 0)
        return routers * topo.hosts_per_node, routers * (topo.hosts_per_node + 1) + io
    if isinstance(topo, Custom):
        return topo.n_nodes - len(set(topo.switches)), topo.n_nodes
    if isinstance(topo, RailOptimized):
        gpus = topo.nodes * topo.gpus_per_node
        return gpus, 2 * gpus + topo.nodes + topo.gpus_per_node * topo.leaves_per_rail + topo.spines
    npus = int(np.prod([d.size for d in topo.dims]))
    switches = sum(npus // d.size for d in topo.dims if d.kind == "switch")
    return npus, 2 * npus + switches


def build_fabric(topo) -> Fabric:
    """The networkx fabric of a validated ``topology`` section, flattened into ports."""
    if isinstance(topo, SingleSwitch):
        fabric = _single_switch(topo)
    elif isinstance(topo, FatTree):
        fabric = _fat_tree(topo)
    elif isinstance(topo, LeafSpine):
        fabric = _leaf_spine(topo)
    elif isinstance(topo, Fred):
        fabric = _fred(topo)
    elif isinstance(topo, (Torus, Mesh)):
        fabric = _grid(topo, wrap=isinstance(topo, Torus))
    elif isinstance(topo, MultiDim):
        fabric = _multi_dim(topo)
    elif isinstance(topo, RailOptimized):
        fabric = _rail_optimized(topo)
    elif isinstance(topo, Custom):
        fabric = _custom(topo)
    else:  # pragma: no cover - the schema admits no other kind
        raise TypeError(topo)
    return flatten(fabric)


def _single_switch(topo: SingleSwitch) -> Fabric:
    b = _Builder(topo, topo.hosts)
    sw = b.switch("sw0", layer=1)
    for h in range(topo.hosts):
        b.link(h, sw, "host")
    return Fabric("single_switch", b.graph, topo.hosts, b.names, "ecmp")


def _fat_tree(topo: FatTree) -> Fabric:
    k = topo.k
    half = k // 2
    per_edge = half * topo.oversubscription
    n_hosts = k * half * per_edge
    b = _Builder(topo, n_hosts)
    edges = [[b.switch(f"edge{p}.{i}", layer=1, pod=p) for i in range(half)] for p in range(k)]
    aggs = [[b.switch(f"agg{p}.{i}", layer=2, pod=p) for i in range(half)] for p in range(k)]
    cores = [b.switch(f"core{c}", layer=3) for c in range(half * half)]
    host = 0
    for p in range(k):
        for i in range(half):
            for _ in range(per_edge):
                b.link(host, edges[p][i], "host")
                host += 1
    for p in range(k):
        for i in range(half):
            for j in range(half):
                b.link(edges[p][i], aggs[p][j], "edge_agg")
        for j in range(half):  # aggregation switch j reaches cores j*half .. j*half+half-1
            for c in range(half):
                b.link(aggs[p][j], cores[j * half + c], "agg_core")
    return Fabric("fat_tree", b.graph, n_hosts, b.names, "ecmp")


def _leaf_spine(topo: LeafSpine) -> Fabric:
    n_hosts = topo.leaves * topo.hosts_per_leaf
    b = _Builder(topo, n_hosts)
    leaves = [b.switch(f"leaf{i}", layer=1) for i in range(topo.leaves)]
    spines = [b.switch(f"spine{i}", layer=2) for i in range(topo.spines)]
    for h in range(n_hosts):
        b.link(h, leaves[h // topo.hosts_per_leaf], "host")
    for leaf in leaves:
        for spine in spines:
            b.link(leaf, spine, "leaf_spine")
    return Fabric("leaf_spine", b.graph, n_hosts, b.names, "ecmp")


def _fred(topo: Fred) -> Fabric:
    """NPUs group by group under L1 switches ``l1.<i>``, those under the switch ``l2``."""
    b = _Builder(topo, topo.npus)
    io = b.io_controllers(topo.io_controllers)
    groups = topo.npus // topo.group_size
    l1 = [b.switch(f"l1.{i}", layer=1) for i in range(groups)]
    top = b.switch("l2", layer=2)
    for i, node in enumerate(io):
        b.link(node, l1[i % groups], "io", topo.io_rate_gbps)
    for h in range(topo.npus):
        b.link(h, l1[h // topo.group_size], "host", topo.npu_rate_gbps)
    for s in l1:
        b.link(s, top, "uplink", topo.uplink_rate_gbps)
    return Fabric("fred", b.graph, topo.npus, b.names, "ecmp", n_io=len(io))


def _grid(topo, wrap: bool) -> Fabric:
    dims = tuple(topo.dims)
    coords = list(product(*(range(d) for d in dims)))  # row-major, last dimension fastest
    n_hosts = len(coords) * topo.hosts_per_node
    b = _Builder(topo, n_hosts)
    io = b.io_controllers(getattr(topo, "io_controllers", 0))
    router = {c: b.switch("r" + "_".join(map(str, c)), layer=1, coord=c) for c in coords}
    for i, c in enumerate(coords):
        for j in range(topo.hosts_per_node):
            b.link(i * topo.hosts_per_node + j, router[c], "host")
    edge = _edge_routers(dims) if io else []
    for i, node in enumerate(io):  # spread evenly around the edge, clockwise from router (0, 0)
        b.link(node, router[edge[i * len(edge) // len(io)]], "io", topo.io_rate_gbps)
    for c in coords:
        for d, size in enumerate(dims):
            nxt = list(c)
            nxt[d] = c[d] + 1
            if nxt[d] == size:
                if not wrap or size <= 2:  # a ring of 2 is one link
                    continue
                nxt[d] = 0
            b.link(router[c], router[tuple(nxt)], "fabric")
    kind = "torus" if wrap else "mesh"
    host_coords = [c for c in coords for _ in range(topo.hosts_per_node)]
    link = topo.tier_link("fabric")
    return Fabric(
        kind,
        b.graph,
        n_hosts,
        b.names,
        "dor",
        dims=dims,
        wrap=wrap,
        host_coords=host_coords,
        n_io=len(io),
        dim_rates_bps=(gbps_to_bps(link.rate_gbps),) * len(dims),
        dim_delays_s=(ns_to_s(link.delay_ns),) * len(dims),
        dim_hops=(1,) * len(dims),
    )


def _edge_routers(dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """The routers on a 2-D mesh's edge, clockwise from (0, 0): along the first row, down the
    last column, back along the last row, up the first column."""
    rows, cols = dims
    ring = [(0, c) for c in range(cols)] + [(r, cols - 1) for r in range(1, rows)]
    if rows > 1:
        ring += [(rows - 1, c) for c in range(cols - 2, -1, -1)]
    if cols > 1:
        ring += [(r, 0) for r in range(rows - 2, 0, -1)]
    return ring


def _multi_dim(topo: MultiDim) -> Fabric:
    """NPU i has coordinate (i mod s0, i // s0 mod s1, ...); it is host i behind router i.
    Per dimension, the NPUs that differ only in that coordinate form a ring, a full mesh or
    hang off one switch. Shortest-path ECMP routes between them.

    Every NPU has a host link from its router (tier ``host``), by which all its traffic
    arrives. With ``nic: shared`` it also sends by it. With ``nic: per_link`` it sends by one
    link per dimension link of its router (tier ``nic``, that link's rate, the host link's
    delay): a packet sent by it leaves the router by that dimension link (``port_pass``; the
    engine passes it on cut-through), and the NIC picks among them by the routes of its
    router."""
    sizes = tuple(d.size for d in topo.dims)
    n = int(np.prod(sizes))
    coords = [tuple(int(x) for x in np.unravel_index(i, sizes, order="F")) for i in range(n)]
    b = _Builder(topo, n)
    per_link = topo.nic == "per_link"
    if per_link:  # a host and its router share several links
        b.graph = nx.MultiGraph(b.graph)
    routers = [b.switch(f"npu{i}", layer=1, coord=coords[i]) for i in range(n)]
    injection = sum(d.rate_gbps * d.links() for d in topo.dims)
    host_link = topo.tiers.get("host")
    rate = host_link.rate_gbps if host_link and host_link.rate_gbps is not None else injection
    delay = host_link.delay_ns if host_link and host_link.delay_ns is not None else 0.0
    for i in range(n):
        b.edge(i, routers[i], "host", rate, delay)
    router_ids = range(routers[0], routers[0] + n)
    nic_links: list | None = [] if per_link else None
    for k, dim in enumerate(topo.dims):
        for group in _groups_along(sizes, k):
            members = [routers[i] for i in group]
            if dim.kind == "switch":
                hub = b.switch(f"dim{k}sw" + "_".join(map(str, _without(coords[group[0]], k))), layer=2)
                pairs = [(m, hub) for m in members]
            elif dim.kind == "fully_connected":
                pairs = [(u, v) for a, u in enumerate(members) for v in members[a + 1 :]]
            else:  # ring; a ring of 2 is one link
                pairs = [(members[a], members[(a + 1) % len(members)]) for a in range(len(members))]
                pairs = pairs[:1] if len(members) == 2 else pairs
            for u, v in pairs:
                _router_link(b, u, v, f"dim{k}", dim.rate_gbps, dim.delay_ns, router_ids, nic_links)
    if nic_links is not None:
        _nic_links(b, nic_links, router_ids, delay)
    return Fabric(
        "multi_dim",
        b.graph,
        n,
        b.names,
        "ecmp",
        dims=sizes,
        host_coords=coords,
        dim_rates_bps=tuple(gbps_to_bps(d.rate_gbps) for d in topo.dims),
        dim_delays_s=tuple(ns_to_s(d.delay_ns) for d in topo.dims),
        dim_hops=tuple(2 if d.kind == "switch" else 1 for d in topo.dims),
        dim_algorithms=topo.algorithms(),
        dim_links=tuple(d.links() for d in topo.dims),
    )


def _router_link(
    b: _Builder, u: int, v: int, tier: str, rate_gbps: float, delay_ns: float, routers: range, nic_links: list | None
) -> None:
    """A link from an NPU's router (multi_dim, rail_optimized). With a NIC port per link
    (``nic_links`` a list), each router end is noted for a NIC link that mirrors this one."""
    link_id = b.links
    b.edge(u, v, tier, rate_gbps, delay_ns, link_id=link_id)
    if nic_links is not None:
        nic_links += [(r, link_id, rate_gbps) for r in (u, v) if r in routers]


def _nic_links(b: _Builder, nic_links: list, routers: range, delay_ns: float) -> None:
    """The NIC links _router_link noted: host i's to its router ``routers[i]``, tier ``nic``, at
    the mirrored link's rate; the router passes what comes in by one onto the mirrored link
    (``port_pass``, cut-through)."""
    for r, link_id, rate_gbps in sorted(nic_links):
        b.edge(r - routers.start, r, "nic", rate_gbps, delay_ns, mirrors=link_id)


def _rail_optimized(topo: RailOptimized) -> Fabric:
    """GPU ``node * gpus_per_node + gpu`` is host h behind its router ``gpu<h>`` (coordinate
    (gpu, node)), as a multi_dim NPU with a NIC port per link: the router links to its node's
    NVSwitch ``nvs<node>`` (tier ``nvlink``) and to its rail's leaf ``rail<gpu>.leaf<i>``
    (tier ``rail``, i = node // nodes_per_leaf); every leaf links to every spine
    ``spine<s>`` (tier ``leaf_spine``). The host link into the GPU runs at its NVLink and NIC
    rates added up, with no delay, so scale-up and scale-out traffic meet there. Routing is
    routing.py's rail routing (``rail``, or ``rail_pxn`` with PXN)."""
    G, N, per_leaf = topo.gpus_per_node, topo.nodes, topo.leaf_size
    n = N * G
    coords: list[tuple[int, ...]] = [(h % G, h // G) for h in range(n)]
    b = _Builder(topo, n)
    b.graph = nx.MultiGraph(b.graph)  # a GPU and its router share several links
    routers = [b.switch(f"gpu{h}", layer=1, coord=coords[h], role="gpu", rail=h % G, node=h // G) for h in range(n)]
    nvswitches = [b.switch(f"nvs{m}", layer=2, role="nvswitch", node=m) for m in range(N)]
    leaves = [
        [b.switch(f"rail{g}.leaf{i}", layer=2, role="leaf", rail=g) for i in range(topo.leaves_per_rail)]
        for g in range(G)
    ]
    spines = [b.switch(f"spine{s}", layer=3, role="spine") for s in range(topo.spines)]
    for h in range(n):
        b.edge(h, routers[h], "host", topo.nvlink_rate_gbps + topo.nic_rate_gbps, 0.0)
    router_ids = range(routers[0], routers[0] + n)
    nic_links: list = []
    rail = topo.tier_link("rail")
    for h, (g, m) in enumerate(coords):
        _router_link(
            b, routers[h], nvswitches[m], "nvlink", topo.nvlink_rate_gbps, topo.nvlink_delay_ns, router_ids, nic_links
        )
        _router_link(
            b, routers[h], leaves[g][m // per_leaf], "rail", topo.nic_rate_gbps, rail.delay_ns, router_ids, nic_links
        )
    uplink = topo.tier_link("leaf_spine")
    for g in range(G):
        for leaf in leaves[g]:
            for spine in spines:
                b.edge(leaf, spine, "leaf_spine", topo.uplink_rate_gbps, uplink.delay_ns)
    _nic_links(b, nic_links, router_ids, 0.0)
    return Fabric(
        "rail_optimized",
        b.graph,
        n,
        b.names,
        "rail_pxn" if topo.pxn else "rail",
        dims=(G, N),
        host_coords=coords,
        dim_rates_bps=(gbps_to_bps(topo.nvlink_rate_gbps), gbps_to_bps(topo.nic_rate_gbps)),
        dim_delays_s=(ns_to_s(topo.nvlink_delay_ns), ns_to_s(rail.delay_ns)),
        dim_hops=(2, 2 if topo.leaves_per_rail == 1 else 4),
    )


def _custom(topo: Custom) -> Fabric:
    """Hosts in ascending node order, then switches (named ``sw`` + their node id); tier
    ``host`` for host links, ``fabric`` for the others."""
    switches = sorted(set(topo.switches))
    hosts = [v for v in range(topo.n_nodes) if v not in set(switches)]
    b = _Builder(topo, len(hosts))
    index = {v: i for i, v in enumerate(hosts)}
    for v in switches:
        index[v] = b.switch(f"sw{v}", layer=1)
    for a, c, rate_gbps, delay_ns in topo.links:
        tier = "host" if min(index[a], index[c]) < len(hosts) else "fabric"
        b.edge(index[a], index[c], tier, rate_gbps, delay_ns)
    return Fabric("custom", b.graph, len(hosts), b.names, "ecmp", node_ids=hosts + switches)


def _groups_along(sizes: tuple[int, ...], k: int) -> list[list[int]]:
    """NPU ids that differ only in coordinate k, each group ordered by that coordinate."""
    n = int(np.prod(sizes))
    ids = np.arange(n).reshape(sizes, order="F")
    moved = np.moveaxis(ids, k, -1).reshape(-1, sizes[k])
    return [list(map(int, row)) for row in moved]


def _without(coord: tuple[int, ...], k: int) -> tuple[int, ...]:
    return coord[:k] + coord[k + 1 :]


def flatten(fabric: Fabric) -> Fabric:
    """Give every link two ports (u->v, v->u) in edge order; fill the port arrays."""
    edges = sorted(fabric.graph.edges(data=True), key=lambda e: (min(e[0], e[1]), max(e[0], e[1])))
    n_ports = 2 * len(edges)
    node = np.empty(n_ports, np.int32)
    peer = np.empty(n_ports, np.int32)
    rate = np.empty(n_ports, np.int64)
    prop = np.empty(n_ports, np.int64)
    tiers = []
    node_ports: list[list[int]] = [[] for _ in range(fabric.n_nodes)]
    for i, (u, v, data) in enumerate(edges):
        u, v = min(u, v), max(u, v)
        for p, owner, other in ((2 * i, u, v), (2 * i + 1, v, u)):
            node[p] = owner
            peer[p] = 2 * i + 1 if p == 2 * i else 2 * i
            rate[p] = data["rate_bps"]
            prop[p] = data["prop_ps"]
            tiers.append(data["tier"])
            node_ports[owner].append(p)
    fabric.port_node, fabric.port_peer = node, peer
    fabric.port_rate_bps, fabric.port_prop_ps = rate, prop
    fabric.port_tier, fabric.node_ports = tiers, node_ports
    fabric.port_pass = _pass_ports(edges, node)
    return fabric


def _pass_ports(edges: list, port_node: np.ndarray) -> np.ndarray:
    """port_pass for flattened edges: the switch end of a link that ``mirrors`` another (a
    multi_dim NIC link) passes what arrives on it to its own port on the mirrored link."""
    out = np.full(len(port_node), -1, np.int32)
    own = {}  # (link id, owner node) -> port
    for i, (_, _, data) in enumerate(edges):
        if "link_id" in data:
            own[data["link_id"], int(port_node[2 * i])] = 2 * i
            own[data["link_id"], int(port_node[2 * i + 1])] = 2 * i + 1
    for i, (_, _, data) in enumerate(edges):
        if "mirrors" in data:
            switch_end = 2 * i + 1  # the larger node id: switches come after hosts
            out[switch_end] = own[data["mirrors"], int(port_node[switch_end])]
    return out
