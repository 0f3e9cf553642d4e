"""Priority flow control (IEEE 802.1Qbb), all of it in one place.

- **Pausing the upstream sender.** After a switch admits a data frame to an ingress
  (port, priority), ``check_pause`` sends a PAUSE back over that port once the queue uses its
  headroom or its full share of the buffer. After a release, ``check_resume`` sends a RESUME
  once the headroom is empty and the share is back below the threshold by the resume offset.
  The share, the threshold and the headroom are the MMU's accounting (mmu.py, docs/model.md
  §5.1). A host's NIC never pauses its switch: hosts drain what they receive.
- **Obeying a frame.** A PAUSE or RESUME that arrives (``on_frame``) stops or restarts the
  egress queue of the priority it names on the port it arrives at. The schedulers of switch
  ports (port.py) and NICs (nic.py) skip a queue while ``is_paused``.
- **Links.** PFC frames are link-local and lossless: a lossy port spares them (``is_pfc``).
  A link that goes down or comes back clears both sides' pause state (``reset``).
- The control priority (kinds.CTRL_PRIO: ACKs, CNPs and the PFC frames themselves) is never
  paused.

World arrays: reads cfg, pkt; writes stats, port, pq.
"""

from .jit import njit
from .kinds import CFG_PFC_BYTES, CFG_PFC_ON, CFG_RESUME_OFF, CTRL_PRIO, C_PAUSES, C_RESUMES, I64, NO_ID, NPRIO
from .kinds import PK_PAUSE, PK_RESUME
from .mmu import pfc_threshold, shared_used
from .packets import fifo_push, pkt_alloc, pkt_free
from .trace import log_pfc


@njit
def is_pfc(kind):
    """PFC PAUSE or RESUME: link-local frames that act on the port they arrive at."""
    return kind == PK_PAUSE or kind == PK_RESUME


@njit
def is_paused(w, p, prio):
    """Port p's egress queue of priority prio is paused by its peer."""
    return w.pq[p, prio]["paused"] != 0


@njit
def _send(w, p, prio, kind):
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
    if q["hdrm_bytes"] > 0 or shared_used(w, p_in, prio) >= pfc_threshold(w, node, p_in):
        q["xoff_sent"] = 1
        w.port[p_in]["pauses_sent"] += 1
        w.stats[C_PAUSES] += 1
        _send(w, p_in, prio, PK_PAUSE)
        return True
    return False


@njit
def check_resume(w, node, p_in, prio):
    """After a release: XON upstream once headroom is empty and the share is below threshold.

    Returns True when a RESUME frame was queued on p_in (the caller kicks the port)."""
    q = w.pq[p_in, prio]
    if q["xoff_sent"] == 0 or q["hdrm_bytes"] != 0:
        return False
    pool_bytes = shared_used(w, p_in, prio)
    if pool_bytes == 0 or pool_bytes + w.cfg[CFG_RESUME_OFF] <= pfc_threshold(w, node, p_in):
        q["xoff_sent"] = 0
        w.stats[C_RESUMES] += 1
        _send(w, p_in, prio, PK_RESUME)
        return True
    return False


@njit
def on_frame(w, k, p_in, t):
    """PFC frame k arrived on port p_in at t: pause or resume our egress of the same link for
    the priority it names (the frame's seq), and free it. True on a resume (the caller kicks
    the port)."""
    pk = w.pkt[k]
    prio = pk["seq"]
    pause = pk["kind"] == PK_PAUSE
    w.pq[p_in, prio]["paused"] = 1 if pause else 0
    log_pfc(w, t, p_in, prio, pause)
    pkt_free(w, k)
    return not pause


@njit
def reset(w, p):
    """Port p's link went down or came back: the peer's pauses and our own lapse with it,
    and PFC starts again from scratch."""
    for prio in range(NPRIO):
        w.pq[p, prio]["paused"] = 0
        w.pq[p, prio]["xoff_sent"] = 0
