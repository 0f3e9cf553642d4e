"""RDMA NIC: queue-pair scheduling and pacing, receiver ACK/NACK, go-back-N on NACK and timeout
(or IRN's selective repeat, irn.py, with network.transport: irn).

Each host port keeps a ring of active queue pairs; when the port is free it sends
the next eligible one round-robin (rate pacing, window, and PFC pause of its
priority allow it). Control packets (ACK, NACK, CNP) go first, in their own queue.

Trains (sim.fast_forward: trains, cfg[CFG_TRAIN_MAX] > 0): a flow without a window whose pacing
rate has not moved and which has seen no congestion signal for ``steady`` packets, whose path's
egress ports are no slower than it and carry only flows of the same path key (same NIC,
destination, and rate and delay at each hop) or never queue (switch ports fast enough for
everything that may feed them, which trains pass interleaved: never_queues, port._interleave),
sends its next packets as one train packet that stands for ``train_len`` packets; its receiver
answers with one ACK train of the ACKs they are owed (one per packet by default). Trains grow
by doubling, shrink towards the flow's end (its last ``TRAIN_TAIL`` packets go alone), are no
longer than the first link's delay unless the flow is long (_reach), span no more time at a
paced flow's rate than at line rate, and have one length per round of the NIC's round robin; a
queue pair joining the NIC cuts the train in progress, wherever it is on its path, and a round
cut short is settled by credits that later trains repay. A data packet of another NIC reaching
a switch port that passes a long train on cuts that train at its NIC too. docs/fast_forward.md
gives the model and its error.

World arrays: reads cfg, pq, node, gate_state; writes stats, meta, ev, pkt, port, qp, ccs.
"""

import numpy as np

from . import irn
from .cc import dispatch as cc
from .heap import heap_push
from .jit import njit
from .kinds import (
    ARRIVE_TOKEN,
    CFG_ACK_EVERY,
    CFG_ACK_WITH_DATA,
    CFG_CNP_BYTES,
    CFG_IFG,
    CFG_MTU,
    CFG_NACK_PS,
    CFG_RTO_PS,
    CFG_TRAIN_MAX,
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
    C_TRAINS,
    C_TRAIN_PKTS,
    EV_ARRIVE,
    EV_NIC_WAKE,
    EV_RTO,
    EV_TX_DONE,
    FL_ACTIVE,
    FL_DONE,
    I64,
    M_EV_SEQ,
    NO_ARG,
    NO_ID,
    PK_ACK,
    PK_CNP,
    PK_DATA,
    PK_FREE,
    PK_NACK,
    TP_IRN,
)
from .mmu import release
from .packets import (
    ack_frame_bytes,
    count_sent,
    data_header_bytes,
    fifo_push,
    fifo_shrink,
    pkt_alloc,
    wire_bytes,
)
from .paths import PATH_END, next_egress, next_hop, ser_ps
from .pfc import is_paused
from .qp import qp_open
from .rng import mix64
from .state import GATE_LIMIT
from .tasks import task_done

TRAIN_TAIL = 2  #: a flow's last packets, always sent alone (the last one may be short)
TRAIN_TAPER = 2  #: a train's ACKs are at most 1/TRAIN_TAPER of the packets the flow has left
TRAIN_ACKS = 64  #: the ACKs one ACK train may stand for (so trains of at most 64 packets with one ACK per packet)
TRAIN_LONG = 256  #: packets: a longer train needs coalesced ACKs and a long flow (_acked_room)
TRAIN_SHARE = 8  #: such a flow is at least this many trains long
TRAIN_REACH = 16  #: a flow this many times its first link's delay (in packets) may send trains past it
TOKEN_SPAN = I64((1 << 31) - 1)  #: push_take's tokens: 1 ... TOKEN_SPAN, in the order pushed
STEADY_TOL = 1000  #: a rate within 1/STEADY_TOL of the rate a steady run started at has not moved


