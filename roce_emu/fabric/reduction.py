"""In-switch reduction, the fabric's side of ``algorithm: in_network`` (docs/in_network.md).

**Reduction units.** A switch reduces in its units, one per port. A unit is an endpoint: it
owns a NIC, terminates the flows that bring a chunk to the switch through that port (and
acknowledges them, as a hop of SHARP's reliable aggregation tree does), and starts the flows
that leave through that port with a result. It hangs off its switch by an internal link at
the port's rate with no delay, so the internal link carries exactly what the port carries:
never a bottleneck of its own. The traffic still crosses the switch's shared buffer, its PFC
and its ECN, as any other.

**Reduction trees.** For a group of ranks and a chunk, the root is a switch of least
eccentricity to the switches the ranks hang off; chunk c takes the (c mod n)-th of the n
such switches, so the chunks of a collective spread over the spines (or cores). The tree is
made of shortest paths up to the root, each switch taking its lowest-numbered neighbour one
hop closer. A switch where two or more branches meet (or the root) is a *point*: it reduces.
A switch with a single branch below it only forwards, and the point above it takes that
branch's data straight from below.

No Numba: trees are built once per group of ranks and root, before the run.
"""

from dataclasses import dataclass, replace
from functools import lru_cache

import networkx as nx

from ..errors import ScenarioError
from .topology import Fabric, flatten

#: fabrics whose switches can reduce (the others have no switches, or switches that join a
#: dimension of NPUs rather than a tree); custom graphs of switches too, e.g. imported ns-3 ones
KINDS = ("single_switch", "leaf_spine", "fat_tree", "fred", "custom")


#: the algorithms that reduce in a node's NVSwitch (NCCL's NVLink SHARP) on a rail_optimized fabric
NVLS = ("nvls", "nvls_tree")


def check_reducing(fabric: Fabric, algorithm: str, hosts, source: str, key: str, hosts_key: str) -> None:
    """Refuse an in-switch collective the fabric cannot run (at ``key``, the algorithm's), or
    an NVLS one whose ranks (``hosts``, at ``hosts_key``) do not fit the nodes: ``in_network``
    needs switches that form a tree; ``nvls`` the GPUs of one node of a rail_optimized fabric,
    ``nvls_tree`` the same GPUs (rails) in every node it spans; both at least two GPUs a node.
    Other algorithms pass."""
    if algorithm == "in_network" and fabric.kind not in KINDS:
        raise ScenarioError(
            source,
            key,
            f"'in_network' is not allowed on a {fabric.kind} fabric: it needs "
            f"switches that form a tree (topology kinds: {', '.join(KINDS)})",
        )
    if algorithm not in NVLS:
        return
    if fabric.kind != "rail_optimized":
        raise ScenarioError(
            source,
            key,
            f"'{algorithm}' is not allowed on a {fabric.kind} fabric: it reduces in a node's NVSwitch "
            "(topology kind: rail_optimized)",
        )
    assert fabric.host_coords is not None  # a rail_optimized fabric's GPUs are (gpu, node)
    gpus: dict[int, list[int]] = {}
    for h in hosts:
        gpu, node = fabric.host_coords[h]
        gpus.setdefault(node, []).append(gpu)
    if algorithm == "nvls" and len(gpus) > 1:
        raise ScenarioError(
            source,
            hosts_key,
            f"'nvls' runs inside one node's NVSwitch; these ranks span nodes {', '.join(map(str, sorted(gpus)))} "
            "(across nodes: nvls_tree)",
        )
    first = min(gpus)
    for node, mine in sorted(gpus.items()):
        if len(mine) < 2:
            raise ScenarioError(
                source,
                hosts_key,
                f"'{algorithm}' needs at least 2 GPUs of each node; node {node} has GPU {mine[0]} alone",
            )
        if sorted(mine) != sorted(gpus[first]):
            raise ScenarioError(
                source,
                hosts_key,
                f"'{algorithm}' needs the same GPUs (one tree per rail) in every node: node {first} has "
                f"{sorted(gpus[first])}, node {node} {sorted(mine)}",
            )


def place_units(fabric: Fabric, workload) -> Fabric:
    """The fabric with the units the workload's reduction trees use (none: the fabric itself),
    and the workload's flows moved from the units' provisional ids (Reductions.unit) to theirs."""
    if not workload.units:
        return fabric
    with_units = add_units(fabric, workload.units)
    for ends in (workload.flows.src, workload.flows.dst):
        ends[ends >= fabric.n_nodes] += fabric.n_endpoints - fabric.n_nodes
    return with_units


