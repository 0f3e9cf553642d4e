"""RDMA NIC: queue-pair scheduling and pacing, receiver ACK/NACK, go-back-N on NACK and timeout
(or IRN's selective repeat, irn.py, with network.transport: irn).

Each host port keeps a ring of active queue pairs; when the port is free it sends
the next eligible one round-robin (rate pacing, window, and PFC pause of its
priority allow it). Control packets (ACK, NACK, CNP) go first, in their own queue.

Packet trains (sim.fast_forward: trains) live in trains.py; this module calls its hooks where a
train changes what happens (each does nothing with trains off).

World arrays: reads cfg, gate_state; writes stats, meta, ev, pkt, port, qp, ccs.
"""

from . import irn, trains
from .cc import dispatch as cc
from .heap import heap_push
from .jit import njit
from .kinds import (
    CFG_ACK_EVERY,
    CFG_ACK_WITH_DATA,
    CFG_CNP_BYTES,
    CFG_IFG,
    CFG_MTU,
    CFG_NACK_PS,
    CFG_RTO_PS,
    CFG_TRANSPORT,
    CTRL_PRIO,
    C_ACKS,
    C_DATA_DELIVERED,
    C_DATA_SENT,
    C_FLOWS_DONE,
    C_LAST_PROGRESS_PS,
    C_NACKS,
    C_RETRANSMITS,
    C_TIMEOUTS,
    EV_NIC_WAKE,
    EV_RTO,
    FL_ACTIVE,
    FL_DONE,
    I64,
    NO_ARG,
    NO_ID,
    PK_ACK,
    PK_CNP,
    PK_DATA,
    PK_NACK,
    TP_IRN,
)
from .packets import (
    ack_frame_bytes,
    data_header_bytes,
    fifo_push,
    pkt_alloc,
)
from .paths import next_hop, ser_ps
from .pfc import is_paused
from .qp import qp_open, same_connection
from .state import GATE_LIMIT
from .tasks import task_done


# ---- the ring of active queue pairs per host port ------------------------------------


@njit
def ring_insert(w, p, f):
    qps = w.qp
    if qps[f]["in_ring"] != 0:
        return
    trains.new_round(w, p, NO_ID)
    qps[f]["in_ring"] = 1
    qps[f]["round_id"] = -1
    pt = w.port[p]
    head = pt["act_head"]
    if head < 0:
        qps[f]["act_next"] = f
        qps[f]["act_prev"] = f
        pt["act_head"] = f
    else:  # insert just before head: served last in the current round
        prev = qps[head]["act_prev"]
        qps[prev]["act_next"] = f
        qps[f]["act_prev"] = prev
        qps[f]["act_next"] = head
        qps[head]["act_prev"] = f
    pt["act_count"] += 1


@njit
def leave_ring(w, p, f, t):
    """Queue pair f has sent its last packet, or has every ACK: it leaves port p's round robin,
    and the flow of its connection waiting for it, if any, joins it, its timeout counting from
    now. Returns whether one joined (the port has data to send)."""
    ring_remove(w, p, f)
    g = w.qp[f]["conn_next"]
    if g < 0:
        return False
    w.qp[f]["conn_next"] = -1
    _join(w, p, g, t)
    restart_rto(w, g, t)
    return True


@njit
def _join(w, p, f, t):
    """Queue pair f joins host port p's round robin at t (trains.on_join)."""
    trains.on_join(w, p, f, t)
    ring_insert(w, p, f)


@njit
def ring_remove(w, p, f):
    qps = w.qp
    if qps[f]["in_ring"] == 0:
        return
    trains.new_round(w, p, f)
    qps[f]["in_ring"] = 0
    pt = w.port[p]
    pt["act_count"] -= 1
    if pt["act_count"] == 0:
        pt["act_head"] = -1
        return
    nxt = qps[f]["act_next"]
    prev = qps[f]["act_prev"]
    qps[prev]["act_next"] = nxt
    qps[nxt]["act_prev"] = prev
    if pt["act_head"] == f:
        pt["act_head"] = nxt


