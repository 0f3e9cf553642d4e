"""Congestion-control hooks of the engine: dispatch on each queue pair's algorithm code (CC_*).

The NIC, the switch ports, the queue pairs and the fast-forward call these and nothing
algorithm-specific; each algorithm lives in its own module (dcqcn, hpcc, timely, dctcp)
and is listed in ``registry``. ``CC_NONE`` sends at line rate and ignores every
notification. A queue pair carries its flow's algorithm (qp["cc"]) and its row of
parameters in World.ccp (qp["cc_row"]): jobs of one run may each have their own. A hook
reads the code from the queue pair it acts on, a record the caller has just touched, so
the branches cost one load and one comparison; a switch port, which holds only the packet,
looks at its queue pair only in a run that mixes HPCC with other algorithms
(cfg[CFG_CC_USED]).

World arrays: reads cfg, pkt, ccp; writes stats, qp.
"""

import numpy as np

from ..jit import njit
from ..kinds import CC_DCQCN, CC_DCTCP, CC_HPCC, CC_NONE, CC_TIMELY, CFG_CC_USED, C_CNPS
from . import dcqcn, dctcp, hpcc, timely
from .base import timer_fires

HPCC_BIT = 1 << CC_HPCC  #: HPCC's bit of cfg[CFG_CC_USED]
NOTIFY_NONE = 0  #: a plain ACK
NOTIFY_FLAG = 1  #: flag the ACK (ECN echo / ConnectX CNP flag)
NOTIFY_CNP = 2  #: also send a separate CNP packet


@njit
def on_open(w, f, line_bps):
    """Queue pair f opens at line_bps: a windowed algorithm starts with the window of the line
    rate over its base RTT (HPCC, DCTCP: W = maxBdp)."""
    cc = w.qp[f]["cc"]
    if cc == CC_HPCC or cc == CC_DCTCP:
        slot = hpcc.P_BASE_RTT_PS if cc == CC_HPCC else dctcp.P_BASE_RTT_PS
        base_rtt = w.ccp[w.qp[f]["cc_row"], slot]
        w.qp[f]["window_bytes"] = max(np.int64((line_bps * base_rtt) // 8e12), 1)


@njit(inline="always", entry=True)
def on_ack(w, f, k, t):
    """An ACK or NACK (packet k) reached flow f's sender. True if the algorithm may have changed
    its rate or window (so the NIC should look at the queue pair again)."""
    cc = w.qp[f]["cc"]
    if cc == CC_DCQCN:
        if w.pkt[k]["ecn"] != 0:
            dcqcn.on_cnp(w, f, t)
    elif cc == CC_HPCC:
        hpcc.on_ack(w, f, k)
    elif cc == CC_TIMELY:
        timely.on_ack(w, f, k, t)
    elif cc == CC_DCTCP:
        dctcp.on_ack(w, f, k)
    return cc != CC_NONE


@njit(entry=True)
def on_cnp(w, f, t):
    """A CNP packet reached flow f's sender."""
    if w.qp[f]["cc"] == CC_DCQCN:
        dcqcn.on_cnp(w, f, t)


@njit
def on_timer(w, f, timer, t):
    if timer_fires(w, f, timer, t) and w.qp[f]["cc"] == CC_DCQCN:
        dcqcn.on_timer(w, f, timer, t)


@njit
def on_send(w, f, wire):
    """Flow f sent wire bytes (DCQCN's byte counter is the only algorithm that counts them)."""
    if w.qp[f]["cc"] == CC_DCQCN:
        dcqcn.on_send(w, f, wire)


@njit
def receiver_notify(w, f, t):
    """How the receiver answers a data packet that carried a CE mark (NOTIFY_*)."""
    cc = w.qp[f]["cc"]
    if cc == CC_DCQCN and w.ccp[w.qp[f]["cc_row"], dcqcn.P_VARIANT] == dcqcn.VARIANT_PAPER:
        if dcqcn.receiver_wants_cnp(w, f, t):
            w.stats[C_CNPS] += 1
            return NOTIFY_CNP
        return NOTIFY_NONE
    if cc == CC_DCQCN or cc == CC_DCTCP:
        w.stats[C_CNPS] += 1
    return NOTIFY_FLAG


@njit
def cnp_gap_ps(w, f):
    """How long after a CNP the receiver may send the next for flow f (0: no limit)."""
    if w.qp[f]["cc"] == CC_DCQCN:
        return np.int64(w.ccp[w.qp[f]["cc_row"], dcqcn.P_CNP_PS])
    return np.int64(0)


@njit
def on_switch_egress(w, k, p, t):
    """Switch port p starts sending data packet k (HPCC pushes its INT record: switches stamp
    the packets that carry an INT header, those of HPCC's flows)."""
    used = w.cfg[CFG_CC_USED]
    if used & HPCC_BIT and (used == HPCC_BIT or w.qp[w.pkt[k]["qp"]]["cc"] == CC_HPCC):
        hpcc.stamp(w, k, p, t)


@njit
def on_reply(w, f, k_data, k):
    """Flow f's receiver answers data packet k_data with ACK or NACK k (HPCC echoes the INT records)."""
    if w.qp[f]["cc"] == CC_HPCC:
        hpcc.echo(w, k_data, k)
