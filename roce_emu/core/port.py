"""Ports: pick the next packet, serialise it, hand it to the link; switch forwarding.

A port serialises one packet at a time (store-and-forward). Control traffic has strict
priority; data priorities are served round-robin unless paused by PFC. Switches
account a data packet in the MMU on arrival and release it, marking ECN, when it
starts to leave.
"""
from . import cc
from .heap import heap_push
from .jit import njit
from .kinds import (CC_HPCC, CFG_CC, CFG_IFG, CFG_N_HOSTS, CTRL_PRIO, EV_ARRIVE, EV_TX_DONE, I64, KICK_CAP,
                    M_KICKS, NO_ARG, NPRIO, PK_DATA)
from .mmu import admit, check_pause, check_resume, count_drop, ecn_mark, release
from .nic import next_data_packet
from .packets import fifo_pop, fifo_push, pkt_free
from .paths import route_pick, ser_ps


@njit
def kick(w, p):
    """Ask port p to start sending if it is idle (processed by drain_kicks)."""
    n = w.meta[M_KICKS]
    if n < KICK_CAP:
        w.kick[n] = p
        w.meta[M_KICKS] = n + 1


@njit
def drain_kicks(w, t):
    while w.meta[M_KICKS] > 0:
        n = w.meta[M_KICKS] - 1
        w.meta[M_KICKS] = n
        _try_send(w, w.kick[n], t)


@njit
def _switch_dequeue(w, p):
    """Take the next data packet from a switch port's round-robin over unpaused priorities."""
    pt = w.port[p]
    start = pt["rr_prio"]
    for i in range(1, NPRIO):
        prio = 1 + (start + i - 1) % (NPRIO - 1)
        q = w.pq[p, prio]
        if q["head"] >= 0 and q["paused"] == 0:
            pt["rr_prio"] = prio % (NPRIO - 1)
            k = fifo_pop(w, p, prio)
            node = pt["node"]
            pk = w.pkt[k]
            p_in = pk["in_port"]
            release(w, node, p_in, prio, pk["frame_bytes"])
            if ecn_mark(w, p, prio):
                pk["ecn"] = 1
            if check_resume(w, node, p_in, prio):
                kick(w, p_in)
            return k
    return -1


@njit
def _try_send(w, p, t):
    pt = w.port[p]
    if pt["busy"] != 0:
        return
    if w.pq[p, CTRL_PRIO]["head"] >= 0:
        k = fifo_pop(w, p, CTRL_PRIO)
    elif pt["at_host"] != 0:
        k = next_data_packet(w, p, t)
    else:
        k = _switch_dequeue(w, p)
    if k < 0:
        return
    pt["busy"] = 1
    pt["tx_pkt"] = k
    wire = w.pkt[k]["frame_bytes"] + w.cfg[CFG_IFG]
    if w.pkt[k]["kind"] == PK_DATA:
        pt["tx_data_pkts"] += 1
        if pt["at_host"] == 0 and w.cfg[CFG_CC] == CC_HPCC:
            cc.stamp_int(w, k, p, t)
    pt["tx_bytes"] += wire
    heap_push(w.ev, w.meta, t + ser_ps(wire, pt["rate_bps"]), EV_TX_DONE, I64(p), NO_ARG)


@njit
def on_tx_done(w, p, t):
    """Last bit left port p: the packet arrives at the peer after the propagation delay."""
    pt = w.port[p]
    k = pt["tx_pkt"]
    pt["busy"] = 0
    pt["tx_pkt"] = -1
    heap_push(w.ev, w.meta, t + pt["prop_ps"], EV_ARRIVE, I64(k), I64(pt["peer_port"]))
    kick(w, p)


@njit
def on_switch_arrive(w, k, p_in, t):
    """Forward a packet that arrived at a switch on ingress port p_in."""
    pk = w.pkt[k]
    node = w.port[p_in]["node"]
    f = pk["flow"]
    e = route_pick(w.route_off, w.route_ports, w.cfg[CFG_N_HOSTS], I64(node), I64(pk["dst"]),
                   w.flow[f]["ecmp_hash"])
    if pk["kind"] != PK_DATA:
        fifo_push(w, e, CTRL_PRIO, I64(k))
        kick(w, e)
        return
    prio = pk["prio"]
    if not admit(w, node, p_in, prio, pk["frame_bytes"]):
        count_drop(w, p_in, f)
        pkt_free(w, k)
        return
    pk["in_port"] = p_in
    fifo_push(w, e, I64(prio), I64(k))
    if check_pause(w, node, p_in, prio):
        kick(w, p_in)
    kick(w, e)