# ---- the ring of active queue pairs per host port ------------------------------------
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
def ring_insert(w, p, f):
    qps = w.qp
    if qps[f]["in_ring"] != 0:
        return
    _settle_round(w, p, NO_ID)
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
    pt["round_left"] = 0  # trains: a new round, with the newcomer


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
    """Queue pair f joins host port p's round robin at t. With trains it counts on its path's
    ports from now (_path_add; a flow waiting for its connection sends nothing there yet) and
    cuts the train the port is sending (cut_train), as the round robin would serve it next."""
    if w.cfg[CFG_TRAIN_MAX] > 0:
        _path_add(w, f, I64(1))
        cut_train(w, p, t, f)
    ring_insert(w, p, f)


@njit
def ring_remove(w, p, f):
    qps = w.qp
    if qps[f]["in_ring"] == 0:
        return
    _settle_round(w, p, f)
    qps[f]["in_ring"] = 0
    pt = w.port[p]
    pt["act_count"] -= 1
    pt["round_left"] = 0
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
    interleaved with the other flows' packets (port._interleave)."""
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
    it now, added up. Their trains pass it interleaved (port._interleave)."""
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
    coalesced ACKs")."""
    short = min(TRAIN_ACKS * every, TRAIN_LONG)
    return max(short, min(TRAIN_ACKS * every * every, r["n_pkts"] // TRAIN_SHARE))


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
    from its NIC as it began (port._send_train), and the ports that pass it on end it at the
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


@njit(inline="always")
def _emit_data(w, p, f, t):
    r = w.qp[f]
    mtu = w.cfg[CFG_MTU]
    n = _train_length(w, p, f) if w.cfg[CFG_TRAIN_MAX] > 0 else 1
    selective = w.cfg[CFG_TRANSPORT] == TP_IRN
    seq = irn.next_seq(w, f) if selective else r["snd_nxt"]
    payload = min(n * mtu, r["size_bytes"] - seq * mtu)
    frame = payload + n * data_header_bytes(w, r["cc"])
    wire = frame + n * w.cfg[CFG_IFG]
    k = pkt_alloc(w, PK_DATA, I64(f), seq, frame, I64(r["prio"]), I64(r["dst"]))
    w.pkt[k]["sent_ps"] = t
    if n > 1:  # the send time of its last packet, for the RTT its ACK measures
        w.pkt[k]["train_len"] = n
        w.pkt[k]["sent_ps"] = t + ser_ps(wire - wire // n, r["rate_bps"])
        w.stats[C_TRAINS] += 1
        w.stats[C_TRAIN_PKTS] += n
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
    if w.cfg[CFG_TRAIN_MAX] > 0:
        r["path_key"] = _path_key(w, f)
    if r["conn"] >= 0 and _wait_for_connection(w, f):
        return r["nic_port"]  # it joins, and its timeout is armed, when the flow before it is done (leave_ring)
    arm_rto(w, f)
    _join(w, I64(r["nic_port"]), f, t)
    return r["nic_port"]


@njit
def _wait_for_connection(w, f):
    """If a flow of f's connection (the same connection id, NIC port, destination and priority:
    network.nic.queue_pair, run/world.py) is still sending, queue f behind the last flow waiting
    for it and return True."""
    r = w.qp[f]
    pt = w.port[r["nic_port"]]
    g = pt["act_head"]
    for _ in range(pt["act_count"]):
        q = w.qp[g]
        if q["conn"] == r["conn"] and q["dst"] == r["dst"] and q["prio"] == r["prio"]:
            while w.qp[g]["conn_next"] >= 0:
                g = w.qp[g]["conn_next"]
            w.qp[g]["conn_next"] = f
            return True
        g = q["act_next"]
    return False


@njit
def train_key(w, k):
    """Train k's flow and first sequence number in one integer. While a port still passes a
    train on, no other train has both: its flow ends after the port has passed it."""
    return (I64(w.pkt[k]["qp"]) << 34) | I64(w.pkt[k]["seq"])


@njit
def train_at(w, p):
    """The train port p is sending or passing on now, or -1. A port hands a train on as its
    first packet goes (port._send_train) and names it by tx_train and its key (train_key), so
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
    - kept by its NIC (port._send_train): the NIC ends it sooner (_cut_on_path);
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
    # as if the control packets the port sent inside it (port._control_inside_train) went first
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
    host, or the port after it has passed it on to its host interleaved (port._interleave: its
    arrival there is pushed, take_tok), its arrival there is pushed again for when it is due. A
    NIC that still keeps the train (port._send_train) just ends it sooner."""
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
        peer = I64(w.port[e]["peer_port"])  # e passed it on interleaved (port._interleave)
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
    """Control packets sent inside train k at port p (port._control_inside_train) delay the rest
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
    link's delay until it has left (port._send_train), but a multi_dim NIC link's router passes
    every train on as it comes in."""
    pt = w.port[p]
    return pt["tx_pkt"] < 0 or pt["cut_through"] != 0


@njit
def retime_train(w, p, k, additive, d):
    """Port p's own end of train k moved (tx_own_ps: control packets sent inside it, or a cut).
    A port ends a train at the later of its own end and its last packet's arrival (tx_in_ps),
    so p ends it then, its last packet reaches the next port that passes it on then, which ends
    it accordingly, and so on; the train's last bit reaches the node after them (last_in_ps), or,
    if the port after them passed it on interleaved (port._interleave), its host a packet's time
    and that link's delay later, if that is later than before. So a delay at one port uses up
    the slack of the ports after it, which wait for the train's packets anyway, before it delays
    them. ``additive``: those ports end it d later instead. A NIC that still keeps the train
    (port._send_train) hands it on later (port._leave_nic)."""
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
    if e >= 0 and pk["take_tok"] != 0:  # e passed it on interleaved to its host (port._interleave)
        tail = max(pk["last_in_ps"], interleaved_tail(w, e, tail, one_wire))
    pk["last_in_ps"] = tail


@njit
def interleaved_tail(w, e, tail_in, one_wire):
    """When the last bit of a train that port e passes on interleaved (port._interleave), whose
    last packet (of ``one_wire`` bytes) is in at e's node at ``tail_in``, reaches e's peer."""
    et = w.port[e]
    return tail_in + ser_ps(one_wire, et["rate_bps"]) + et["prop_ps"]


@njit
def move_train_end(w, p, end):
    """The train port p is sending now ends at ``end``. Cut short: a new end event, and the old
    one is stale (port.on_tx_done ignores it). Later, with control packets sent inside it: the
    live end event, when it comes, pushes itself to the new end (port.on_tx_done), so that a
    train delayed several times costs one more event, not one per delay."""
    pt = w.port[p]
    pt["tx_end_ps"] = end
    if end < pt["end_ev_ps"]:
        pt["end_ev_ps"] = end
        heap_push(w.ev, w.meta, end, EV_TX_DONE, I64(p), NO_ARG)


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
        if w.cfg[CFG_TRAIN_MAX] > 0:
            _path_add(w, f, I64(-1))
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
        r["steady"] = 0
        r["timeouts"] += 1
        w.stats[C_TIMEOUTS] += 1
        return _go_back(w, f, r["snd_una"])
    return -1


# ---- receiver ---------------------------------------------------------------------------
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
    w.pkt[k]["sent_ps"] = w.pkt[k_data]["sent_ps"]
    if w.pkt[k_data]["train_len"] > 1:  # answered at train_due_ps
        w.pkt[k]["sent_ps"] -= _ack_echo_shift_ps(w, k_data, w.port[p]["rate_bps"])
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
    if kind != PK_ACK or pk["ecn"] != 0:  # a congestion signal or a loss: not steady
        r["steady"] = 0
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
