"""Switch shared-buffer MMU: ingress admission and release, and RED ECN marking at dequeue.

The accounting follows the HPCC ns-3 model (docs/model.md §5.1): each ingress
(port, priority) has a small reserve, then shares a pool whose dynamic threshold is
``(buffer - headroom - reserve - shared_used) >> shift(port)``; bytes past the
threshold go to the port's headroom. pfc.py pauses the upstream sender from this
accounting (any headroom use, or a full share). With PFC off, a packet is dropped when
the buffer is full.

World arrays: reads cfg; writes stats, rng, port, pq, node, qp.
"""

from .jit import njit
from .kinds import (
    CFG_ECN_ON,
    CFG_PFC_ON,
    CFG_RESERVE,
    C_BUFFER_OVERFLOW,
    C_DATA_DROPPED,
    C_ECN_MARKS,
    INV_BUFFER_NEGATIVE,
    INV_BUFFER_OVER,
)
from .packets import invariant_broken
from .rng import rand_unit


@njit
def pfc_threshold(w, node, p):
    """The dynamic threshold of an ingress queue's share (pfc.py pauses at it)."""
    nd = w.node[node]
    return max(nd["pfc_free_bytes"] - nd["shared_used"], 0) >> w.port[p]["pfc_shift"]


@njit
def shared_used(w, p, prio):
    """Bytes of ingress (p, prio) beyond its reserve: its use of the shared pool."""
    return max(w.pq[p, prio]["in_bytes"] - w.cfg[CFG_RESERVE], 0)


@njit
def admit(w, node, p_in, prio, size, frames):
    """Account a data frame arriving on ingress (p_in, prio), or a train of ``frames`` frames
    (``size`` bytes in all); False if it must be dropped. A train's frames would arrive one by
    one and PFC would pause its sender as the headroom fills, so it is refused for the headroom
    only if its first frame would be: it may overfill the headroom by what exactly waits at its
    sender (docs/fast_forward.md, "Trains and PFC")."""
    nd = w.node[node]
    q = w.pq[p_in, prio]
    if nd["used_bytes"] + size > nd["buffer_bytes"]:
        if w.cfg[CFG_PFC_ON] != 0:
            w.stats[C_BUFFER_OVERFLOW] += 1
        return False
    reserve = w.cfg[CFG_RESERVE]
    thr = pfc_threshold(w, node, p_in)
    if w.cfg[CFG_PFC_ON] != 0:
        first = size // frames
        if first + q["hdrm_bytes"] > w.port[p_in]["headroom_bytes"] and first + shared_used(w, p_in, prio) > thr:
            return False  # headroom exhausted: PFC is mis-sized for this link
    new_bytes = q["in_bytes"] + size
    if new_bytes <= reserve:
        q["in_bytes"] = new_bytes
    elif new_bytes - reserve > thr:
        q["hdrm_bytes"] += size
    else:
        q["in_bytes"] = new_bytes
        nd["shared_used"] += min(size, new_bytes - reserve)
    used = nd["used_bytes"] + size
    nd["used_bytes"] = used
    if used > nd["max_used"]:
        nd["max_used"] = used
    if used > nd["buffer_bytes"]:
        invariant_broken(w, INV_BUFFER_OVER, node)
    return True


@njit
def count_drop(w, p_in, f):
    w.port[p_in]["drops"] += 1
    w.qp[f]["pkts_dropped"] += 1
    w.stats[C_DATA_DROPPED] += 1


@njit
def release(w, node, p_in, prio, size):
    """Undo the admission of a frame that leaves the switch (at dequeue)."""
    q = w.pq[p_in, prio]
    from_hdrm = min(q["hdrm_bytes"], size)
    from_shared = min(size - from_hdrm, shared_used(w, p_in, prio))
    q["hdrm_bytes"] -= from_hdrm
    q["in_bytes"] -= size - from_hdrm
    nd = w.node[node]
    nd["shared_used"] -= from_shared
    nd["used_bytes"] -= size
    if nd["used_bytes"] < 0 or nd["shared_used"] < 0 or q["in_bytes"] < 0:
        invariant_broken(w, INV_BUFFER_NEGATIVE, node)


@njit
def ecn_mark(w, p, prio):
    """RED decision on the egress queue bytes left behind the departing packet (of a queued
    train, only its first packet: the rest is still arriving, cut-through)."""
    if w.cfg[CFG_ECN_ON] == 0:
        return False
    q = w.pq[p, prio]["bytes"] - w.pq[p, prio]["ahead_bytes"]
    pt = w.port[p]
    kmin = pt["kmin_bytes"]
    kmax = pt["kmax_bytes"]
    if q <= kmin:
        return False
    if q > kmax:
        mark = True
    else:
        mark = rand_unit(w.rng) < pt["pmax"] * (q - kmin) / (kmax - kmin)
    if mark:
        pt["ecn_marks"] += 1
        w.stats[C_ECN_MARKS] += 1
    return mark