# ---- sender ---------------------------------------------------------------------------
@njit(inline="always")
def next_data_packet(w, p, t):
    """Build the next data packet the host port p may send at t, or return -1.

    If queue pairs wait only for their pacing time, schedule a wake-up for the earliest (one
    held back by its gates is kicked when they open, stream.on_delivered)."""
    qps = w.qp
    pt = w.port[p]
    f = pt["act_head"]
    mtu = w.cfg[CFG_MTU]
    gated = w.gate_state.shape[0] > 0
    selective = w.cfg[CFG_TRANSPORT] == TP_IRN
    earliest = -1
    for _ in range(pt["act_count"]):
        r = qps[f]
        nxt = r["act_next"]
        eligible = not is_paused(w, p, r["prio"])
        if eligible and r["window_bytes"] > 0 and not selective:
            eligible = (r["snd_nxt"] - r["snd_una"]) * mtu < r["window_bytes"]
        if eligible and gated:  # streaming in-switch reduction: new packets as far as its gates let it (stream.py);
            # resends are free (go-back-N moves snd_nxt back; IRN resends below it)
            eligible = r["snd_nxt"] < w.gate_state[r["flow"], GATE_LIMIT] or (selective and irn.next_lost(w, f) >= 0)
        if eligible and selective:
            eligible = irn.may_send(w, f)
        if eligible and r["next_tx_ps"] > t:
            if earliest < 0 or r["next_tx_ps"] < earliest:
                earliest = r["next_tx_ps"]
            eligible = False
        if eligible:
            pt["act_head"] = nxt
            return _emit_data(w, p, f, t)
        f = nxt
    if earliest >= 0:
        pending = pt["wake_ps"]
        if pending <= t or earliest < pending:
            pt["wake_ps"] = earliest
            heap_push(w.ev, w.meta, earliest, EV_NIC_WAKE, I64(p), NO_ARG)
    return -1


@njit(inline="always")
def _emit_data(w, p, f, t):
    r = w.qp[f]
    mtu = w.cfg[CFG_MTU]
    n = trains.train_length(w, p, f)
    selective = w.cfg[CFG_TRANSPORT] == TP_IRN
    seq = irn.next_seq(w, f) if selective else r["snd_nxt"]
    payload = min(n * mtu, r["size_bytes"] - seq * mtu)
    frame = payload + n * data_header_bytes(w, r["cc"])
    wire = frame + n * w.cfg[CFG_IFG]
    k = pkt_alloc(w, PK_DATA, I64(f), seq, frame, I64(r["prio"]), I64(r["dst"]))
    w.pkt[k]["sent_ps"] = t
    trains.stamp_train(w, k, n, t, wire, r["rate_bps"])
    if seq < r["snd_nxt"]:  # IRN resends a lost packet
        r["rtx_nxt"] = seq + 1
    else:
        r["snd_nxt"] = seq + n
    if seq < r["max_sent"]:
        r["retransmits"] += 1
        w.stats[C_RETRANSMITS] += 1
    else:
        r["max_sent"] = seq + n
    r["pkts_sent"] += n
    w.stats[C_DATA_SENT] += n
    r["next_tx_ps"] = t + ser_ps(wire, r["rate_bps"])
    w.ccs[f]["last_wire"] = wire
    cc.on_send(w, f, wire)
    if r["snd_nxt"] >= r["n_pkts"] and not (selective and irn.next_lost(w, f) >= 0):
        leave_ring(w, p, f, t)
    return k


