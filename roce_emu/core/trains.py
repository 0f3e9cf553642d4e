"""Packet trains (``sim.fast_forward: trains``): a steady flow sends many packets as one.

The approximate fast mode. Everything it does is here; the exact engine (``nic.py``, ``port.py``,
``loop.py``) calls the hooks below at the points a train changes what happens, and each hook does
nothing when trains are off (``cfg[CFG_TRAIN_MAX]`` is 0: ``run/world.train_limit``):

======================  ==========================================================================
hook                    called when
======================  ==========================================================================
``new_round``           a queue pair joins or leaves a NIC port's round robin (``nic.ring_insert``,
                        ``nic.ring_remove``)
``on_flow_start``       a flow opens its queue pair (``nic.flow_start``)
``on_join``             a queue pair joins the round robin (``nic._join``)
``train_length``        a NIC port builds a data packet (``nic._emit_data``): how many it stands for
``stamp_train``         ... and it stands for more than one
``signal``              a flow meets a congestion signal or a loss (``nic.on_host_arrive``, ``nic.on_rto``)
``on_flow_done``        a flow has every ACK (``nic._on_ack``)
``echoed_send_ps``      a receiver answers a data packet (``nic._reply``): the send time it echoes
``taken_later``         a packet reaches a host (``loop._on_arrive``): a train may be due later
``control_inside_train`` a control packet waits at a busy port (``port._try_send``)
``on_send``             a port starts sending a packet (``port._try_send``): when it ends
``stale_end``           a port's end event pops (``port.on_tx_done``)
``left_nic``            a train its NIC kept has left (``port.on_tx_done``)
``through_switch``      a packet reaches a switch (``port.on_switch_arrive``): a train may pass interleaved
======================  ==========================================================================

The model. A flow without a window whose pacing rate has not moved and which has seen no
congestion signal for ``steady`` packets, whose path's egress ports are no slower than it and
carry only flows of the same path key (same NIC, destination, and rate and delay at each hop) or
never queue (switch ports fast enough for everything that may feed them, which trains pass
interleaved: never_queues, _interleave), sends its next packets as one train packet that stands
for ``train_len`` packets; its receiver answers with one ACK train of the ACKs they are owed (one
per packet by default). Trains grow by doubling, shrink towards the flow's end (its last
``TRAIN_TAIL`` packets go alone), are no longer than the first link's delay unless the flow is
long (_reach), span no more time at a paced flow's rate than at line rate, and have one length
per round of the NIC's round robin; a queue pair joining the NIC cuts the train in progress,
wherever it is on its path, and a round cut short is settled by credits that later trains repay.
A data packet of another NIC reaching a switch port that passes a long train on cuts that train
at its NIC too. A port passes a data train on as it comes in (_send_train), or, where the port
never queues, interleaved with others (_interleave). docs/fast_forward.md gives the model and its
error, and the tests that hold it to the exact engine (tests/test_trains.py).

The packet record carries what a train is for every module (``train_len``, the packets it stands
for, 1 without trains); the port and queue-pair fields it keeps are marked "trains" in state.py.

World arrays: reads cfg, pq, node; writes stats, meta, ev, pkt, port, qp, ccs.
"""

import numpy as np

from .cc import dispatch as cc
from .heap import heap_push
from .jit import njit
from .kinds import (
    ARRIVE_TOKEN,
    CFG_ACK_EVERY,
    CFG_IFG,
    CFG_MTU,
    CFG_TRAIN_MAX,
    CTRL_PRIO,
    C_DATA_SENT,
    C_TRAINS,
    C_TRAIN_PKTS,
    EV_ARRIVE,
    EV_TX_DONE,
    I64,
    M_EV_SEQ,
    NO_ARG,
    PK_DATA,
    PK_FREE,
)
from .mmu import release
from .packets import ack_frame_bytes, count_sent, data_header_bytes, fifo_pop, fifo_shrink, wire_bytes
from .paths import PATH_END, next_egress, next_hop, ser_ps
from .pfc import is_paused
from .rng import mix64

TRAIN_TAIL = 2  #: a flow's last packets, always sent alone (the last one may be short)
TRAIN_TAPER = 2  #: a train's ACKs are at most 1/TRAIN_TAPER of the packets the flow has left
TRAIN_ACKS = 64  #: the ACKs one ACK train may stand for, unless its flow is long (_acked_room)
TRAIN_LONG = 256  #: packets: a longer train needs coalesced ACKs and a long flow (_acked_room)
TRAIN_SHARE = 8  #: such a flow is at least this many trains long
TRAIN_REACH = 16  #: a flow this many times its first link's delay (in packets) may send trains past it
TOKEN_SPAN = I64((1 << 31) - 1)  #: push_take's tokens: 1 ... TOKEN_SPAN, in the order pushed
STEADY_TOL = 1000  #: a rate within 1/STEADY_TOL of the rate a steady run started at has not moved


# ---- the hooks the exact engine calls (each does nothing with trains off) ---------------------
@njit(inline="always")
def _on(w):
    return w.cfg[CFG_TRAIN_MAX] > 0


@njit
def new_round(w, p, leaving):
    """The queue pairs on host port p change (``leaving`` leaves, or -1: one joins): the round
    cut short is settled (_settle_round) and the next packet starts a new round."""
    if not _on(w):
        return
    _settle_round(w, p, leaving)
    w.port[p]["round_left"] = 0


