"""Ports: pick the next packet, serialise it, hand it to the link; switch forwarding.

A port serialises one packet at a time (store-and-forward). Control traffic has strict
priority; data priorities are served round-robin unless paused by PFC. Switches
account a data packet (and an ACK queued with data, cfg[CFG_ACK_WITH_DATA]) in the MMU
on arrival and release it, marking data with ECN, when it starts to leave. A port whose
link is down sends nothing: a switch discards what is queued for it (stale routes still
point there until they converge), a NIC holds it. With trains on, a port passes a data train
on as it comes in (_send_train), or, where the port never queues, interleaved with others (_interleave).

World arrays: reads cfg, pq, qp; writes stats, meta, rng, ev, kick, pkt, port.
"""

from .cc import dispatch as cc
from .heap import heap_push
from .jit import njit
from .kinds import (
    CFG_TRAIN_MAX,
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
    PK_FREE,
)
from .jitter import arrival_ps
from .mmu import admit, count_drop, ecn_mark, release
from .nic import (
    cut_for_arrival,
    delay_train,
    hand_on,
    interleaved_tail,
    move_train_end,
    next_data_packet,
    reaches_on,
    never_queues,
    carries_other_paths,
    train_at,
    train_key,
)
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
        if w.cfg[CFG_TRAIN_MAX] > 0 and w.pq[p, CTRL_PRIO]["head"] >= 0:
            _control_inside_train(w, p, t)
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
        # port keeps a train until it has left, so that it can still be cut (nic.cut_train)
        pk["last_in_ps"] = end + pt["prop_ps"]  # a train's last bit is in at the router
        heap_push(w.ev, w.meta, arrival_ps(w, p, k, t + pt["prop_ps"]), EV_ARRIVE, I64(k), I64(pt["peer_port"]))
        if w.cfg[CFG_TRAIN_MAX] > 0:  # named as the packet it sends (nic.train_at)
            pt["tx_train"] = k
            pt["tx_train_key"] = train_key(w, k)
    if w.cfg[CFG_TRAIN_MAX] > 0:
        pt["tx_own_ps"] = end
        pt["tx_in_ps"] = 0
        pt["tx_one_ps"] = 0
        if n > 1 and pt["cut_through"] == 0:
            end = _send_train(w, p, k, n, wire, t, end)
        pt["tx_end_ps"] = end
        pt["end_ev_ps"] = end
    heap_push(w.ev, w.meta, end, EV_TX_DONE, I64(p), NO_ARG)


