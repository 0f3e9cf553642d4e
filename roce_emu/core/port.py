"""Ports: pick the next packet, serialise it, hand it to the link; switch forwarding.

A port serialises one packet at a time (store-and-forward). Control traffic has strict
priority; data priorities are served round-robin unless paused by PFC. Switches
account a data packet (and an ACK queued with data, cfg[CFG_ACK_WITH_DATA]) in the MMU
on arrival and release it, marking data with ECN, when it starts to leave. A port whose
link is down sends nothing: a switch discards what is queued for it (stale routes still
point there until they converge), a NIC holds it. Packet trains (sim.fast_forward: trains) live
in trains.py; this module calls its hooks where a train changes what a port does.

World arrays: reads pq, qp; writes stats, meta, rng, ev, kick, pkt, port.
"""

from .cc import dispatch as cc
from .heap import heap_push
from .jit import njit
from .kinds import (
    C_CTRL_DROPPED,
    CTRL_PRIO,
    EV_ARRIVE,
    EV_TX_DONE,
    INV_KICKS_FULL,
    I64,
    M_KICKS,
    NO_ARG,
    NPRIO,
    PK_DATA,
)
from .jitter import arrival_ps
from .mmu import admit, count_drop, ecn_mark, release
from . import trains
from .nic import next_data_packet
from .packets import count_sent, fifo_pop, fifo_push, invariant_broken, pkt_free, pkt_lose, wire_bytes
from .pfc import check_pause, check_resume, is_paused, is_pfc
from .paths import egress_from, ser_ps
from .rng import rand_unit


@njit
def kick(w, p):
    """Ask port p to start sending if it is idle (processed by drain_kicks)."""
    n = w.meta[M_KICKS]
    if n < w.kick.shape[0]:
        w.kick[n] = p
        w.meta[M_KICKS] = n + 1
    else:
        invariant_broken(w, INV_KICKS_FULL, p)


@njit(inline="always")
def drain_kicks(w, t):
    while w.meta[M_KICKS] > 0:
        n = w.meta[M_KICKS] - 1
        w.meta[M_KICKS] = n
        _try_send(w, w.kick[n], t)


@njit(inline="always")
def _switch_dequeue(w, p):
    """Take the next packet from a switch port's round-robin over unpaused priorities: data, or
    ACKs queued with it (cfg[CFG_ACK_WITH_DATA]); only data is ECN-marked."""
    pt = w.port[p]
    start = pt["rr_prio"]
    for i in range(1, NPRIO):
        prio = 1 + (start + i - 1) % (NPRIO - 1)
        q = w.pq[p, prio]
        if q["head"] >= 0 and not is_paused(w, p, prio):
            pt["rr_prio"] = prio % (NPRIO - 1)
            k = fifo_pop(w, p, prio)
            _leave_switch(w, p, k)
            if w.pkt[k]["kind"] == PK_DATA and ecn_mark(w, p, prio):
                w.pkt[k]["ecn"] = 1
            return k
    return -1


@njit
def _leave_switch(w, p, k):
    """A packet leaves switch port p's data queue: free its buffer, XON its ingress if due."""
    pk = w.pkt[k]
    node = w.port[p]["node"]
    p_in = pk["in_port"]
    release(w, node, p_in, I64(pk["prio"]), pk["frame_bytes"])
    if check_resume(w, node, p_in, I64(pk["prio"])):
        kick(w, p_in)


@njit
def _discard_queued(w, p):
    """Switch port p's link is down: everything queued for it is lost."""
    for prio in range(NPRIO):
        while w.pq[p, prio]["head"] >= 0:
            k = fifo_pop(w, p, I64(prio))
            if prio != CTRL_PRIO:
                _leave_switch(w, p, k)
            pkt_lose(w, k)


