"""Closed forms of an idle network, computed before and after a run, never in the event loop:
a flow's ideal FCT on its path (flows.csv's ``ideal_fct_ns``, the FCT slowdown's denominator)
and the largest base RTT over all routes (HPCC's T, docs/model.md §2.4).

World arrays: reads none; writes none.
"""

import numpy as np
from numba import types
from numba.typed import Dict

from .jit import njit, njit_alloc
from .paths import egress_after, path_into, ser_ps
from .rng import mix64


@njit_alloc
def _pipeline(arrive, sizes, rate_bps, prop_ps):
    """Store-and-forward finish times (plus propagation) of packets crossing one hop in order."""
    out = np.empty_like(arrive)
    free_at = np.int64(0)
    for i in range(arrive.shape[0]):
        start = max(arrive[i], free_at)
        free_at = start + ser_ps(sizes[i], rate_bps)
        out[i] = free_at + prop_ps
    return out


@njit_alloc
def ideal_fct_ps(size_bytes, mtu, data_hdr, ack_bytes, ifg, f_rate, f_prop, r_rate, r_prop):
    """FCT of a flow alone on an idle network, sent at line rate, ACKed per packet.

    Exact to the picosecond under the engine's rules: back-to-back packets with wire
    overhead, store-and-forward at every hop (f_rate, f_prop: those _stored_hops keeps),
    propagation, and the last packet's ACK
    back to the sender (which may queue behind the previous ACK). Full-size packets
    obey the closed form F_k(i) = sum_{j<=k} s_j + sum_{j<k} p_j + i * max_{j<=k} s_j,
    so only the tail of the flow is stepped explicitly.
    """
    n = (size_bytes + mtu - 1) // mtu
    tail = min(n, 64)
    first = n - tail  # index of the first packet stepped explicitly
    sizes = np.full(tail, mtu + data_hdr + ifg, np.int64)
    sizes[tail - 1] = size_bytes - (n - 1) * mtu + data_hdr + ifg
    # arrival times at each hop's input: the host's packets are all ready at 0
    arrive = np.zeros(tail, np.int64)
    s_sum = np.int64(0)
    p_sum = np.int64(0)
    s_max = np.int64(0)
    for h in range(f_rate.shape[0]):
        s_full = ser_ps(mtu + data_hdr + ifg, f_rate[h])
        s_sum += s_full
        s_max = max(s_max, s_full)
        hop = _pipeline(arrive, sizes, f_rate[h], f_prop[h])
        if first > 0:
            # packet first-1 (full size) finishes here at the closed-form time: later
            # packets cannot start before it
            prev_done = s_sum + p_sum + (first - 1) * s_max
            free_at = prev_done
            for i in range(tail):
                start = max(arrive[i], free_at)
                free_at = start + ser_ps(sizes[i], f_rate[h])
                hop[i] = free_at + f_prop[h]
        p_sum += f_prop[h]
        arrive = hop
    acks = np.full(tail, ack_bytes + ifg, np.int64)
    for h in range(r_rate.shape[0]):
        arrive = _pipeline(arrive, acks, r_rate[h], r_prop[h])
    return arrive[tail - 1]


@njit
def _stores(p, peer_port, pass_to):
    """Whether packets sent by port p are stored and forwarded where they arrive: not on a
    multi_dim NIC link, whose router passes them on as they come in (port._try_send)."""
    return pass_to[peer_port[p]] < 0


@njit
def _put_stored_hops(out, at, path, rate_bps, prop_ps, peer_port, pass_to):
    """Write into out from ``at`` the hops where a path's packets are stored and forwarded: how
    many, then each one's rate and delay; return where the next value goes. A multi_dim NIC
    link's router passes packets on as they come in (port._try_send), so that link costs its
    delay only, added to the next hop's."""
    n = 0
    carry = np.int64(0)
    for p in path:
        if not _stores(p, peer_port, pass_to):
            carry += prop_ps[p]
            continue
        out[at + 1 + 2 * n] = rate_bps[p]
        out[at + 2 + 2 * n] = prop_ps[p] + carry
        carry = 0
        n += 1
    out[at] = n
    return at + 1 + 2 * n


@njit_alloc
def _hops_at(values, at):
    """(rates, delays) of the stored hops _put_stored_hops wrote at ``at``, as arrays."""
    n = values[at]
    return values[at + 1 : at + 1 + 2 * n : 2].copy(), values[at + 2 : at + 2 + 2 * n : 2].copy()


