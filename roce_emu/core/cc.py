"""Congestion-control hooks of the engine: dispatch on the run's algorithm code (CC_*).

The NIC and the loop call these and nothing algorithm-specific; each algorithm lives
in its own module (cc_dcqcn, cc_hpcc, cc_timely, cc_dctcp). ``CC_NONE`` sends at
line rate and ignores every notification.
"""
from . import cc_dcqcn, cc_dctcp, cc_hpcc, cc_timely
from .cc_base import timer_fires
from .jit import njit
from .kinds import CC_DCQCN, CC_DCTCP, CC_HPCC, CC_TIMELY, CFG_CC, C_CNPS

NOTIFY_NONE = 0  #: a plain ACK
NOTIFY_FLAG = 1  #: flag the ACK (ECN echo / ConnectX CNP flag)
NOTIFY_CNP = 2  #: also send a separate CNP packet


@njit
def on_ack(w, f, k, t):
    """An ACK or NACK (packet k) reached flow f's sender."""
    cc = w.cfg[CFG_CC]
    if cc == CC_DCQCN:
        if w.pkt[k]["ecn"] != 0:
            cc_dcqcn.on_cnp(w, f, t)
    elif cc == CC_HPCC:
        cc_hpcc.on_ack(w, f, k)
    elif cc == CC_TIMELY:
        cc_timely.on_ack(w, f, k, t)
    elif cc == CC_DCTCP:
        cc_dctcp.on_ack(w, f, k)


@njit
def on_cnp(w, f, t):
    """A CNP packet reached flow f's sender."""
    if w.cfg[CFG_CC] == CC_DCQCN:
        cc_dcqcn.on_cnp(w, f, t)


@njit
def on_timer(w, f, timer, t):
    if timer_fires(w, f, timer, t) and w.cfg[CFG_CC] == CC_DCQCN:
        cc_dcqcn.on_timer(w, f, timer, t)


on_send = cc_dcqcn.on_send  # DCQCN's byte counter is the only per-packet send hook


@njit
def receiver_notify(w, f, t):
    """How the receiver answers a data packet that carried a CE mark (NOTIFY_*)."""
    cc = w.cfg[CFG_CC]
    if cc == CC_DCQCN and w.ccp[cc_dcqcn.P_VARIANT] == cc_dcqcn.VARIANT_PAPER:
        if cc_dcqcn.receiver_wants_cnp(w, f, t):
            w.stats[C_CNPS] += 1
            return NOTIFY_CNP
        return NOTIFY_NONE
    if cc == CC_DCQCN or cc == CC_DCTCP:
        w.stats[C_CNPS] += 1
    return NOTIFY_FLAG


stamp_int = cc_hpcc.stamp
echo_int = cc_hpcc.echo
