"""RDMA NIC: queue-pair scheduling and pacing, receiver ACK/NACK, go-back-N on NACK and timeout.

Each host port keeps a ring of active queue pairs; when the port is free it sends
the next eligible one round-robin (rate pacing, window, and PFC pause of its
priority allow it). Control packets (ACK, NACK, CNP) go first, in their own queue.
"""
from . import cc
from .heap import heap_push
from .jit import njit
from .kinds import (CC_DCQCN, CC_HPCC, CC_NONE, CFG_ACK_BYTES, CFG_CC, CFG_CNP_BYTES, CFG_DATA_HDR, CFG_IFG, CFG_MTU,
                    CFG_NACK_PS, CFG_RTO_PS, CTRL_PRIO, C_ACKS, C_DATA_DELIVERED, C_DATA_SENT,
                    C_FLOWS_DONE, C_LAST_PROGRESS_PS, C_NACKS, C_RETRANSMITS, C_TIMEOUTS, EV_NIC_WAKE, EV_RTO,
                    FL_ACTIVE, FL_DONE, I64, NO_ARG, PK_ACK, PK_CNP, PK_DATA, PK_NACK)
from .packets import fifo_push, pkt_alloc
from .paths import next_hop, ser_ps
from .tasks import task_done


# ---- the ring of active queue pairs per host port ------------------------------------
@njit
def ring_insert(w, p, f):
    fl = w.flow
    if fl[f]["in_ring"] != 0:
        return
    fl[f]["in_ring"] = 1
    pt = w.port[p]
    head = pt["act_head"]
    if head < 0:
        fl[f]["act_next"] = f
        fl[f]["act_prev"] = f
        pt["act_head"] = f
    else:  # insert just before head: served last in the current round
        prev = fl[head]["act_prev"]
        fl[prev]["act_next"] = f
        fl[f]["act_prev"] = prev
        fl[f]["act_next"] = head
        fl[head]["act_prev"] = f
    pt["act_count"] += 1


@njit
def ring_remove(w, p, f):
    fl = w.flow
    if fl[f]["in_ring"] == 0:
        return
    fl[f]["in_ring"] = 0
    pt = w.port[p]
    pt["act_count"] -= 1
    if pt["act_count"] == 0:
        pt["act_head"] = -1
        return
    nxt = fl[f]["act_next"]
    prev = fl[f]["act_prev"]
    fl[prev]["act_next"] = nxt
    fl[nxt]["act_prev"] = prev
    if pt["act_head"] == f:
        pt["act_head"] = nxt


# ---- sender ---------------------------------------------------------------------------
@njit
def next_data_packet(w, p, t):
    """Build the next data packet the host port p may send at t, or return -1.

    If queue pairs wait only for their pacing time, schedule a wake-up for the earliest."""
    fl = w.flow
    pt = w.port[p]
    f = pt["act_head"]
    mtu = w.cfg[CFG_MTU]
    earliest = -1
    for _ in range(pt["act_count"]):
        r = fl[f]
        nxt = r["act_next"]
        eligible = w.pq[p, r["prio"]]["paused"] == 0
        if eligible and r["window_bytes"] > 0:
            eligible = (r["snd_nxt"] - r["snd_una"]) * mtu < r["window_bytes"]
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


@njit
def _emit_data(w, p, f, t):
    r = w.flow[f]
    mtu = w.cfg[CFG_MTU]
    seq = r["snd_nxt"]
    payload = min(mtu, r["size_bytes"] - seq * mtu)
    frame = payload + w.cfg[CFG_DATA_HDR]
    k = pkt_alloc(w, PK_DATA, I64(f), seq, frame, I64(r["prio"]), I64(r["dst"]))
    w.pkt[k]["sent_ps"] = t
    r["snd_nxt"] = seq + 1
    if seq < r["max_sent"]:
        r["retransmits"] += 1
        w.stats[C_RETRANSMITS] += 1
    else:
        r["max_sent"] = seq + 1
    r["pkts_sent"] += 1
    w.stats[C_DATA_SENT] += 1
    wire = frame + w.cfg[CFG_IFG]
    r["next_tx_ps"] = t + ser_ps(wire, r["rate_bps"])
    w.ccs[f]["last_wire"] = wire
    if w.cfg[CFG_CC] == CC_DCQCN:  # the only algorithm that counts bytes sent
        cc.on_send(w, f, wire)
    if r["snd_nxt"] >= r["n_pkts"]:
        ring_remove(w, p, f)
    return k