@njit
def on_flow_start(w, f):
    """Queue pair f opens: its path key (_path_key)."""
    if _on(w):
        w.qp[f]["path_key"] = _path_key(w, f)


@njit
def on_join(w, p, f, t):
    """Queue pair f joins host port p's round robin at t: it counts on its path's ports from now
    (_path_add; a flow waiting for its connection sends nothing there yet) and cuts the train the
    port is sending (cut_train), as the round robin would serve it next."""
    if _on(w):
        _path_add(w, f, I64(1))
        cut_train(w, p, t, f)


@njit(inline="always")
def train_length(w, p, f):
    """Packets flow f sends in its next packet from host port p: 1, or a train's length."""
    return _train_length(w, p, f) if _on(w) else I64(1)


@njit
def stamp_train(w, k, n, t, wire, rate):
    """Data packet k, sent from t, stands for n packets of ``wire`` bytes in all at ``rate``: if
    more than one, it is a train, whose send time is its last packet's (for the RTT its ACK
    measures)."""
    if n > 1:
        w.pkt[k]["train_len"] = n
        w.pkt[k]["sent_ps"] = t + ser_ps(wire - wire // n, rate)
        w.stats[C_TRAINS] += 1
        w.stats[C_TRAIN_PKTS] += n


@njit(inline="always")
def signal(w, f):
    """Queue pair f met a congestion signal or a loss: it is not steady."""
    w.qp[f]["steady"] = 0


@njit
def on_flow_done(w, f):
    """Queue pair f has every ACK: it stops counting on its path's ports."""
    if _on(w):
        _path_add(w, f, I64(-1))


@njit(inline="always")
def echoed_send_ps(w, k_data, rate):
    """The send time an answer to data packet k_data echoes, from a host port of ``rate``: the
    packet's, or, for a train (answered at train_due_ps), that much earlier (_ack_echo_shift_ps)."""
    sent = w.pkt[k_data]["sent_ps"]
    if w.pkt[k_data]["train_len"] > 1:
        sent -= _ack_echo_shift_ps(w, k_data, rate)
    return sent


@njit(inline="always")
def taken_later(w, k, node, p_in, t):
    """Packet k reaches host node by p_in at t. A train delayed on its way (delay_train) is taken
    when due (train_due_ps): its arrival is pushed for then and True returned."""
    if w.pkt[k]["train_len"] > 1:
        due = train_due_ps(w, k, node)
        if t < due:
            push_take(w, k, p_in, due)
            return True
    return False


@njit(inline="always")
def control_inside_train(w, p, t):
    """Busy port p has control packets waiting: inside a train they leave at its next packet
    boundary (_control_inside_train)."""
    if _on(w) and w.pq[p, CTRL_PRIO]["head"] >= 0:
        _control_inside_train(w, p, t)


@njit(inline="always")
def on_send(w, p, k, n, wire, t, end):
    """Port p starts sending packet k (n packets, ``wire`` bytes) at t, its last bit leaving at
    ``end``; returns when its sending ends. A multi_dim NIC link, whose router passes it on as it
    comes in, names it as the train it passes (train_at); a train is handed on (_send_train)."""
    if not _on(w):
        return end
    pt = w.port[p]
    if pt["cut_through"] != 0:
        pt["tx_train"] = k
        pt["tx_train_key"] = train_key(w, k)
    pt["tx_own_ps"] = end
    pt["tx_in_ps"] = 0
    pt["tx_one_ps"] = 0
    if n > 1 and pt["cut_through"] == 0:
        end = _send_train(w, p, k, n, wire, t, end)
    pt["tx_end_ps"] = end
    pt["end_ev_ps"] = end
    return end


@njit(inline="always")
def stale_end(w, p, t):
    """Port p's end event pops at t: True if it is not the live one, the old end of a train that
    was cut, or one delayed since (move_train_end), which is pushed again for its new end."""
    if not _on(w):
        return False
    pt = w.port[p]
    if pt["busy"] == 0 or t != pt["end_ev_ps"]:
        return True
    if t < pt["tx_end_ps"]:
        pt["end_ev_ps"] = pt["tx_end_ps"]
        heap_push(w.ev, w.meta, pt["tx_end_ps"], EV_TX_DONE, I64(p), NO_ARG)
        return True
    return False


@njit
def left_nic(w, p, k, t):
    """Train k, which its NIC port p kept until it had left (_send_train), has left at t."""
    hand_on(w, I64(k), I64(w.port[p]["peer_port"]), _leave_nic(w, p, k, t))


@njit(inline="always")
def through_switch(w, k, p_in, e, f, t):
    """Data packet k of flow f reaches a switch by p_in at t and leaves by e: it may cut a long
    train of another NIC there (cut_for_arrival); a train may pass e interleaved (_interleave).
    True if it passed, False if it queues as any packet."""
    if not _on(w) or w.pkt[k]["kind"] != PK_DATA:
        return False
    cut_for_arrival(w, e, f, t)
    return w.pkt[k]["train_len"] > 1 and _interleave(w, k, p_in, e, t)


# ---- the model --------------------------------------------------------------------------------
@njit
def _settle_round(w, p, leaving):
    """Trains: the queue pairs on host port p change in the middle of a round. Per-packet round
    robin would have split the round's packets evenly among its queue pairs; those served
    less than that are owed the difference, those served more owe it (``credit``), and repay
    it in the trains of the rounds to come. Without this, a round cut short leaves whoever
    was served first in it ahead for good."""
    pt = w.port[p]
    if w.cfg[CFG_TRAIN_MAX] == 0 or pt["round_left"] <= 0 or pt["round_qps"] < 2:
        return
    share = pt["round_pkts"] / pt["round_qps"]
    g = pt["act_head"]
    for _ in range(pt["act_count"]):
        q = w.qp[g]
        if g != leaving:
            sent = q["round_sent"] if q["round_id"] == pt["round_id"] else 0
            q["credit"] += share - sent
        g = q["act_next"]


@njit
def _path_key(w, f):
    """A hash of flow f's NIC port, its destination and the rate and delay of every egress port
    its data crosses, in order. Flows with one key leave one NIC one packet at a time and meet
    equal delays and rates, so they reach any port they share in the order and spacing they
    left the NIC, even over different ECMP paths: they contend nowhere but at the NIC."""
    r = w.qp[f]
    dst = I64(r["dst"])
    p = I64(r["nic_port"])
    key = mix64(np.uint64(dst), p)
    for _ in range(64):
        key = mix64(key, I64(w.port[p]["rate_bps"]))
        key = mix64(key, I64(w.port[p]["prop_ps"]))
        p = next_egress(w, p, dst, r["ecmp_hash"])
        if p < 0:
            break
    return np.int64(key >> np.uint64(1))


@njit
def _path_add(w, f, delta):
    """Count flow f (delta = 1) or stop counting it (-1) on every egress port of its path; return
    True if none of the ports is slower than f's pacing rate and every flow counted on each has
    f's path key (_path_key) or the port never queues (never_queues): trains pass such a port
    interleaved with the other flows' packets (_interleave)."""
    r = w.qp[f]
    dst = I64(r["dst"])
    key = r["path_key"]
    p = I64(r["nic_port"])
    line = w.port[p]["nominal_bps"]
    clear = True
    for _ in range(64):
        pt = w.port[p]
        pt["data_flows"] += delta
        pt["data_keys"] += delta * key
        pt["data_rate"] += delta * line
        if (carries_other_paths(w, p, key) and not never_queues(w, p)) or pt["rate_bps"] < r["rate_bps"]:
            clear = False
        p = next_egress(w, p, dst, r["ecmp_hash"])
        if p < 0:
            return clear and p == PATH_END
    return clear


@njit
def carries_other_paths(w, p, key):
    """Whether flows of a path key other than ``key`` are counted on port p (_path_add)."""
    pt = w.port[p]
    return pt["data_keys"] != pt["data_flows"] * key


@njit
def never_queues(w, p):
    """Whether port p is a switch port that never needs a queue for data: no slower than all
    its node's links that may feed it together (in_bps: a multi_dim NPU's host link, at the sum
    of its dimensions' rates), or than the NIC rates (nominal) of the flows whose data leaves by
    it now, added up. Their trains pass it interleaved (_interleave)."""
    pt = w.port[p]
    return pt["at_host"] == 0 and (pt["in_bps"] <= pt["rate_bps"] or pt["data_rate"] <= pt["rate_bps"])


@njit
def _train_room(w, f):
    """The longest train flow f's own state allows: up to its steady run (so trains grow by
    doubling), as long as _reach lets it, no longer than its ACKs allow (_acked_room), and
    with no more ACKs to answer it (cfg[CFG_ACK_EVERY] packets per ACK) than 1/TRAIN_TAPER
    of the packets it has left. So with one ACK per packet trains shrink towards the flow's
    end, where its timing is decided: an ACK train is centred on its ACKs, so a long one at
    the end sends ahead of the flow's last data packets ACKs that exactly leave after them,
    and delays them (docs/fast_forward.md, "A taper by ACKs"). With an ACK per 2 packets or
    fewer ACKs, the ACK trains are short enough not to need it. A flow paced below its line
    rate sends trains as much shorter: a train leaves at the port's rate, so its packets go
    sooner than paced, and it spans no more time than the train of a flow at line rate
    (docs/fast_forward.md, "Paced trains")."""
    r = w.qp[f]
    left = r["n_pkts"] - r["snd_nxt"] - TRAIN_TAIL
    every = w.cfg[CFG_ACK_EVERY]
    acked = _acked_room(r, every)
    n = min(w.cfg[CFG_TRAIN_MAX], r["steady"], left * every // TRAIN_TAPER, acked, _reach(w, f))
    return I64(n * r["rate_bps"] / w.ccs[f]["line_bps"])


@njit
def _acked_room(r, every):
    """The most packets one train of queue pair r may carry, by the ACKs that answer it (one per
    ``every`` packets, cfg[CFG_ACK_EVERY]): as many as TRAIN_ACKS ACKs answer, at most
    TRAIN_LONG (64 packets with one ACK per packet, 256 with an ACK per 4). With coalesced ACKs
    a flow at least TRAIN_SHARE trains long may send trains answered by up to ``every`` times
    TRAIN_ACKS ACKs: coalesced ACKs take 1/every of the reverse links' time that one ACK per
    packet takes (how close that stays to the exact engine: docs/fast_forward.md, "Trains with
    coalesced ACKs"). So may a flow on an ordered connection (network.nic.queue_pair: channel or
    connection) with one ACK per packet send trains of up to TRAIN_LONG packets: its ranks stay in
    step, where the drift that bounds ACK trains comes from a queue pair per flow
    (docs/fast_forward.md, "Long trains on ordered connections")."""
    short = min(TRAIN_ACKS * every, TRAIN_LONG)
    most = TRAIN_ACKS * every * every
    if r["conn"] >= 0:
        most = max(most, TRAIN_LONG)
    return max(short, min(most, r["n_pkts"] // TRAIN_SHARE))


@njit
def _reach(w, f):
    """The longest train flow f may send: never its last TRAIN_TAIL packets, and no longer than
    its first link's delay (_first_link_cap) unless the flow is at least TRAIN_REACH times that
    long. Steps of a few hundred packets thus keep the trains the model was tuned with on rings
    whose ranks drift; long flows send long trains (docs/fast_forward.md, "Trains past the
    first link")."""
    r = w.qp[f]
    left = r["n_pkts"] - r["snd_nxt"] - TRAIN_TAIL
    cap = _first_link_cap(w, w.port[r["nic_port"]], r["cc"])
    return left if r["n_pkts"] >= TRAIN_REACH * cap else min(left, cap)


@njit
def _first_link_cap(w, pt, cc):
    """Packets a train from host port pt may carry and still be cut at its NIC: no longer than
    the first link's delay, so that until its first packet arrives the NIC holds all of it. On a
    multi_dim NIC link, whose router passes packets on as they come in (port._try_send), the
    delay to the next router, by the dimension link: until the train reaches it, the router's
    port can cut it too (cut_train)."""
    one = ser_ps(w.cfg[CFG_MTU] + data_header_bytes(w, cc) + w.cfg[CFG_IFG], pt["rate_bps"])
    delay = pt["prop_ps"]
    if pt["cut_through"] != 0:
        delay += w.port[w.port[pt["peer_port"]]["pass_to"]]["prop_ps"]
    return delay // one + 1


@njit
def reaches_on(w, k):
    """Whether train k is longer than its first link's delay (_first_link_cap): it was handed on
    from its NIC as it began (_send_train), and the ports that pass it on end it at the
    later of their own end and its arrival (retime_train)."""
    r = w.qp[w.pkt[k]["qp"]]
    return w.pkt[k]["train_len"] > _first_link_cap(w, w.port[r["nic_port"]], r["cc"])


@njit(inline="always")
def _train_length(w, p, f):
    """Packets flow f sends in its next packet from host port p: 1, or a train's length (see
    the module doc). Queue pairs sharing the port send trains of one length in each round of
    the round robin, the shortest any of them allows when the round starts, so that the
    round robin stays fair by bytes."""
    r = w.qp[f]
    rate = r["rate_bps"]
    if abs(rate - r["steady_rate"]) * STEADY_TOL > r["steady_rate"]:
        r["steady"] = 0
        r["steady_rate"] = rate
    pt = w.port[p]
    if pt["round_left"] <= 0:
        n = _train_room(w, f)
        g = r["act_next"]
        for _ in range(pt["act_count"] - 1):
            n = min(n, _train_room(w, g))
            g = w.qp[g]["act_next"]
        pt["round_len"] = min(n, w.cfg[CFG_TRAIN_MAX])
        pt["round_left"] = pt["act_count"]
        pt["round_qps"] = pt["act_count"]
        pt["round_id"] += 1
        pt["round_pkts"] = 0
    pt["round_left"] -= 1
    n = pt["round_len"]
    # (windowed algorithms, HPCC and DCTCP, send no trains: world.train_limit is 0 for them)
    if n < 2 or r["snd_nxt"] < r["max_sent"] or not _path_add(w, f, I64(0)):
        n = 1
    else:  # repay what an earlier round cut short owes or is owed, within the train's limits
        most = min(w.cfg[CFG_TRAIN_MAX], _reach(w, f))
        owed = I64(r["credit"])  # whole packets, towards zero
        m = max(1, min(n + owed, most))
        r["credit"] -= m - n
        n = m
    if r["round_id"] != pt["round_id"]:
        r["round_id"] = pt["round_id"]
        r["round_sent"] = 0
    r["round_sent"] += n
    pt["round_pkts"] += n
    r["steady"] += n
    return n


@njit
def train_key(w, k):
    """Train k's flow and first sequence number in one integer. While a port still passes a
    train on, no other train has both: its flow ends after the port has passed it."""
    return (I64(w.pkt[k]["qp"]) << 34) | I64(w.pkt[k]["seq"])


@njit
def train_at(w, p):
    """The train port p is sending or passing on now, or -1. A port hands a train on as its
    first packet goes (_send_train) and names it by tx_train and its key (train_key), so
    that once the receiver has taken it and its slot is reused, the port does not take the new
    packet for it; a multi_dim NIC link holds it in tx_pkt and names it so too (port._try_send),
    and any other port holding it in tx_pkt keeps it until it has left."""
    pt = w.port[p]
    if pt["busy"] == 0:
        return I64(-1)
    k = I64(pt["tx_pkt"])
    if k >= 0 and pt["cut_through"] == 0:
        return k
    k = I64(pt["tx_train"])
    if k < 0 or train_key(w, k) != pt["tx_train_key"]:
        return I64(-1)
    return k


@njit
def _passing(w, q, k, key):
    """Whether port q is passing train k (of key ``key``) on now."""
    qt = w.port[q]
    return qt["busy"] != 0 and qt["tx_pkt"] < 0 and qt["tx_train"] == k and qt["tx_train_key"] == key


@njit
def push_take(w, k, peer, t):
    """Push train k's arrival at its host's port peer for t, when the host takes it. A token in
    the event, kept in the packet, makes any earlier push for it stale (loop._on_arrive): a
    train is pushed again when it is delayed on its way or cut short (cut_train)."""
    tok = w.meta[M_EV_SEQ] % TOKEN_SPAN + 1
    w.pkt[k]["take_tok"] = tok
    heap_push(w.ev, w.meta, t, EV_ARRIVE, I64(k), I64(peer) | (tok << ARRIVE_TOKEN))


@njit
def hand_on(w, k, peer, head):
    """Train k's first packet reaches port peer at ``head``. A switch passes it on from then; a
    host takes it when due (train_due_ps), so its arrival is pushed for then (push_take)."""
    node = I64(w.port[peer]["node"])
    if w.node[node]["is_host"] == 0:
        heap_push(w.ev, w.meta, head, EV_ARRIVE, I64(k), I64(peer))
    else:
        push_take(w, k, peer, max(head, train_due_ps(w, k, node)))


@njit
def cut_train(w, p, t, newcomer):
    """Queue pair ``newcomer`` joins host port p at t (or, with newcomer -1, a data packet of
    another NIC meets the train at a switch port: cut_for_arrival): a data train the port is
    sending ends after its packet in progress, as the round robin would have served the
    newcomer next. The sending flow takes the other packets back (_take_back). Where the train
    is decides what else changes:

    - within its first link's delay from a multi_dim NIC link: the router's port passing it on
      sends as many packets fewer (_cut_at_router); still queued at the router behind control
      packets, it goes whole;
    - kept by its NIC (_send_train): the NIC ends it sooner (_cut_on_path);
    - handed on: every port of the path that passes it on sends as many packets fewer
      (_cut_on_path), and a switch where it is queued holds that much less of it. It goes
      whole if its host has taken it already (a train longer than its first link's delay is
      taken before its NIC has sent all of it, when the ACKs answering it are due) or the
      switch where it is queued has paused the ingress it came by (PFC): then the flow owes a
      newcomer half of the packets it sends after t."""
    k = train_at(w, p)
    if k < 0:
        return
    pt = w.port[p]
    pk = w.pkt[k]
    n = I64(pk["train_len"])
    f = I64(pk["qp"])
    taken = pk["kind"] == PK_FREE  # its host has taken it already (train_due_ps), slot not reused
    if n < 2 or (pk["kind"] != PK_DATA and not taken) or w.qp[f]["snd_nxt"] != pk["seq"] + n:
        return
    wire = pk["frame_bytes"] // n + w.cfg[CFG_IFG]
    # as if the control packets the port sent inside it (_control_inside_train) went first
    start = pt["tx_own_ps"] - ser_ps(n * wire, pt["rate_bps"])
    j = max(1, (t - start) // ser_ps(wire, pt["rate_bps"]) + 1)  # packets begun by t
    if j >= n:
        return
    if pt["cut_through"] != 0 and not reaches_on(w, k):  # at the multi_dim NIC link's router
        e = I64(w.port[pt["peer_port"]]["pass_to"])
        if not _passing(w, e, k, train_key(w, k)) or w.port[e]["rate_bps"] != pt["rate_bps"]:
            return  # still queued at the router, behind control packets
        _shorten(w, k, n, j, start, I64(-1))
        _cut_at_router(w, p, e, k, n, j, wire)
    elif pt["tx_pkt"] >= 0 and pt["cut_through"] == 0:  # its NIC still keeps it
        _shorten(w, k, n, j, start, I64(-1))
        _cut_on_path(w, p, p, k, n, j, wire, t)
    else:  # handed on
        last, queued = _last_passing(w, p, k)
        if taken or (queued >= 0 and w.pq[pk["in_port"], pk["prio"]]["xoff_sent"] != 0):
            # it goes whole. Per-packet round robin would have split its other n - j packets
            # evenly with the newcomer: the flow owes the newcomer half of them (_settle_round's
            # credits)
            if newcomer >= 0:
                w.qp[f]["credit"] -= (n - j) / 2
                w.qp[newcomer]["credit"] += (n - j) / 2
            return
        _shorten(w, k, n, j, start, queued)
        _cut_on_path(w, p, last, k, n, j, wire, t)
    _take_back(w, p, f, n, j, start, wire)


@njit
def _shorten(w, k, n, j, start, queued):
    """Train k, begun at ``start`` by its NIC, carries j of its n packets; the switch port
    ``queued`` where it waits (-1: none) holds and buffers that much less of it."""
    pk = w.pkt[k]
    frame = pk["frame_bytes"] // n
    if queued >= 0:
        fifo_shrink(w, queued, I64(pk["prio"]), k, (n - j) * frame)
        release(w, w.port[queued]["node"], pk["in_port"], pk["prio"], (n - j) * frame)
    pk["train_len"] = j
    pk["frame_bytes"] = j * frame
    pk["sent_ps"] = start + ser_ps((j - 1) * (frame + w.cfg[CFG_IFG]), w.qp[pk["qp"]]["rate_bps"])


@njit
def _take_back(w, p, f, n, j, start, wire):
    """Flow f, whose train of n packets of ``wire`` bytes each from host port p was cut to j,
    takes the other packets back: it sends them next, after the j at its pacing rate."""
    r = w.qp[f]
    back = n - j
    r["snd_nxt"] -= back
    r["round_sent"] -= back
    w.port[p]["round_pkts"] -= back
    r["max_sent"] = r["snd_nxt"]
    r["pkts_sent"] -= back
    r["steady"] -= back
    r["next_tx_ps"] = start + ser_ps(j * wire, r["rate_bps"])
    w.ccs[f]["last_wire"] = j * wire
    w.stats[C_DATA_SENT] -= back
    w.stats[C_TRAIN_PKTS] -= back if j > 1 else n
    if j == 1:  # a lone packet after all
        w.stats[C_TRAINS] -= 1


@njit(inline="always")
def cut_for_arrival(w, e, f, t):
    """A data packet of flow f reaches switch egress port e at t: a long train (reaches_on) of
    another NIC's flow that e, a port that may queue (never_queues), is passing on now, and
    that its NIC is still sending, ends at its NIC after the packet in progress (cut_train),
    as a queue pair joining there would end it. Exactly, f's packets would interleave at e
    with that flow's; cut, they wait only for the part of the train already sent, not for
    the whole train, and the flow sends the rest as the port allows (its path is not clear
    any more; how close that stays: docs/fast_forward.md, "A flow of another NIC cuts a long
    train")."""
    if never_queues(w, e):
        return
    k = train_at(w, e)
    if k < 0 or w.pkt[k]["kind"] != PK_DATA or w.pkt[k]["train_len"] < 2:
        return
    g = w.pkt[k]["qp"]
    p = I64(w.qp[g]["nic_port"])
    if g == f or p == w.qp[f]["nic_port"] or not reaches_on(w, k) or train_at(w, p) != k:
        return
    cut_train(w, p, t, I64(-1))


@njit
def _last_passing(w, p, k):
    """The last port of train k's path, from its NIC port p, that is passing it on now, and the
    port after it if the train is queued there (else -1). Beyond the last port passing it the
    train is queued, on a link (its arrival event reads the train as it is then) or reaching its
    host (cut_train pushes its arrival again)."""
    pk = w.pkt[k]
    dst = I64(pk["dst"])
    h = w.qp[pk["qp"]]["ecmp_hash"]
    key = train_key(w, k)
    q = p
    while True:
        e = next_egress(w, q, dst, h)
        if e < 0:
            return q, I64(-1)
        if not _passing(w, e, k, key):
            return q, (e if _queued(w, e, k) else I64(-1))
        q = e


@njit
def _queued(w, e, k):
    """Whether packet k waits in port e's queue of its priority."""
    c = w.pq[e, I64(w.pkt[k]["prio"])]["head"]
    while c >= 0:
        if c == k:
            return True
        c = w.pkt[c]["nxt"]
    return False


@njit
def _send_fewer(w, q, n, j, wire, prio):
    """Port q, sending or passing on a train of n packets of ``wire`` bytes each (of priority
    ``prio``), sends j; returns how much sooner its own sending ends."""
    qt = w.port[q]
    sooner = ser_ps(n * wire, qt["rate_bps"]) - ser_ps(j * wire, qt["rate_bps"])
    qt["tx_own_ps"] -= sooner
    count_sent(w, q, prio, -(n - j) * wire)
    qt["tx_data_pkts"] -= n - j
    return sooner


@njit
def _cut_on_path(w, p, last, k, n, j, wire, t):
    """Train k, now j of its n packets of ``wire`` bytes each, is that much shorter at every port
    from its NIC port p to ``last``, which pass it on (retime_train). If ``last`` hands it to its
    host, or the port after it has passed it on to its host interleaved (_interleave: its
    arrival there is pushed, take_tok), its arrival there is pushed again for when it is due. A
    NIC that still keeps the train (_send_train) just ends it sooner."""
    q = p
    pk = w.pkt[k]
    dst = I64(pk["dst"])
    h = w.qp[pk["qp"]]["ecmp_hash"]
    while True:
        _send_fewer(w, q, n, j, wire, I64(pk["prio"]))
        if q == last:
            break
        q = next_egress(w, q, dst, h)
    retime_train(w, p, k, False, I64(0))
    if not _handed_on(w, p):
        return
    lt = w.port[last]
    e = next_egress(w, last, dst, h)
    if e == PATH_END:
        peer = I64(lt["peer_port"])
        earliest = max(t, lt["tx_end_ps"] - ser_ps((j - 1) * wire, lt["rate_bps"]) + lt["prop_ps"])
    elif e >= 0 and pk["take_tok"] != 0 and next_egress(w, e, dst, h) == PATH_END:
        peer = I64(w.port[e]["peer_port"])  # e passed it on interleaved (_interleave)
        pk["last_in_ps"] = interleaved_tail(w, e, lt["tx_end_ps"] + lt["prop_ps"], wire)
        earliest = t
    else:
        return
    push_take(w, k, peer, max(earliest, train_due_ps(w, k, I64(w.port[peer]["node"]))))


@njit
def _cut_at_router(w, p, e, k, n, j, wire):
    """Train k, now j of its n packets of ``wire`` bytes each from NIC link p, which its router's
    port e passes on at the same rate, ends that much sooner at both."""
    pt = w.port[p]
    prio = I64(w.pkt[k]["prio"])
    sooner = _send_fewer(w, p, n, j, wire, prio)
    move_train_end(w, p, pt["tx_own_ps"])
    _send_fewer(w, e, n, j, wire, prio)
    ept = w.port[e]
    ept["tx_in_ps"] -= sooner
    end = max(ept["tx_own_ps"], ept["tx_in_ps"])
    move_train_end(w, e, end)
    w.pkt[k]["last_in_ps"] = end + ept["prop_ps"]


@njit
def delay_train(w, p, k, d):
    """Control packets sent inside train k at port p (_control_inside_train) delay the rest
    of it there by d. A train longer than its first link's delay (reaches_on) is retimed along
    its path (retime_train): the ports after p use up their slack before it delays them. A
    shorter one keeps the rule the trains were tuned with on rings whose ranks drift: every port
    passing it on ends it d later too (docs/fast_forward.md, "Trains past the first link")."""
    pt = w.port[p]
    pt["tx_own_ps"] += d
    additive = not reaches_on(w, k)
    if additive and pt["tx_in_ps"] > 0:
        pt["tx_in_ps"] += d
    retime_train(w, p, k, additive, d)


@njit
def _handed_on(w, p):
    """Whether the train port p sends has gone on past it: a NIC keeps a train within its first
    link's delay until it has left (_send_train), but a multi_dim NIC link's router passes
    every train on as it comes in."""
    pt = w.port[p]
    return pt["tx_pkt"] < 0 or pt["cut_through"] != 0


@njit
def retime_train(w, p, k, additive, d):
    """Port p's own end of train k moved (tx_own_ps: control packets sent inside it, or a cut).
    A port ends a train at the later of its own end and its last packet's arrival (tx_in_ps),
    so p ends it then, its last packet reaches the next port that passes it on then, which ends
    it accordingly, and so on; the train's last bit reaches the node after them (last_in_ps), or,
    if the port after them passed it on interleaved (_interleave), its host a packet's time
    and that link's delay later, if that is later than before. So a delay at one port uses up
    the slack of the ports after it, which wait for the train's packets anyway, before it delays
    them. ``additive``: those ports end it d later instead. A NIC that still keeps the train
    (_send_train) hands it on later (_leave_nic)."""
    pt = w.port[p]
    end = max(pt["tx_own_ps"], pt["tx_in_ps"])
    move_train_end(w, p, end)
    if not _handed_on(w, p):
        return
    pk = w.pkt[k]
    dst = I64(pk["dst"])
    h = w.qp[pk["qp"]]["ecmp_hash"]
    key = train_key(w, k)
    one_wire = wire_bytes(w, k) // I64(pk["train_len"])
    q = p
    while True:
        e = next_egress(w, q, dst, h)
        if e < 0 or not _passing(w, e, k, key):
            break
        et = w.port[e]
        if additive:
            et["tx_own_ps"] += d
            et["tx_in_ps"] += d
        else:
            lead = 0 if w.port[w.port[q]["peer_port"]]["pass_to"] >= 0 else ser_ps(one_wire, et["rate_bps"])
            et["tx_in_ps"] = end + w.port[q]["prop_ps"] + lead
        end = max(et["tx_own_ps"], et["tx_in_ps"])
        move_train_end(w, e, end)
        q = e
    tail = end + w.port[q]["prop_ps"]
    if e >= 0 and pk["take_tok"] != 0:  # e passed it on interleaved to its host (_interleave)
        tail = max(pk["last_in_ps"], interleaved_tail(w, e, tail, one_wire))
    pk["last_in_ps"] = tail


@njit
def interleaved_tail(w, e, tail_in, one_wire):
    """When the last bit of a train that port e passes on interleaved (_interleave), whose
    last packet (of ``one_wire`` bytes) is in at e's node at ``tail_in``, reaches e's peer."""
    et = w.port[e]
    return tail_in + ser_ps(one_wire, et["rate_bps"]) + et["prop_ps"]


@njit
def move_train_end(w, p, end):
    """The train port p is sending now ends at ``end``. Cut short: a new end event, and the old
    one is stale (stale_end ignores it). Later, with control packets sent inside it: the
    live end event, when it comes, pushes itself to the new end (stale_end), so that a
    train delayed several times costs one more event, not one per delay."""
    pt = w.port[p]
    pt["tx_end_ps"] = end
    if end < pt["end_ev_ps"]:
        pt["end_ev_ps"] = end
        heap_push(w.ev, w.meta, end, EV_TX_DONE, I64(p), NO_ARG)


@njit
def train_due_ps(w, k, node):
    """When host node takes train k, which is reaching it: an ACK train once all of it is in;
    a data train when the ACK train answering it should start (_ack_lead_ps; the flow's last
    packets travel alone, so no flow completes early)."""
    pk = w.pkt[k]
    due = pk["last_in_ps"]
    if pk["kind"] == PK_DATA:
        due -= _ack_lead_ps(w, k, _uplink_rate(w, k, node))
    return due


@njit
def _train_acks(w, k):
    """The ACKs that answer data train k exactly, if its packets arrive in order: how many
    (m), and the indices in the train of the first and last packets answered. A receiver
    acknowledges when its in-order count reaches a multiple of cfg[CFG_ACK_EVERY] (_acks_due).
    A train that passes none gives (1, n - 1, n - 1): it is taken when all of it is in, and
    answered then only if it ends the flow or carries a mark to echo."""
    pk = w.pkt[k]
    n = I64(pk["train_len"])
    every = w.cfg[CFG_ACK_EVERY]
    first = (every - (I64(pk["seq"]) + 1) % every) % every
    if first > n - 1:
        return I64(1), n - 1, n - 1
    m = (n - 1 - first) // every + 1
    return m, first, first + (m - 1) * every


@njit
def _ack_lead_ps(w, k, rate):
    """How long before data train k's last packet is in, its receiver answers it (by its uplink
    of ``rate`` bit/s). Exactly, the host sends an ACK as each answered packet of the train
    arrives (every packet by default; the train's packets arrive a data packet's time apart).
    The ACK train stands for them as one block; it is centred on them (its ACKs' mean end is
    theirs), so that on average its ACKs are neither early nor late where they meet data: at
    the host's NIC, which also sends, and at the switch ports towards the data's sender.
    (Ending it when the last ACK would, it was late by half a train, and data went ahead of
    ACKs that would have delayed it.) With one ACK per packet the lead is half of (n - 1) data
    and ACK times."""
    pk = w.pkt[k]
    n = I64(pk["train_len"])
    m, first, last = _train_acks(w, k)
    data_wire = (pk["frame_bytes"] + n * w.cfg[CFG_IFG]) // n
    return ser_ps(((2 * (n - 1) - first - last) * data_wire + (m - 1) * _ack_wire_bytes(w, k)) // 2, rate)


@njit
def _ack_echo_shift_ps(w, k, rate):
    """How much earlier than data train k's last packet's send time the ACK train answering it
    echoes: the exact last ACK echoes its own packet's send time, and the ACK train ends sooner
    than that ACK by as much again, so the sender measures the last ACK's RTT (TIMELY's)."""
    m, _, _ = _train_acks(w, k)
    return _ack_lead_ps(w, k, rate) - ser_ps((m - 1) * _ack_wire_bytes(w, k), rate)


@njit
def _ack_wire_bytes(w, k):
    """Wire bytes of one ACK answering data packet k."""
    return ack_frame_bytes(w, w.qp[w.pkt[k]["qp"]]["cc"]) + w.cfg[CFG_IFG]


@njit
def _uplink_rate(w, k, node):
    """The rate of the port by which host node answers packet k."""
    r = w.qp[w.pkt[k]["qp"]]
    return w.port[next_hop(w, node, I64(r["src"]), r["ecmp_hash"])]["rate_bps"]


@njit(inline="always")
def _control_inside_train(w, p, t):
    """Trains: port p is sending a data train, and control packets (ACKs, NACKs, CNPs, PFC
    frames) wait for it. Exactly, each would leave after the data packet in progress; so they
    leave at the train's next packet boundary, one after the other, and the rest of the train
    leaves that much later (delay_train), so that ACKs do not meet data in blocks, which
    makes long rings drift (docs/fast_forward.md, "Control packets inside trains"). The train's
    last packet, and a NIC link its router passes on cut-through, keep them waiting as a lone
    packet would. A train
    longer than its first link's delay is taken by its host before it has all left
    (train_due_ps); it is still being sent, and control packets still go inside it. So they
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

    A NIC keeps a train no longer than its first link's delay (_first_link_cap) until it has
    left, so that a queue pair joining the NIC can cut it (cut_train), remembering its start
    (the packet's aux); _leave_nic hands it on. Any other train is handed on as it begins, as a switch
    forwards it, cut-through: its first packet reaches the peer after one packet's serialisation
    and the propagation delay, as a lone packet would (hand_on). At a switch, its last packet
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
    which flows of several path keys share (_path_add). If e never queues (never_queues) the train
    passes it interleaved with them: it leaves after what e is sending and holds now, at e's
    rate and no sooner than its packets come in, and nothing reaching e after it waits for it.
    Exactly, the other flows' packets would go between its packets, each delaying it by at most
    one packet's time at e's rate. Returns False, and the train queues as any other, unless its
    wait leaves the flow's next packet no way to overtake its last one: the slack of a port
    faster than the one before it, plus one packet. It queues too behind packets of its own flow
    that e holds: control packets reaching e later go ahead of those (strict priority) but not
    of a train that passed, which would then reach the host first, out of order. A train still
    held by a multi_dim NIC link's router always queues; a train cut after it has passed here
    interleaved has its arrival at its host pushed again (_cut_on_path), and one delayed
    upstream arrives later there (retime_train). The port holds none of it, so it neither
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