def add_units(fabric: Fabric, ports: list[tuple[int, int]]) -> Fabric:
    """The fabric with a reduction unit on each of these switch ports, (switch, neighbour), as a
    new, flattened Fabric. Hosts and I/O controllers keep their ids; unit j gets the j-th id
    after them; switches move up by the number of units. A unit is named
    ``<switch>.unit.<neighbour>``."""
    assert fabric.n_units == 0, "reduction units are added once"
    H = fabric.n_endpoints  # hosts and I/O controllers keep their ids
    old = fabric.graph
    switches = range(H, fabric.n_nodes)
    unit_ports = [(s, v, fabric.port_towards(s, v)) for s, v in ports]
    U = len(unit_ports)

    def new_id(v: int) -> int:
        return v if v < H else v + U

    g = type(old)()  # a multi_dim fabric's NICs: several links between an NPU and its router
    names = list(fabric.names[:H])
    for h in range(H):
        g.add_node(h, **old.nodes[h])
    for j, (s, v, _) in enumerate(unit_ports):
        g.add_node(H + j, layer=0, host=True, unit=True)
        names.append(f"{fabric.names[s]}.unit.{fabric.names[v]}")
    for s in switches:
        g.add_node(new_id(s), **old.nodes[s])
        names.append(fabric.names[s])
    for u, v, data in old.edges(data=True):
        g.add_edge(new_id(u), new_id(v), **data)
    for j, (s, v, p) in enumerate(unit_ports):
        g.add_edge(new_id(s), H + j, tier="unit", rate_bps=int(fabric.port_rate_bps[p]), prop_ps=0)
    node_ids = fabric.node_ids
    if node_ids is not None:  # a custom fabric's file ids: units take new ones past them
        node_ids = node_ids[:H] + [max(node_ids) + 1 + j for j in range(U)] + node_ids[H:]
    return flatten(replace(fabric, graph=g, names=names, n_units=U, node_ids=node_ids))  # flatten() redoes the ports


@dataclass(frozen=True)
class Tree:
    """One reduction tree. ``inputs[q]`` lists what point q reduces, one entry per branch:
    (the neighbour whose port the branch comes in by, the branch's source: a rank, or the
    point below that reduced it). ``uplink[q]`` is the unit that sends point q's result up
    (and receives the final result back); the root has none. ``ranks[v]``: the ranks under a
    rank or point v."""

    root: int
    inputs: dict
    uplink: dict
    ranks: dict


class Reductions:
    """The reduction trees of a fabric (without units yet), the switches' reduction slots, whether
    they stream (``network.switch.reduction``), and the units the trees use, in the order they
    were first asked for (``ports``)."""

    def __init__(self, fabric: Fabric, switch):
        """``switch``: the scenario's network.switch (config.schema.Switch)."""
        self.fabric, self.slots = fabric, switch.slots
        self.streaming = switch.reduction == "streaming"
        self.ports: dict[tuple[int, int], int] = {}  # (switch, neighbour) -> unit index
        self._switch_graph = fabric.switch_graph()
        self._trees = lru_cache(maxsize=None)(self._tree)
        self._roots = lru_cache(maxsize=None)(self._root_choices)

    def unit(self, switch: int, neighbour: int) -> int:
        """The unit on this switch port, by a provisional id past every node of the fabric
        (place_units gives it its own once the workload is built)."""
        return self.fabric.n_nodes + self.ports.setdefault((switch, neighbour), len(self.ports))

    def tree(self, ranks, chunk: int) -> Tree:
        ranks = tuple(ranks)
        roots = self._roots(frozenset(self.fabric.host_attachment(r) for r in ranks))
        return self._trees(ranks, roots[chunk % len(roots)])

    def _root_choices(self, attach: frozenset) -> tuple[int, ...]:
        """The switches of least eccentricity to the attachment switches, in id order."""
        dist = [nx.single_source_shortest_path_length(self._switch_graph, a) for a in sorted(attach)]
        ecc = {s: max(d[s] for d in dist) for s in self._switch_graph if all(s in d for d in dist)}
        best = min(ecc.values())
        return tuple(sorted(s for s, e in ecc.items() if e == best))

    def _tree(self, ranks: tuple, root: int) -> Tree:
        fabric, g = self.fabric, self._switch_graph
        depth = nx.single_source_shortest_path_length(g, root)
        children: dict[int, list[int]] = {}
        at: dict[int, list[int]] = {}
        for r in ranks:
            v = fabric.host_attachment(r)
            at.setdefault(v, []).append(r)
            while v != root and v not in children.get(_parent(g, depth, v), []):
                up = _parent(g, depth, v)
                children.setdefault(up, []).append(v)
                v = up

        def branches(v):
            return [(r, r) for r in at.get(v, [])] + [(c, c) for c in sorted(children.get(v, []))]

        while len(branches(root)) == 1:  # everything hangs below one child: the root moves down
            root = branches(root)[0][1]
        inputs, uplink, under = {}, {}, {r: [r] for r in ranks}

        def source(v):
            """Follow single-branch switches down to the rank or the point the branch starts at."""
            while v not in under and len(branches(v)) == 1:
                v = branches(v)[0][1]
            return v

        def visit(q):
            inputs[q] = [(nb, source(v)) for nb, v in branches(q)]
            under[q] = []
            for _, src in inputs[q]:
                if src not in under:
                    visit(src)
                    uplink[src] = self.unit(src, _parent(g, depth, src))
                under[q].extend(under[src])

        visit(root)
        return Tree(root, inputs, uplink, under)


def _parent(g, depth: dict, v: int) -> int:
    """v's lowest-numbered neighbour one hop closer to the root."""
    return min(u for u in g.neighbors(v) if depth[u] == depth[v] - 1)
