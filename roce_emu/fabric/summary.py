"""Describe and draw a fabric: counts, diameter, bisection bandwidth, a picture."""

from pathlib import Path

import networkx as nx
import numpy as np

from ..images import image_metadata
from ..units import bps_to_gbps, ps_to_ns
from .topology import Fabric


def bisection_bps(fabric: Fabric) -> float:
    """Max flow between the host halves 0..H/2-1 and H/2..H-1 (link rates as capacities).

    Hosts are numbered pod by pod (fat-tree), leaf by leaf, row-major on grids, and node by
    node on a rail-optimised fabric, so this cut is the fabric's natural bisection. Where a
    host sends by NIC links of its own (``mirrors``: multi_dim, rail_optimized), those carry
    its traffic out and its host link carries what comes in; parallel links add up."""
    g = nx.DiGraph()
    edges = [(min(u, v), max(u, v), data) for u, v, data in fabric.graph.edges(data=True)]
    sends_by_nic = {u for u, _, data in edges if "mirrors" in data}
    for u, v, data in edges:
        one_way = "mirrors" in data or (data["tier"] == "host" and u in sends_by_nic)
        directions = [(u, v)] if "mirrors" in data else [(v, u)] if one_way else [(u, v), (v, u)]
        for a, b in directions:
            if g.has_edge(a, b):
                g[a][b]["capacity"] += data["rate_bps"]
            else:
                g.add_edge(a, b, capacity=data["rate_bps"])
    half = fabric.n_hosts // 2
    for h in range(fabric.n_hosts):
        if h < half:
            g.add_edge("A", h, capacity=float("inf"))
        else:
            g.add_edge(h, "B", capacity=float("inf"))
    value, _ = nx.maximum_flow(g, "A", "B")
    return float(value)


def host_diameter(fabric: Fabric) -> int:
    """Most links between two hosts on a shortest path."""
    switches = fabric.switch_graph()
    attach = {fabric.host_attachment(h) for h in range(fabric.n_hosts)}
    worst = 0
    for a in attach:
        dist = nx.single_source_shortest_path_length(switches, a)
        worst = max(worst, max(dist[b] for b in attach))
    return worst + 2


ROUTING = {
    "ecmp": "ECMP over shortest paths",
    "dor": "dimension order",
    "rail": "rail: NVSwitch within a node, ECMP over leaves and spines between nodes",
    "rail_pxn": "rail with PXN: NVSwitch within a node and to the destination's rail, then ECMP over that rail",
}


def describe(fabric: Fabric) -> dict:
    rates = sorted({bps_to_gbps(d["rate_bps"]) for _, _, d in fabric.graph.edges(data=True)})
    return {
        "kind": fabric.kind,
        "hosts": fabric.n_hosts,
        **({"I/O controllers": f"{fabric.n_io} (io0 .. io{fabric.n_io - 1})"} if fabric.n_io else {}),
        "switches": fabric.n_switches,
        "links": fabric.n_links,
        "link rates (Gb/s)": ", ".join(f"{r:g}" for r in rates),
        "diameter (links)": host_diameter(fabric),
        "bisection (Gb/s)": f"{bps_to_gbps(bisection_bps(fabric)):g}",
        "routing": ROUTING[fabric.routing],
        "node names": f"h0 .. h{fabric.n_hosts - 1}, {fabric.names[fabric.n_endpoints]} .. {fabric.names[-1]} "
        "(--links lists them)",
    }


def link_rows(fabric: Fabric) -> list[str]:
    """CSV lines: a header, then every link by its nodes' names, tier, rate and delay."""
    rows = ["node_a,node_b,tier,rate_gbps,delay_ns"]
    for u, v, d in sorted(fabric.graph.edges(data=True), key=lambda e: (min(e[:2]), max(e[:2]))):
        a, b = sorted((u, v))
        rows.append(
            f"{fabric.names[a]},{fabric.names[b]},{d['tier']},{bps_to_gbps(d['rate_bps']):g},{ps_to_ns(d['prop_ps']):g}"
        )
    return rows