@njit
def flow_start(w, f, t):
    r = w.flow[f]
    r["state"] = FL_ACTIVE
    r["next_tx_ps"] = t
    r["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    heap_push(w.ev, w.meta, r["rto_ps"], EV_RTO, I64(f), NO_ARG)
    w.stats[C_LAST_PROGRESS_PS] = t
    ring_insert(w, r["nic_port"], f)
    return r["nic_port"]


@njit
def _go_back(w, f, seq):
    """Go-back-N: resend from seq; returns the NIC port to kick."""
    r = w.flow[f]
    if seq < r["snd_nxt"]:
        r["snd_nxt"] = seq
    ring_insert(w, r["nic_port"], f)
    return r["nic_port"]


@njit
def _on_ack(w, f, ack_seq, t):
    r = w.flow[f]
    if ack_seq <= r["snd_una"]:
        return
    r["snd_una"] = ack_seq
    if r["snd_nxt"] < ack_seq:  # acked beyond a go-back point: skip what arrived
        r["snd_nxt"] = ack_seq
    r["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    w.stats[C_LAST_PROGRESS_PS] = t
    if ack_seq >= r["n_pkts"]:
        r["state"] = FL_DONE
        r["finish_ps"] = t
        ring_remove(w, r["nic_port"], f)
        w.stats[C_FLOWS_DONE] += 1


@njit
def on_rto(w, f, t):
    """Retransmission timer: re-arm at the deadline, or go back to the last ack if it passed."""
    r = w.flow[f]
    if r["state"] != FL_ACTIVE:
        return -1
    if t < r["rto_ps"]:
        heap_push(w.ev, w.meta, r["rto_ps"], EV_RTO, I64(f), NO_ARG)
        return -1
    r["rto_ps"] = t + w.cfg[CFG_RTO_PS]
    heap_push(w.ev, w.meta, r["rto_ps"], EV_RTO, I64(f), NO_ARG)
    if r["snd_nxt"] > r["snd_una"]:
        r["timeouts"] += 1
        w.stats[C_TIMEOUTS] += 1
        return _go_back(w, f, r["snd_una"])
    return -1


# ---- receiver ---------------------------------------------------------------------------
@njit
def _reply(w, f, kind, seq, ecn, node, k_data):
    """Queue an ACK, NACK or CNP from the receiver host node back to the flow's sender.

    It echoes the data packet's send time (TIMELY's RTT) and, for HPCC, its INT records."""
    r = w.flow[f]
    size = w.cfg[CFG_CNP_BYTES] if kind == PK_CNP else w.cfg[CFG_ACK_BYTES]
    k = pkt_alloc(w, kind, I64(f), seq, size, CTRL_PRIO, I64(r["src"]))
    w.pkt[k]["ecn"] = ecn
    w.pkt[k]["sent_ps"] = w.pkt[k_data]["sent_ps"]
    if kind != PK_CNP and w.cfg[CFG_CC] == CC_HPCC:
        cc.echo_int(w, k_data, k)
    p = next_hop(w, I64(node), I64(r["src"]), r["ecmp_hash"])  # a host's one uplink: always a route
    fifo_push(w, I64(p), CTRL_PRIO, I64(k))
    return p


@njit
def on_host_arrive(w, k, node, t):
    """A packet reached a host. Returns a port to kick, or -1."""
    pk = w.pkt[k]
    f = pk["flow"]
    r = w.flow[f]
    kind = pk["kind"]
    if kind == PK_DATA:
        return _on_data(w, k, f, node, t)
    if r["state"] != FL_ACTIVE:
        return -1
    if kind == PK_CNP:
        cc.on_cnp(w, f, t)
        return r["nic_port"]
    _on_ack(w, f, pk["seq"], t)
    if r["state"] != FL_ACTIVE:
        return -1
    kick = -1
    if w.cfg[CFG_CC] != CC_NONE:
        cc.on_ack(w, f, k, t)
        kick = r["nic_port"]  # the rate or the window may let the queue pair send
    if kind == PK_NACK:
        return _go_back(w, f, pk["seq"])
    return kick


@njit
def _on_data(w, k, f, node, t):
    """Receiver: ACK in-order data, re-ACK duplicates, NACK a gap (once per interval);
    answer a CE mark as the algorithm wants (flagged ACK or a CNP packet)."""
    r = w.flow[f]
    r["pkts_delivered"] += 1
    w.stats[C_DATA_DELIVERED] += 1
    notify = cc.receiver_notify(w, f, t) if w.pkt[k]["ecn"] != 0 else cc.NOTIFY_NONE
    flag = 1 if notify == cc.NOTIFY_FLAG else 0
    port = -1
    if notify == cc.NOTIFY_CNP:
        port = _reply(w, f, PK_CNP, NO_ARG, I64(1), node, k)
    seq = w.pkt[k]["seq"]
    expected = r["rcv_nxt"]
    if seq == expected:
        r["rcv_nxt"] = expected + 1
        if expected + 1 == r["n_pkts"]:  # the receiver holds the whole flow
            task_done(w, f, t)
        w.stats[C_ACKS] += 1
        return _reply(w, f, PK_ACK, expected + 1, I64(flag), node, k)
    if seq < expected:  # duplicate after a go-back: re-ACK
        w.stats[C_ACKS] += 1
        return _reply(w, f, PK_ACK, expected, I64(flag), node, k)
    if r["nack_seq"] != expected or t >= r["nack_ps"] + w.cfg[CFG_NACK_PS]:
        r["nack_seq"] = expected
        r["nack_ps"] = t
        w.stats[C_NACKS] += 1
        return _reply(w, f, PK_NACK, expected, I64(flag), node, k)
    return port
