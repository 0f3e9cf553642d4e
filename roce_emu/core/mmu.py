"""Switch shared-buffer MMU: ingress admission, PFC XOFF/XON, and RED ECN marking at dequeue.

The accounting follows the HPCC ns-3 model (docs/model.md §5.1): each ingress
(port, priority) has a small reserve, then shares a pool whose dynamic threshold is
``(buffer - headroom - reserve - shared_used) >> shift(port)``; bytes past the
threshold go to the port's headroom, and any headroom use or a full share pauses the
upstream sender. XON when headroom is empty and the share is back below the
threshold by the resume offset. With PFC off, a packet is dropped when the buffer is full.

World arrays: reads cfg; writes stats, rng, port, pq, node, qp.
"""

from .jit import njit
from .kinds import (
    CFG_ECN_ON,
    CFG_PFC_BYTES,
    CFG_PFC_ON,
    CFG_RESERVE,
    CFG_RESUME_OFF,
    CTRL_PRIO,
    C_BUFFER_OVERFLOW,
    C_DATA_DROPPED,
    C_ECN_MARKS,
    C_PAUSES,
    C_RESUMES,
    F_BUFFER_NEGATIVE,
    F_BUFFER_OVER,
    I64,
    NO_ID,
    PK_PAUSE,
    PK_RESUME,
)
from .packets import fault, fifo_push, pkt_alloc
from .rng import rand_unit


@njit
def pfc_threshold(w, node, p):
    nd = w.node[node]
    return max(nd["pfc_free_bytes"] - nd["shared_used"], 0) >> w.port[p]["pfc_shift"]


@njit
def _shared_used(w, p, prio):
    return max(w.pq[p, prio]["in_bytes"] - w.cfg[CFG_RESERVE], 0)


@njit
def admit(w, node, p_in, prio, size):
    """Account a data frame arriving on ingress (p_in, prio); False if it must be dropped."""
    nd = w.node[node]
    q = w.pq[p_in, prio]
    if nd["used_bytes"] + size > nd["buffer_bytes"]:
        if w.cfg[CFG_PFC_ON] != 0:
            w.stats[C_BUFFER_OVERFLOW] += 1
        return False
    reserve = w.cfg[CFG_RESERVE]
    thr = pfc_threshold(w, node, p_in)
    if w.cfg[CFG_PFC_ON] != 0:
        if size + q["hdrm_bytes"] > w.port[p_in]["headroom_bytes"] and size + _shared_used(w, p_in, prio) > thr:
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
        fault(w, F_BUFFER_OVER, node)
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
    from_shared = min(size - from_hdrm, _shared_used(w, p_in, prio))
    q["hdrm_bytes"] -= from_hdrm
    q["in_bytes"] -= size - from_hdrm
    nd = w.node[node]
    nd["shared_used"] -= from_shared
    nd["used_bytes"] -= size
    if nd["used_bytes"] < 0 or nd["shared_used"] < 0 or q["in_bytes"] < 0:
        fault(w, F_BUFFER_NEGATIVE, node)


@njit
def _send_pfc(w, p, prio, kind):
    """Queue a PFC frame for priority prio on port p (towards the upstream sender)."""
    k = pkt_alloc(w, kind, NO_ID, I64(prio), w.cfg[CFG_PFC_BYTES], CTRL_PRIO, NO_ID)
    fifo_push(w, I64(p), CTRL_PRIO, I64(k))


@njit
def check_pause(w, node, p_in, prio):
    """After an admission: XOFF upstream if the ingress queue uses headroom or its full share.

    Returns True when a PAUSE frame was queued on p_in (the caller kicks the port)."""
    q = w.pq[p_in, prio]
    if w.cfg[CFG_PFC_ON] == 0 or q["xoff_sent"] != 0:
        return False
    if q["hdrm_bytes"] > 0 or _shared_used(w, p_in, prio) >= pfc_threshold(w, node, p_in):
        q["xoff_sent"] = 1
        w.port[p_in]["pauses_sent"] += 1
        w.stats[C_PAUSES] += 1
        _send_pfc(w, p_in, prio, PK_PAUSE)
        return True
    return False


@njit
def check_resume(w, node, p_in, prio):
    """After a release: XON upstream once headroom is empty and the share is below threshold."""
    q = w.pq[p_in, prio]
    if q["xoff_sent"] == 0 or q["hdrm_bytes"] != 0:
        return False
    shared = _shared_used(w, p_in, prio)
    if shared == 0 or shared + w.cfg[CFG_RESUME_OFF] <= pfc_threshold(w, node, p_in):
        q["xoff_sent"] = 0
        w.stats[C_RESUMES] += 1
        _send_pfc(w, p_in, prio, PK_RESUME)
        return True
    return False


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