@njit(inline="always")
def flow_start(w, L, t):
    """Flow L starts at t: it opens a queue pair, which joins its NIC port's round robin, or,
    if a flow of its connection is still sending, waits behind it."""
    f = qp_open(w, L)
    r = w.qp[f]
    r["next_tx_ps"] = t
    if w.cfg[CFG_TRANSPORT] == TP_IRN:
        irn.start(w, f, t)
    else:
        r["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    w.stats[C_LAST_PROGRESS_PS] = t
    trains.on_flow_start(w, f)
    if r["conn"] >= 0 and _wait_for_connection(w, f):
        return r["nic_port"]  # it joins, and its timeout is armed, when the flow before it is done (leave_ring)
    arm_rto(w, f)
    _join(w, I64(r["nic_port"]), f, t)
    return r["nic_port"]


@njit
def _wait_for_connection(w, f):
    """If a flow of f's connection (qp.same_connection) is still sending, queue f behind the last
    flow waiting for it and return True."""
    r = w.qp[f]
    pt = w.port[r["nic_port"]]
    g = pt["act_head"]
    for _ in range(pt["act_count"]):
        q = w.qp[g]
        if same_connection(q, r):
            while w.qp[g]["conn_next"] >= 0:
                g = w.qp[g]["conn_next"]
            w.qp[g]["conn_next"] = f
            return True
        g = q["act_next"]
    return False


@njit
def _go_back(w, f, seq):
    """Go-back-N: resend from seq; returns the NIC port to kick."""
    r = w.qp[f]
    if seq < r["snd_nxt"]:
        r["snd_nxt"] = seq
    ring_insert(w, r["nic_port"], f)
    return r["nic_port"]


@njit(inline="always")
def _on_ack(w, f, ack_seq, t):
    """Cumulative ACK ack_seq for queue pair f. Returns whether a flow waiting on its connection
    joined the round robin (f was done while still in it)."""
    r = w.qp[f]
    old = r["snd_una"]
    if ack_seq <= old:
        return False
    r["snd_una"] = ack_seq
    if r["snd_nxt"] < ack_seq:  # acked beyond a go-back point: skip what arrived
        r["snd_nxt"] = ack_seq
    if w.cfg[CFG_TRANSPORT] == TP_IRN:
        irn.on_progress(w, f, old, ack_seq, t)
    else:
        r["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    w.stats[C_LAST_PROGRESS_PS] = t
    if ack_seq >= r["n_pkts"]:
        r["state"] = FL_DONE
        r["finish_ps"] = t
        w.stats[C_FLOWS_DONE] += 1
        trains.on_flow_done(w, f)
        # a go-back-N resend in progress ends here: a flow waiting on its connection goes now
        return leave_ring(w, r["nic_port"], f, t)
    return False


@njit
def arm_rto(w, f):
    """Queue pair f's retransmission timer: an EV_RTO event at its deadline, unless the slot has
    one pending already, which comes no later (a flow's deadline only moves later, and a closed
    flow's last deadline, its last ACK plus the RTO, is no later than the next flow's start
    plus the RTO) and re-arms when it pops (on_rto). So the heap holds at most one timer per
    slot, not one per flow started within the last RTO (most flows end long before it), which
    would otherwise fill the heap with dead timers in runs of many short flows."""
    r = w.qp[f]
    if r["rto_armed"] == 0:
        r["rto_armed"] = 1
        heap_push(w.ev, w.meta, r["rto_ps"], EV_RTO, I64(f), I64(r["flow"]))


@njit(inline="always")
def restart_rto(w, f, t):
    """Queue pair f's retransmission timer counts from t (it had nothing in flight while it waited
    for data to send, which is no loss), and is armed."""
    if w.cfg[CFG_TRANSPORT] == TP_IRN:
        irn.restart_timer(w, f, t)
    else:
        w.qp[f]["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    arm_rto(w, f)


@njit(inline="always")
def on_rto(w, f, t):
    """The slot's retransmission timer popped (its event is spent): for the flow now in it,
    re-arm at the deadline, or go back to the last ack if it passed."""
    r = w.qp[f]
    r["rto_armed"] = 0
    if r["state"] != FL_ACTIVE:
        return -1
    if w.cfg[CFG_TRANSPORT] == TP_IRN:
        lost = irn.on_timer(w, f, t)
        arm_rto(w, f)
        if not lost:
            return -1
        ring_insert(w, r["nic_port"], f)
        return r["nic_port"]
    if t < r["rto_ps"]:
        arm_rto(w, f)
        return -1
    r["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    arm_rto(w, f)
    if r["snd_nxt"] > r["snd_una"]:
        trains.signal(w, f)
        r["timeouts"] += 1
        w.stats[C_TIMEOUTS] += 1
        return _go_back(w, f, r["snd_una"])
    return -1


# ---- receiver ---------------------------------------------------------------------------


@njit(inline="always")
def _reply(w, f, kind, seq, ecn, node, k_data, n, sack):
    """Queue an ACK, NACK or CNP (n of them as one train) from the receiver host node back to
    the flow's sender; an IRN NACK selectively acks ``sack`` (-1: none). The NIC sends it
    ahead of data; switches queue it in the control queue, or ACKs and NACKs with the flow's
    data (cfg[CFG_ACK_WITH_DATA], the HPCC simulator's way).

    It echoes the data packet's send time (TIMELY's RTT) and, for HPCC, its INT records."""
    r = w.qp[f]
    size = w.cfg[CFG_CNP_BYTES] if kind == PK_CNP else ack_frame_bytes(w, r["cc"])
    prio = I64(r["prio"]) if kind != PK_CNP and w.cfg[CFG_ACK_WITH_DATA] != 0 else CTRL_PRIO
    k = pkt_alloc(w, kind, I64(f), seq, n * size, prio, I64(r["src"]))
    w.pkt[k]["train_len"] = n
    w.pkt[k]["ecn"] = ecn
    if sack >= 0:
        w.pkt[k]["aux"] = sack  # the NACK's selective ack
    p = next_hop(w, I64(node), I64(r["src"]), r["ecmp_hash"])  # a host always has a route
    w.pkt[k]["sent_ps"] = trains.echoed_send_ps(w, k_data, w.port[p]["rate_bps"])
    if kind != PK_CNP:
        cc.on_reply(w, f, k_data, k)
    fifo_push(w, I64(p), CTRL_PRIO, I64(k))
    return p


@njit(inline="always")
def on_host_arrive(w, k, node, t):
    """A packet reached a host. Returns a port to kick, or -1."""
    pk = w.pkt[k]
    f = pk["qp"]
    r = w.qp[f]
    kind = pk["kind"]
    if kind == PK_DATA:
        return _on_data(w, k, f, node, t)
    if r["state"] != FL_ACTIVE:
        return -1
    if kind != PK_ACK or pk["ecn"] != 0:  # a congestion signal or a loss
        trains.signal(w, f)
    if kind == PK_CNP:
        cc.on_cnp(w, f, t)
        return r["nic_port"]
    if _on_ack(w, f, pk["seq"], t):
        return r["nic_port"]
    if r["state"] != FL_ACTIVE:
        return -1
    kick = -1
    selective = w.cfg[CFG_TRANSPORT] == TP_IRN
    if cc.on_ack(w, f, k, t) or selective:
        kick = r["nic_port"]  # the rate, the window or IRN's BDP cap may let the queue pair send
    if kind == PK_NACK:
        if not selective:
            return _go_back(w, f, pk["seq"])
        if irn.on_nack(w, f, pk["aux"]):  # the NACK's selective ack
            ring_insert(w, r["nic_port"], f)
    return kick


@njit
def _acks_due(w, before, after, n_pkts, flag):
    """ACKs owed when the in-order packets grow from ``before`` to ``after``: one per multiple
    of cfg[CFG_ACK_EVERY] passed (so one per packet by default), and at least one for the
    flow's last packet or a mark to echo."""
    every = w.cfg[CFG_ACK_EVERY]
    acks = after // every - before // every
    if acks == 0 and (after == n_pkts or flag != 0):
        return I64(1)
    return acks


@njit(inline="always")
def _on_data(w, k, f, node, t):
    """Receiver: ACK in-order data (every cfg[CFG_ACK_EVERY] packets, _acks_due), re-ACK
    duplicates, NACK a gap (once per interval); answer a CE mark as the algorithm wants
    (flagged ACK or a CNP packet). A train is n in-order packets, answered by one ACK train
    of the ACKs they are owed."""
    r = w.qp[f]
    n = I64(w.pkt[k]["train_len"])
    r["pkts_delivered"] += n
    w.stats[C_DATA_DELIVERED] += n
    notify = cc.receiver_notify(w, f, t) if w.pkt[k]["ecn"] != 0 else cc.NOTIFY_NONE
    flag = 1 if notify == cc.NOTIFY_FLAG else 0
    port = -1
    if notify == cc.NOTIFY_CNP:
        port = _reply(w, f, PK_CNP, NO_ARG, I64(1), node, k, I64(1), NO_ID)
    seq = w.pkt[k]["seq"]
    expected = r["rcv_nxt"]
    selective = w.cfg[CFG_TRANSPORT] == TP_IRN
    sack = NO_ID
    if seq <= expected < seq + n:
        new = irn.fill(w, f, seq + n) if selective else seq + n
        r["rcv_nxt"] = new
        if new == r["n_pkts"]:  # the receiver holds the whole flow
            task_done(w, I64(r["flow"]), t)
        acks = _acks_due(w, expected, new, r["n_pkts"], flag)
        if new > seq + n:  # IRN: it filled a gap, one ACK for it and all the packets the bitmap held
            acks = I64(1)
        if acks == 0:
            return port
        answer, ack_seq = PK_ACK, new
    elif seq < expected:  # duplicate after a go-back: re-ACK
        answer, ack_seq, acks = PK_ACK, expected, I64(1)
    elif selective:  # IRN keeps it, and NACKs every packet out of order with its selective ack
        irn.hold(w, f, seq)
        answer, ack_seq, acks, sack = PK_NACK, expected, I64(1), seq
    elif r["nack_seq"] != expected or t >= r["nack_ps"] + w.cfg[CFG_NACK_PS]:
        r["nack_seq"] = expected
        r["nack_ps"] = t
        answer, ack_seq, acks = PK_NACK, expected, I64(1)
    else:
        return port
    if answer == PK_NACK:
        w.stats[C_NACKS] += 1
    else:
        w.stats[C_ACKS] += acks
    return _reply(w, f, answer, ack_seq, I64(flag), node, k, acks, sack)