@njit(inline="always")
def _try_send(w, p, t):
    pt = w.port[p]
    if pt["busy"] != 0:
        trains.control_inside_train(w, p, t)
        return
    if pt["down"] != 0:
        if pt["at_host"] == 0:
            _discard_queued(w, p)
        return
    if w.pq[p, CTRL_PRIO]["head"] >= 0:
        k = fifo_pop(w, p, CTRL_PRIO)
    elif pt["at_host"] != 0:
        k = next_data_packet(w, p, t)
    else:
        k = _switch_dequeue(w, p)
    if k < 0:
        return
    pk = w.pkt[k]
    n = I64(pk["train_len"])
    pt["busy"] = 1
    pt["tx_pkt"] = k
    wire = wire_bytes(w, k)
    if pk["kind"] == PK_DATA:
        pt["tx_data_pkts"] += n
        if pt["at_host"] == 0:
            cc.on_switch_egress(w, k, p, t)
    count_sent(w, p, I64(pk["prio"]), wire)
    end = t + ser_ps(wire, pt["rate_bps"])
    if pt["cut_through"] != 0:
        # a multi_dim NIC link: its router passes the packet (or train) onto the dimension link
        # as its bits come in, so that it leaves there as from a NIC on that link itself; the
        # port keeps a train until it has left, so that it can still be cut (trains.cut_train)
        pk["last_in_ps"] = end + pt["prop_ps"]  # a train's last bit is in at the router
        heap_push(w.ev, w.meta, arrival_ps(w, p, k, t + pt["prop_ps"]), EV_ARRIVE, I64(k), I64(pt["peer_port"]))
    end = trains.on_send(w, p, k, n, wire, t, end)
    heap_push(w.ev, w.meta, end, EV_TX_DONE, I64(p), NO_ARG)


@njit(inline="always")
def on_tx_done(w, p, t):
    """Last bit left port p: the packet arrives at the peer after the propagation delay."""
    pt = w.port[p]
    if trains.stale_end(w, p, t):
        return
    k = pt["tx_pkt"]
    pt["busy"] = 0
    pt["tx_pkt"] = -1
    if k < 0 or pt["cut_through"] != 0:  # a train already on its way (trains.on_send), or passed on
        kick(w, p)
        return
    if pt["down"] != 0 or (pt["loss"] > 0.0 and not is_pfc(w.pkt[k]["kind"]) and rand_unit(w.rng) < pt["loss"]):
        pkt_lose(w, k)
    elif w.pkt[k]["train_len"] == 1:
        heap_push(w.ev, w.meta, arrival_ps(w, p, k, t + pt["prop_ps"]), EV_ARRIVE, I64(k), I64(pt["peer_port"]))
    else:  # a train its NIC kept until it had left
        trains.left_nic(w, p, k, t)
    kick(w, p)


@njit(inline="always")
def on_switch_arrive(w, k, p_in, t):
    """Forward a packet that arrived at a switch on ingress port p_in."""
    pk = w.pkt[k]
    node = w.port[p_in]["node"]
    f = pk["qp"]
    e = egress_from(w, p_in, I64(pk["dst"]), w.qp[f]["ecmp_hash"])
    if e < 0 or w.port[e]["down"] != 0:  # cut off, or a stale route to a dead link
        pkt_lose(w, k)
        return
    prio = pk["prio"]
    pk["in_port"] = p_in
    if trains.through_switch(w, k, p_in, e, I64(f), t):
        return
    if prio == CTRL_PRIO:
        fifo_push(w, e, CTRL_PRIO, I64(k))
        kick(w, e)
        return
    if not admit(w, node, p_in, prio, pk["frame_bytes"], I64(pk["train_len"])):
        if pk["kind"] == PK_DATA:
            count_drop(w, p_in, f)
        else:  # an ACK queued with data (cfg[CFG_ACK_WITH_DATA])
            w.stats[C_CTRL_DROPPED] += 1
        pkt_free(w, k)
        return
    fifo_push(w, e, I64(prio), I64(k))
    if check_pause(w, node, p_in, prio):
        kick(w, p_in)
    kick(w, e)
