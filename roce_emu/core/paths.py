"""Routing lookups (ECMP choice by flow hash), a flow's path, and serialisation time.

The closed forms of an idle network (ideal FCTs, base RTTs) are in ideal.py.

World arrays: reads cfg, meta, port, route_off, route_ports; writes none.
"""

import numpy as np

from .jit import njit, njit_alloc
from .kinds import CFG_N_HOSTS, M_ROUTE_EPOCH
from .rng import mix64


@njit
def route_pick(route_off, route_ports, n_hosts, node, dst, ecmp_hash):
    """Egress port at ``node`` towards host ``dst``: one of the equal-cost choices, by flow hash;
    -1 if the node has no route (a failure cut it off)."""
    row = node * n_hosts + dst
    lo = route_off[row]
    n = route_off[row + 1] - lo
    if n == 1:
        return np.int64(route_ports[lo])
    if n <= 0:
        return np.int64(-1)
    return np.int64(route_ports[lo + np.int64(mix64(ecmp_hash, node) % np.uint64(n))])


@njit
def egress_after(route_off, route_ports, peer_port, pass_to, n_hosts, p, node, dst, ecmp_hash):
    """route_pick at ``node`` for a packet that came over port p (-1: it starts there), unless
    the port it arrived on passes it on (``pass_to``; the engine's egress_from also routes
    around a dead link)."""
    if p >= 0 and pass_to[peer_port[p]] >= 0:
        return np.int64(pass_to[peer_port[p]])
    return route_pick(route_off, route_ports, n_hosts, node, dst, ecmp_hash)


@njit_alloc
def first_hops(route_off, route_ports, n_hosts, src, dst, ecmp_hash):
    """route_pick at each flow's source host: the NIC port every flow leaves by."""
    out = np.empty(src.shape[0], np.int64)
    for f in range(src.shape[0]):
        out[f] = route_pick(route_off, route_ports, n_hosts, src[f], dst[f], ecmp_hash[f])
    return out


@njit
def next_hop(w, node, dst, ecmp_hash):
    """Egress port at ``node`` towards host ``dst`` in the routing tables in use now."""
    return route_pick(w.route_off[w.meta[M_ROUTE_EPOCH]], w.route_ports, w.cfg[CFG_N_HOSTS], node, dst, ecmp_hash)


@njit
def egress_from(w, p_in, dst, ecmp_hash):
    """Egress port for a packet to host ``dst`` that arrived on port p_in: the port p_in passes
    it to (a multi_dim NIC link's dimension link) while that link is up, else by the routes."""
    e = np.int64(w.port[p_in]["pass_to"])
    if e < 0 or w.port[e]["down"] != 0:
        e = next_hop(w, np.int64(w.port[p_in]["node"]), dst, ecmp_hash)
    return e


PATH_END = np.int64(-1)  #: next_egress: the link ends at the destination
NO_ROUTE = np.int64(-2)  #: next_egress: the next node has no route to the destination


@njit
def next_egress(w, p, dst, ecmp_hash):
    """The egress port after port p on a flow's path to host ``dst`` (the routes in use now),
    PATH_END where p's link ends at dst, NO_ROUTE where the next node has none."""
    q = w.port[p]["peer_port"]
    node = np.int64(w.port[q]["node"])
    if node == dst:
        return PATH_END
    e = egress_from(w, q, dst, ecmp_hash)
    return e if e >= 0 else NO_ROUTE


@njit
def path_into(out, route_off, route_ports, port_node, peer_port, pass_to, n_hosts, src, dst, ecmp_hash):
    """Write into out (room for 64) the ports a packet of the flow crosses from host src to host
    dst (its node is src, then switches); return how many."""
    n = 0
    node = src
    while node != dst or n == 0:
        p = egress_after(
            route_off, route_ports, peer_port, pass_to, n_hosts, out[n - 1] if n else -1, node, dst, ecmp_hash
        )
        if p < 0:
            break
        out[n] = p
        n += 1
        node = port_node[peer_port[p]]
        if node == dst or n == 64:
            break
    return n


@njit_alloc
def flow_path(route_off, route_ports, port_node, peer_port, pass_to, n_hosts, src, dst, ecmp_hash):
    """Ports a packet of the flow crosses from host src to host dst (path_into)."""
    out = np.empty(64, np.int32)
    return out[: path_into(out, route_off, route_ports, port_node, peer_port, pass_to, n_hosts, src, dst, ecmp_hash)]


@njit
def ser_ps(nbytes, rate_bps):
    """Serialisation time of nbytes at rate_bps, floored to the picosecond."""
    return nbytes * 8_000_000_000_000 // rate_bps