@njit(inline="always")
def _control_inside_train(w, p, t):
    """Trains: port p is sending a data train, and control packets (ACKs, NACKs, CNPs, PFC
    frames) wait for it. Exactly, each would leave after the data packet in progress; so they
    leave at the train's next packet boundary, one after the other, and the rest of the train
    leaves that much later (nic.delay_train), so that ACKs do not meet data in blocks, which
    makes long rings drift (docs/fast_forward.md, "Control packets inside trains"). The train's
    last packet, and a NIC link its router passes on cut-through, keep them waiting as a lone
    packet would. A train
    longer than its first link's delay is taken by its host before it has all left
    (nic.train_due_ps); it is still being sent, and control packets still go inside it. So they
    do inside a train its host has taken while the port still sends it, short or long, also once
    its packet slot is reused (by its time per packet here, tx_one_ps): then only this port ends
    it later. Were they to wait for its end, a switch's PAUSE frames would reach a host that
    late, the host would send on into a full headroom, and a lossless fabric would drop packets
    (docs/fast_forward.md, "Trains and PFC")."""
    pt = w.port[p]
    if pt["cut_through"] != 0 or pt["down"] != 0:
        return
    k = train_at(w, p)
    kind = w.pkt[k]["kind"] if k >= 0 else PK_FREE
    if k >= 0 and (kind == PK_DATA or (kind == PK_FREE and reaches_on(w, k))):
        n = I64(w.pkt[k]["train_len"])
        if n < 2:
            return
        one = ser_ps(wire_bytes(w, k) // n, pt["rate_bps"])
    elif pt["busy"] != 0 and pt["tx_pkt"] < 0 and pt["tx_one_ps"] > 0:
        k = -1  # a train its receiver has taken: a short one, or one whose slot was reused
        one = pt["tx_one_ps"]
    else:
        return
    end = pt["tx_end_ps"]
    go = end - ((end - t) // one) * one  # the end of the data packet in progress
    if go >= end:
        return
    first = go
    while w.pq[p, CTRL_PRIO]["head"] >= 0:
        c = fifo_pop(w, p, CTRL_PRIO)
        wire = wire_bytes(w, c)
        go += ser_ps(wire, pt["rate_bps"])
        count_sent(w, p, I64(w.pkt[c]["prio"]), wire)
        heap_push(w.ev, w.meta, go + pt["prop_ps"], EV_ARRIVE, I64(c), I64(pt["peer_port"]))
    if k >= 0:
        delay_train(w, p, k, go - first)
    else:  # delivered: only this port's sending of it ends later
        pt["tx_own_ps"] += go - first
        move_train_end(w, p, max(pt["tx_own_ps"], pt["tx_in_ps"]))


@njit(inline="always")
def _send_train(w, p, k, n, wire, t, end):
    """Port p starts sending train k at t; returns when it ends.

    A NIC keeps a train no longer than its first link's delay (nic._first_link_cap) until it has
    left, so that a queue pair joining the NIC can cut it (nic.cut_train), remembering its start
    (the packet's aux); _leave_nic hands it on. Any other train is handed on as it begins, as a switch
    forwards it, cut-through: its first packet reaches the peer after one packet's serialisation
    and the propagation delay, as a lone packet would (nic.hand_on). At a switch, its last packet
    leaves no sooner than one packet's time after it arrived here (last_in_ps), or as it arrives if
    a NIC link brought it, which its router passes on cut-through. The port is busy until then,
    holding no packet but naming the train (tx_train, tx_train_key), so that the NIC can still
    cut it all along its path and control packets can leave inside it (_control_inside_train)."""
    pt = w.port[p]
    pk = w.pkt[k]
    if pt["at_host"] != 0 and not reaches_on(w, k):
        pk["aux"] = t  # when the NIC began sending the train
        return end
    one = ser_ps(wire // n, pt["rate_bps"])
    if pt["at_host"] == 0:
        pt["tx_in_ps"] = pk["last_in_ps"] + (0 if w.port[pk["in_port"]]["pass_to"] >= 0 else one)
        end = max(end, pt["tx_in_ps"])
    pk["last_in_ps"] = end + pt["prop_ps"]
    pt["tx_pkt"] = -1
    pt["tx_train"] = k
    pt["tx_train_key"] = train_key(w, k)
    pt["tx_one_ps"] = one
    hand_on(w, I64(k), I64(pt["peer_port"]), t + one + pt["prop_ps"])
    return end


@njit(inline="always")
def on_tx_done(w, p, t):
    """Last bit left port p: the packet arrives at the peer after the propagation delay."""
    pt = w.port[p]
    if w.cfg[CFG_TRAIN_MAX] > 0:
        if pt["busy"] == 0 or t != pt["end_ev_ps"]:
            return  # the old end of a train that was cut
        if t < pt["tx_end_ps"]:  # the train was delayed (nic.move_train_end): end it then
            pt["end_ev_ps"] = pt["tx_end_ps"]
            heap_push(w.ev, w.meta, pt["tx_end_ps"], EV_TX_DONE, I64(p), NO_ARG)
            return
    k = pt["tx_pkt"]
    pt["busy"] = 0
    pt["tx_pkt"] = -1
    if k < 0 or pt["cut_through"] != 0:  # a train already on its way (_send_train), or passed on
        kick(w, p)
        return
    if pt["down"] != 0 or (pt["loss"] > 0.0 and not is_pfc(w.pkt[k]["kind"]) and rand_unit(w.rng) < pt["loss"]):
        pkt_lose(w, k)
    elif w.pkt[k]["train_len"] == 1:
        heap_push(w.ev, w.meta, arrival_ps(w, p, k, t + pt["prop_ps"]), EV_ARRIVE, I64(k), I64(pt["peer_port"]))
    else:  # a train its NIC kept until it had left (_send_train)
        hand_on(w, I64(k), I64(pt["peer_port"]), _leave_nic(w, p, k, t))
    kick(w, p)


@njit
def _leave_nic(w, p, k, t):
    """Train k has left its NIC port p at t: when its first packet reaches the peer (cut-through
    from its start, not before now); its last arrives at t plus the propagation delay."""
    pt = w.port[p]
    pk = w.pkt[k]
    n = I64(pk["train_len"])
    one = ser_ps(wire_bytes(w, k) // n, pt["rate_bps"])
    head = max(pk["aux"] + one, t - pt["prop_ps"])  # aux: when the NIC began sending it
    pk["last_in_ps"] = t + pt["prop_ps"]
    return head + pt["prop_ps"]


@njit
def _holds_flow(w, e, k):
    """Whether port e's queue of packet k's priority holds a packet of k's flow."""
    f = w.pkt[k]["qp"]
    c = w.pq[e, I64(w.pkt[k]["prio"])]["head"]
    while c >= 0:
        if w.pkt[c]["qp"] == f:
            return True
        c = w.pkt[c]["nxt"]
    return False


@njit
def _interleave(w, k, p_in, e, t):
    """Trains: data train k reaches a switch on p_in at t (its first packet) and leaves by port e,
    which flows of several path keys share (nic._path_add). If e never queues (nic.never_queues) the train
    passes it interleaved with them: it leaves after what e is sending and holds now, at e's
    rate and no sooner than its packets come in, and nothing reaching e after it waits for it.
    Exactly, the other flows' packets would go between its packets, each delaying it by at most
    one packet's time at e's rate. Returns False, and the train queues as any other, unless its
    wait leaves the flow's next packet no way to overtake its last one: the slack of a port
    faster than the one before it, plus one packet. It queues too behind packets of its own flow
    that e holds: control packets reaching e later go ahead of those (strict priority) but not
    of a train that passed, which would then reach the host first, out of order. A train still
    held by a multi_dim NIC link's router always queues; a train cut after it has passed here
    interleaved has its arrival at its host pushed again (nic._cut_on_path), and one delayed
    upstream arrives later there (nic.retime_train). The port holds none of it, so it neither
    marks nor pauses for it."""
    pk = w.pkt[k]
    pt = w.port[e]
    if not carries_other_paths(w, e, w.qp[pk["qp"]]["path_key"]) or not never_queues(w, e) or pt["down"] != 0:
        return False
    if w.port[p_in]["pass_to"] >= 0 or is_paused(w, e, I64(pk["prio"])) or _holds_flow(w, e, k):
        return False
    up = w.port[w.port[p_in]["peer_port"]]["rate_bps"]  # the port that sent it here
    if up > pt["rate_bps"]:
        return False
    n = I64(pk["train_len"])
    wire = wire_bytes(w, k)
    one = ser_ps(wire // n, pt["rate_bps"])
    one_up = ser_ps(wire // n, up)
    wait = ser_ps(pt["q_bytes"], pt["rate_bps"])
    if pt["busy"] != 0 and pt["tx_end_ps"] > t:
        wait += pt["tx_end_ps"] - t
    if wait > (n - 1) * (one_up - one) + one_up:
        return False
    go = t + wait
    pt["tx_data_pkts"] += n
    count_sent(w, e, I64(pk["prio"]), wire)
    cc.on_switch_egress(w, k, e, go)
    pk["last_in_ps"] = max(go + n * one + pt["prop_ps"], interleaved_tail(w, e, pk["last_in_ps"], wire // n))
    hand_on(w, I64(k), I64(pt["peer_port"]), go + one + pt["prop_ps"])
    return True


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
    if w.cfg[CFG_TRAIN_MAX] > 0 and pk["kind"] == PK_DATA:
        cut_for_arrival(w, e, I64(f), t)
    if pk["train_len"] > 1 and pk["kind"] == PK_DATA and _interleave(w, k, p_in, e, t):
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