@njit_alloc
def _stored_hops(path, rate_bps, prop_ps, peer_port, pass_to):
    """(rates, delays) of the hops where a path's packets are stored and forwarded (_put_stored_hops)."""
    out = np.empty(1 + 2 * path.shape[0], np.int64)
    _put_stored_hops(out, 0, path, rate_bps, prop_ps, peer_port, pass_to)
    return _hops_at(out, 0)


@njit_alloc
def flow_hops_and_ideal_fcts(
    route_off,
    route_ports,
    port_node,
    peer_port,
    pass_to,
    n_hosts,
    src,
    dst,
    ecmp_hash,
    size,
    mtu,
    data_hdr,
    ack_bytes,
    ifg,
    rate_bps,
    prop_ps,
):
    """For every flow: the links its data crosses and its ideal FCT (ideal_fct_ps) on its
    healthy paths (route epoch 0), in one pass without Python per flow. Flows of one size on
    hops of the same rates and delays have one ideal FCT, computed once: a collective's flows
    repeat a few of them (at 1024 NPUs, 8.4 M flows took 27 s to pipeline packet by packet).
    Each distinct input is kept whole in ``memo`` and compared on a hash match, so a collision
    costs a computation, never a wrong value."""
    n = src.shape[0]
    hops = np.empty(n, np.int64)
    ideal = np.empty(n, np.int64)
    seen = Dict.empty(key_type=types.int64, value_type=types.int64)  # hash -> where in memo
    memo = np.empty(1024, np.int64)  # per distinct input: the inputs, then its ideal FCT
    fwd = np.empty(64, np.int32)  # a path has at most 64 ports (paths.path_into)
    rev = np.empty(64, np.int32)
    inputs = np.empty(3 + 4 * 64, np.int64)  # the size, then each direction's _put_stored_hops
    used = 0
    routes = (route_off, route_ports, port_node, peer_port, pass_to, n_hosts)
    for f in range(n):
        n_fwd = path_into(fwd, *routes, src[f], dst[f], ecmp_hash[f])
        n_rev = path_into(rev, *routes, dst[f], src[f], ecmp_hash[f])
        hops[f] = n_fwd
        inputs[0] = size[f]
        at_rev = _put_stored_hops(inputs, 1, fwd[:n_fwd], rate_bps, prop_ps, peer_port, pass_to)
        m = _put_stored_hops(inputs, at_rev, rev[:n_rev], rate_bps, prop_ps, peer_port, pass_to)
        h = np.uint64(m)
        for v in inputs[:m]:
            h = mix64(h, v)
        key = np.int64(h >> np.uint64(1))
        at = seen[key] if key in seen else np.int64(-1)
        if at >= 0 and (memo[at : at + m] == inputs[:m]).all():
            ideal[f] = memo[at + m]
            continue
        f_rate, f_prop = _hops_at(inputs, 1)
        r_rate, r_prop = _hops_at(inputs, at_rev)
        ideal[f] = ideal_fct_ps(size[f], mtu, data_hdr, ack_bytes, ifg, f_rate, f_prop, r_rate, r_prop)
        if at >= 0:  # a collision: keep the first input
            continue
        if used + m + 1 > memo.shape[0]:
            grown = np.empty(2 * memo.shape[0] + m + 1, np.int64)
            grown[:used] = memo[:used]
            memo = grown
        seen[key] = used
        memo[used : used + m] = inputs[:m]
        memo[used + m] = ideal[f]
        used += m + 1
    return hops, ideal


@njit_alloc
def base_rtt_extremes(route_off, route_ports, port_node, peer_port, pass_to, rate_bps, prop_ps, n_hosts, frame_wire):
    """(largest base RTT in ps, most switch hops) over all host pairs' routes (first ECMP choice).

    The base RTT is the HPCC simulator's: twice the propagation delays plus one data
    frame's serialisation at every hop of the forward path where it is stored (docs/model.md
    §2.4)."""
    worst_rtt = np.int64(0)
    worst_hops = 0
    for src in range(n_hosts):
        for dst in range(n_hosts):
            if src == dst:
                continue
            node = src
            prop = np.int64(0)
            ser = np.int64(0)
            hops = 0
            p = np.int64(-1)
            while node != dst and hops < 1024:
                p = egress_after(route_off, route_ports, peer_port, pass_to, n_hosts, p, node, dst, np.int64(0))
                prop += prop_ps[p]
                if _stores(p, peer_port, pass_to):
                    ser += ser_ps(frame_wire, rate_bps[p])
                node = port_node[peer_port[p]]
                hops += 1
            worst_rtt = max(worst_rtt, 2 * prop + ser)
            worst_hops = max(worst_hops, hops - 1)  # links minus one: the switches crossed
    return worst_rtt, worst_hops