def wrap_links(fabric: Fabric) -> set[tuple[int, int]]:
    """The links that close a ring of a torus or multi_dim fabric: their ends differ in one
    coordinate, by the size of that dimension minus one (the ring's last hop back to 0)."""
    g = fabric.graph
    out = set()
    for u, v in g.edges():
        a, b = g.nodes[u].get("coord"), g.nodes[v].get("coord")
        if a is None or b is None or len(a) != len(b):
            continue
        diff = [(i, abs(x - y)) for i, (x, y) in enumerate(zip(a, b)) if x != y]
        if len(diff) == 1 and fabric.dims[diff[0][0]] > 2 and diff[0][1] == fabric.dims[diff[0][0]] - 1:
            out.add((min(u, v), max(u, v)))
    return out


def layout(fabric: Fabric) -> dict:
    """Where draw puts each node: {node: (x, y)}. A grid (torus, mesh, multi_dim of two
    dimensions) puts its routers at (2 x coord[1], -2 x coord[0]), a ring around a circle, and
    each host below-right of its router. A multi_dim's dimension switch, which has no grid
    place, gets its own column right of the grid (one switch per row, at its row's height) or
    its own row below it (one per column), whichever its NPUs line up in; a ring's sits at the
    circle's centre. Other fabrics are drawn by layer."""
    g = fabric.graph
    if not (fabric.dims and len(fabric.dims) <= 2):
        return nx.multipartite_layout(g, subset_key="layer", align="horizontal")
    pos = {}
    dims = fabric.dims if len(fabric.dims) == 2 else (fabric.dims[0], 1)
    hubs = []  # multi_dim's dimension switches
    for n in range(fabric.n_endpoints, fabric.n_nodes):
        coord = g.nodes[n].get("coord")
        if coord is None:
            hubs.append(n)
            continue
        if len(fabric.dims) == 1:  # a ring: around a circle
            angle = np.pi / 2 - 2 * np.pi * coord[0] / fabric.dims[0]
            pos[n] = (2.0 * np.cos(angle) * fabric.dims[0] / 4, 2.0 * np.sin(angle) * fabric.dims[0] / 4)
            continue
        pos[n] = (coord[1] * 2.0, -coord[0] * 2.0)
    if pos:
        right = max(x for x, _ in pos.values()) + 2.0
        below = min(y for _, y in pos.values()) - 2.0
    for n in hubs:
        joined = [m for m in g.neighbors(n) if m in pos]
        xs, ys = zip(*(pos[m] for m in joined))
        spans = {d for d in range(len(fabric.dims)) if len({g.nodes[m]["coord"][d] for m in joined}) > 1}
        if len(fabric.dims) == 1:
            pos[n] = (0.0, 0.0)
        elif spans == {1}:  # its NPUs share a row: in the column right of the grid
            pos[n] = (right, float(np.mean(ys)))
        elif spans == {0}:  # they share a column: in the row below the grid
            pos[n] = (float(np.mean(xs)), below)
        else:
            pos[n] = (float(np.mean(xs)) + 0.7, float(np.mean(ys)) + 0.7)
    for h in range(fabric.n_hosts):
        x, y = pos[fabric.host_attachment(h)]
        pos[h] = (x + 0.6, y - 0.6 - 0.3 * (h % max(1, fabric.n_hosts // (dims[0] * dims[1]))))
    for io in range(fabric.n_hosts, fabric.n_endpoints):  # I/O controllers: on the other side
        x, y = pos[fabric.host_attachment(io)]
        pos[io] = (x - 0.6, y + 0.6)
    return pos


def dimension_switches(fabric: Fabric) -> list[int]:
    """A multi_dim fabric's dimension switches: the switches without grid coordinates."""
    if not fabric.dims:
        return []
    return [n for n in range(fabric.n_endpoints, fabric.n_nodes) if fabric.graph.nodes[n].get("coord") is None]


def draw(fabric: Fabric, path: Path) -> None:
    """Draw the fabric to ``path`` (.png, .pdf or .svg), creating its missing folders."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if fabric.kind == "rail_optimized":
        fig = _draw_rails(fabric, plt)
        _save(fig, path)
        plt.close(fig)
        return
    g = fabric.graph
    pos = layout(fabric)
    fig, ax = plt.subplots(figsize=(max(4.0, fabric.n_nodes**0.5 * 1.2), 4.0))
    hosts = list(range(fabric.n_hosts))
    hubs = dimension_switches(fabric)
    switches = [n for n in range(fabric.n_endpoints, fabric.n_nodes) if n not in hubs]
    wrap = wrap_links(fabric)
    fans = [(h, m) for h in hubs for m in g.neighbors(h)]  # a dimension switch's links to its NPUs
    straight = [e for e in g.edges() if e not in wrap and (e[1], e[0]) not in wrap and not set(e) & set(hubs)]
    nx.draw_networkx_edges(g, pos, edgelist=straight, ax=ax, width=0.6, alpha=0.6)
    if fans:  # arcs, since a switch's NPUs line up with it and straight links would lie on each other
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=fans,
            ax=ax,
            width=0.6,
            alpha=0.6,
            edge_color="#aa3377",
            arrows=True,
            arrowstyle="-",
            connectionstyle="arc3,rad=0.15",
            node_size=120,
        )
    if wrap:  # arcs bulging away from the grid, so they are not hidden behind their row or column
        centre = np.mean([pos[n] for n in range(fabric.n_endpoints, fabric.n_nodes)], axis=0)
        outward = []
        for u, v in sorted(wrap):
            (x1, y1), (x2, y2) = pos[u], pos[v]
            # matplotlib's arc3 puts the control point at the midpoint + rad * (dy, -dx)
            away = (y2 - y1) * ((x1 + x2) / 2 - centre[0]) - (x2 - x1) * ((y1 + y2) / 2 - centre[1])
            outward.append((u, v) if away >= 0 else (v, u))
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=outward,
            ax=ax,
            width=0.8,
            alpha=0.8,
            edge_color="#228833",
            style="dashed",
            arrows=True,
            arrowstyle="-",
            connectionstyle="arc3,rad=0.2",
            node_size=120,
        )
        ax.plot([], [], color="#228833", ls="--", lw=0.8, label="wrap-around link")
    nx.draw_networkx_nodes(
        g, pos, nodelist=switches, node_shape="s", node_size=120, node_color="#4477aa", ax=ax, label="switch"
    )
    if hubs:
        nx.draw_networkx_nodes(
            g,
            pos,
            nodelist=hubs,
            node_shape="s",
            node_size=120,
            node_color="#aa3377",
            ax=ax,
            label="dimension switch",
        )
    nx.draw_networkx_nodes(g, pos, nodelist=hosts, node_size=40, node_color="#ee6677", ax=ax, label="host")
    io_nodes = list(range(fabric.n_hosts, fabric.n_hosts + fabric.n_io))
    if io_nodes:
        nx.draw_networkx_nodes(
            g, pos, nodelist=io_nodes, node_shape="D", node_size=50, node_color="#ccbb44", ax=ax, label="I/O controller"
        )
    extra = f", {fabric.n_io} I/O controllers" if io_nodes else ""
    ax.set_title(f"{fabric.kind}: {fabric.n_hosts} hosts, {fabric.n_switches} switches{extra}")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # outside: never over a node
    ax.set_axis_off()
    _save(fig, path)
    plt.close(fig)


def _save(fig, path: Path) -> None:
    """Write the drawing signed as roce-emu's (images.py), so --overwrite may replace it."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, bbox_inches="tight", metadata=image_metadata(path))


def rail_layout(fabric: Fabric) -> dict:
    """Where _draw_rails puts each node of a rail_optimized fabric: GPUs in a row, node by node
    (a gap between nodes), each GPU's router on its GPU; each node's NVSwitch below its GPUs;
    the leaves above, those of one group of nodes over that group, in rail order; the spines
    in a row on top."""
    g = fabric.graph
    gpus, nodes = fabric.dims
    pos = {}
    for h in range(fabric.n_hosts):
        x = (h // gpus) * (gpus + 1) + h % gpus
        pos[h] = pos[fabric.host_attachment(h)] = (float(x), 0.0)
    leaves: dict[int, list[int]] = {}  # first node under the leaf -> the leaves, in rail order
    spines = []
    for n in range(fabric.n_endpoints, fabric.n_nodes):
        role = g.nodes[n]["role"]
        if role == "nvswitch":
            pos[n] = ((g.nodes[n]["node"] * (gpus + 1) + (gpus - 1) / 2), -1.5)
        elif role == "leaf":
            under = min(g.nodes[r]["node"] for r in g.neighbors(n) if g.nodes[r]["role"] == "gpu")
            leaves.setdefault(under, []).append(n)
        elif role == "spine":
            spines.append(n)
    starts = sorted(leaves)
    for i, first in enumerate(starts):
        last = starts[i + 1] - 1 if i + 1 < len(starts) else nodes - 1
        left, right = first * (gpus + 1), last * (gpus + 1) + gpus - 1
        row = sorted(leaves[first], key=lambda n: g.nodes[n]["rail"])
        for j, n in enumerate(row):
            pos[n] = (left + (right - left) * (j + 0.5) / len(row), 3.0)
    width = nodes * (gpus + 1) - 2
    for j, n in enumerate(spines):
        pos[n] = (width * (j + 0.5) / len(spines), 6.0)
    return pos


def _draw_rails(fabric: Fabric, plt):
    """A rail_optimized fabric: GPUs, their rail links and their leaves in their rail's colour,
    NVLinks to each node's NVSwitch in grey, leaf-spine links faint."""
    g = fabric.graph
    pos = rail_layout(fabric)
    gpus, nodes = fabric.dims
    palette = plt.get_cmap("tab10" if gpus <= 9 else "tab20").colors
    grey = {7} if gpus <= 9 else {14, 15}  # kept for the NVLinks

    def colour(rail: int):
        shown = [c for i, c in enumerate(palette) if i not in grey]
        return shown[rail % len(shown)]

    fig, ax = plt.subplots(figsize=(min(40.0, max(6.0, 0.16 * nodes * (gpus + 1))), 5.0))
    role = {n: g.nodes[n].get("role", "host") for n in g.nodes}
    by_tier: dict[str, list] = {}
    for u, v, data in g.edges(data=True):
        by_tier.setdefault(data["tier"], []).append((u, v))
    ax_edges = dict(G=g, pos=pos, ax=ax)
    nx.draw_networkx_edges(edgelist=by_tier.get("leaf_spine", []), width=0.4, alpha=0.25, **ax_edges)
    nx.draw_networkx_edges(edgelist=by_tier.get("nvlink", []), width=1.0, alpha=0.7, edge_color="#777777", **ax_edges)
    rail_edges = by_tier.get("rail", [])
    rail_of = [g.nodes[u if role[u] == "gpu" else v]["rail"] for u, v in rail_edges]
    nx.draw_networkx_edges(
        edgelist=rail_edges, width=0.7, alpha=0.7, edge_color=[colour(r) for r in rail_of], **ax_edges
    )
    spines = [n for n in g.nodes if role[n] == "spine"]
    nvs = [n for n in g.nodes if role[n] == "nvswitch"]
    nx.draw_networkx_nodes(g, pos, nodelist=spines, node_shape="s", node_size=90, node_color="#4477aa", ax=ax)
    nx.draw_networkx_nodes(g, pos, nodelist=nvs, node_shape="s", node_size=90, node_color="#555555", ax=ax)
    for r in range(gpus):
        leaves = [n for n in g.nodes if role[n] == "leaf" and g.nodes[n]["rail"] == r]
        hosts = [h for h in range(fabric.n_hosts) if h % gpus == r]
        nx.draw_networkx_nodes(g, pos, nodelist=leaves, node_shape="s", node_size=90, node_color=[colour(r)], ax=ax)
        nx.draw_networkx_nodes(g, pos, nodelist=hosts, node_size=30, node_color=[colour(r)], ax=ax, label=f"rail {r}")
    ax.plot([], [], "s", color="#4477aa", label="spine")
    ax.plot([], [], "s", color="#555555", label="NVSwitch")
    ax.plot([], [], "-", color="#777777", label="NVLink")
    for n in range(nodes):  # which server each group of GPUs is
        ax.annotate(f"node {n}", (n * (gpus + 1) + (gpus - 1) / 2, -2.3), ha="center", va="top", fontsize=7)
    ax.set_ylim(-2.8, 6.5)
    ax.set_title(
        f"rail_optimized: {nodes} nodes x {gpus} GPUs, {len(nvs)} NVSwitches, "
        f"{sum(role[n] == 'leaf' for n in g.nodes)} leaves, {len(spines)} spines (GPU h = node x {gpus} + rail)"
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_axis_off()
    return fig
