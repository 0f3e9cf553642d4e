"""Queue pairs: the live state of a flow, in a slot of World.qp that later flows reuse.

A flow of the workload (World.flow, index ``L``) opens a queue pair when it starts. The
queue pair (index ``f``) holds everything that changes while the flow is in flight: its
sequence numbers, pacing, congestion-control state (World.ccs), timers and HPCC's INT
history. Packets name the queue pair. It closes once the sender has every ACK and no
packet of it is left anywhere; its counters go back to the flow's record and the slot is
free for the next flow. So memory grows with the flows in flight, not with the workload.

CC timer events (EV_CC_TIMER) carry their flow: one that pops after its queue pair closed
finds another flow, or none, in the slot, and is what the closed flow's timer was, a no-op
(loop.py). The retransmission timer belongs to the slot: it has at most one pending EV_RTO
event, which a later flow in the slot inherits and re-arms to its own deadline when it pops
(nic.arm_rto). Which slot a flow gets changes no result.

World arrays: reads cfg, port; writes meta, flow, qp, qp_free, ccs, timer, int_prev.
"""

import numpy as np
from numba import literal_unroll

from .cc import dispatch as cc
from .jit import njit
from .kinds import CFG_MTU, FL_ACTIVE, FL_DONE, I64, M_QP_FREE
from .state import CC_DTYPE, QP_COUNTERS, QP_DTYPE

_BLANK_QP = np.zeros(1, QP_DTYPE)  # every field zero: a slot is reset from these before reuse
_BLANK_CC = np.zeros(1, CC_DTYPE)


@njit(inline="always")
def same_connection(a, b):
    """Whether a and b (flow or queue-pair records) go in order on one connection: the same
    connection id (>= 0: network.nic.queue_pair, run/world.connections), NIC port, destination and
    priority. The engine queues a flow behind such a one (nic._wait_for_connection); the memo keys
    by it (memo._same_connection)."""
    return (
        a["conn"] >= 0
        and a["conn"] == b["conn"]
        and a["nic_port"] == b["nic_port"]
        and a["dst"] == b["dst"]
        and a["prio"] == b["prio"]
    )


@njit
def _cc_start(w, f):
    """Every flow starts at its NIC's line rate (no slow start in any of the algorithms), with
    alpha = 1 and U = 1; HPCC and DCTCP start with the window of one base RTT at line rate."""
    c = w.ccs[f]
    line = np.float64(w.qp[f]["rate_bps"])
    c["line_bps"] = line
    c["rate"] = line
    c["target"] = line
    c["ref_rate"] = line
    c["alpha"] = 1.0
    c["util"] = 1.0
    c["batch"] = 1
    c["last_cnp_ps"] = -1
    cc.on_open(w, f, line)


@njit(entry=True)
def qp_open(w, L):
    """Flow L starts: give it a free queue pair, reset to the flow's start state; return it."""
    n = w.meta[M_QP_FREE] - 1
    w.meta[M_QP_FREE] = n
    f = I64(w.qp_free[n])
    fl = w.flow[L]
    armed = w.qp[f]["rto_armed"]  # the slot's pending timer event serves the new flow (nic.arm_rto)
    w.qp[f] = _BLANK_QP[0]
    w.qp[f]["rto_armed"] = armed
    w.ccs[f] = _BLANK_CC[0]
    w.timer[f] = 0
    w.int_prev[f] = 0
    r = w.qp[f]
    r["flow"] = L
    r["size_bytes"] = fl["size_bytes"]
    r["n_pkts"] = (fl["size_bytes"] + w.cfg[CFG_MTU] - 1) // w.cfg[CFG_MTU]
    r["ecmp_hash"] = fl["ecmp_hash"]
    r["src"] = fl["src"]
    r["dst"] = fl["dst"]
    r["nic_port"] = fl["nic_port"]
    r["prio"] = fl["prio"]
    r["conn"] = fl["conn"]
    r["cc"] = fl["cc"]
    r["cc_row"] = fl["cc_row"]
    r["rate_bps"] = w.port[fl["nic_port"]]["nominal_bps"]
    r["nack_seq"] = -1
    r["act_next"] = -1
    r["act_prev"] = -1
    r["conn_next"] = -1
    r["finish_ps"] = -1
    r["state"] = FL_ACTIVE
    _cc_start(w, f)
    fl["qp"] = f
    fl["state"] = FL_ACTIVE
    return f


@njit
def qp_release(w, f):
    """One packet that named queue pair f is gone; close it if that was the last one and its
    sender has every ACK: the counters go to the flow's record and the slot is free."""
    r = w.qp[f]
    r["alive"] -= 1
    if r["alive"] > 0 or r["state"] != FL_DONE:
        return
    fl = w.flow[r["flow"]]
    for name in literal_unroll(QP_COUNTERS):  # its state among them: FL_DONE
        fl[name] = r[name]
    fl["qp"] = -1
    r["flow"] = -1
    n = w.meta[M_QP_FREE]
    w.qp_free[n] = f
    w.meta[M_QP_FREE] = n + 1
