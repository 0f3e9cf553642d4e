"""IRN loss recovery (Mittal et al., SIGCOMM'18, "Revisiting Network Support for RDMA"):
selective repeat with bitmaps, a BDP cap on packets in flight, and two timeouts.

network.transport: irn (cfg[CFG_TRANSPORT] == TP_IRN); nic.py calls these where go-back-N
would act otherwise.

- **Receiver.** It keeps the packets that arrive out of order in a bitmap (World.irn_bits[f,
  IRN_RCV]) and answers each with a NACK that carries its cumulative ack (the packet it
  expects) and, in the NACK's ``aux`` field, the sequence that arrived (a selective ack).
  The packet it expects advances the cumulative ack past every packet the bitmap holds.
- **BDP-FC.** A sender sends a new packet only while fewer than cfg[CFG_IRN_CAP] packets are in
  flight (its next new sequence minus its cumulative ack): the bandwidth-delay product of the
  fabric's longest path, in MTU-sized packets. So no packet is ever more than a cap ahead of
  the receiver's cumulative ack, and a ring of one cap's bits per side suffices.
- **Loss recovery.** A NACK, or a timeout, starts recovery: the sender marks its selective
  acks in its own bitmap (IRN_SND), resends first the packet of the cumulative ack, then every
  packet below the highest selective ack that is not selectively acked (as TCP with SACK does),
  each once, before new ones; it leaves recovery once the cumulative ack passes the recovery
  sequence (the last new packet sent before recovery began). A lost resend is found by timeout.
- **Timeouts.** RTO_low with at most cfg[CFG_RTO_LOW_PKTS] packets in flight, RTO_high with
  more, from the last ACK progress. The slot's one timer event (nic.arm_rto) is never more than
  RTO_low ahead, so a deadline that moves earlier (fewer packets in flight) is still met.

World arrays: reads cfg; writes stats, qp, irn_bits.
"""

import numpy as np

from .jit import njit
from .kinds import (
    CFG_IRN_CAP,
    CFG_MTU,
    CFG_RTO_HIGH_PS,
    CFG_RTO_LOW_PKTS,
    CFG_RTO_LOW_PS,
    C_TIMEOUTS,
)
from .state import IRN_RCV, IRN_SND

_ONE = np.uint64(1)


@njit(inline="always")
def _word_bit(w, seq):
    """The word and the bit of sequence ``seq`` in a ring of World.irn_bits' width."""
    i = seq % (w.irn_bits.shape[2] * 64)
    return i >> 6, _ONE << np.uint64(i & 63)


@njit(inline="always")
def _has(w, f, side, seq):
    word, bit = _word_bit(w, seq)
    return (w.irn_bits[f, side, word] & bit) != 0


@njit(inline="always")
def _set(w, f, side, seq):
    word, bit = _word_bit(w, seq)
    w.irn_bits[f, side, word] |= bit


@njit(inline="always")
def _clear(w, f, side, seq):
    word, bit = _word_bit(w, seq)
    w.irn_bits[f, side, word] &= ~bit


@njit
def start(w, f, t):
    """Queue pair f opens at t: empty bitmaps, not in recovery, the timer RTO_low away."""
    r = w.qp[f]
    for side in range(2):
        for word in range(w.irn_bits.shape[2]):
            w.irn_bits[f, side, word] = 0
    r["recover_seq"] = -1
    restart_timer(w, f, t)


@njit
def restart_timer(w, f, t):
    """Queue pair f's timeout counts from t, RTO_low away (it opens, or it had nothing in flight
    while it waited for data to send, which is no loss)."""
    r = w.qp[f]
    r["acked_ps"] = t
    r["rto_ps"] = t + w.cfg[CFG_RTO_LOW_PS]


# ---- receiver ------------------------------------------------------------------------
@njit
def fill(w, f, new):
    """The receiver's cumulative ack becomes ``new`` (the expected packet arrived): past it too
    every packet the bitmap holds, which it forgets. Returns the cumulative ack."""
    n_pkts = w.qp[f]["n_pkts"]
    while new < n_pkts and _has(w, f, IRN_RCV, new):
        _clear(w, f, IRN_RCV, new)
        new += 1
    return new


@njit
def hold(w, f, seq):
    """Packet seq arrived ahead of the receiver's cumulative ack: keep it (BDP-FC keeps it less
    than a cap ahead, so its bit is its own)."""
    _set(w, f, IRN_RCV, seq)


# ---- sender --------------------------------------------------------------------------
@njit
def next_lost(w, f):
    """In recovery, the lowest packet inferred lost and not yet resent, or -1: from the resend
    cursor up to the highest selective ack, the first that is neither acked nor selectively
    acked. The cursor skips what it passes."""
    r = w.qp[f]
    if r["recover_seq"] < 0:
        return -1
    s = max(r["rtx_nxt"], r["snd_una"])
    end = r["rtx_end"]
    while s < end and _has(w, f, IRN_SND, s):
        s += 1
    r["rtx_nxt"] = s
    return s if s < end else -1


@njit
def may_send(w, f):
    """Whether queue pair f has a packet to send now: a lost one to resend (the window of a
    windowed algorithm counts the hole, so it holds back only new packets), or a new one that
    BDP-FC and the window allow."""
    r = w.qp[f]
    if next_lost(w, f) >= 0:
        return True
    in_flight = r["snd_nxt"] - r["snd_una"]
    if r["window_bytes"] > 0 and in_flight * w.cfg[CFG_MTU] >= r["window_bytes"]:
        return False
    return r["snd_nxt"] < r["n_pkts"] and in_flight < w.cfg[CFG_IRN_CAP]


@njit
def next_seq(w, f):
    """The sequence queue pair f sends next: a lost packet first, else its next new one."""
    s = next_lost(w, f)
    return s if s >= 0 else w.qp[f]["snd_nxt"]


@njit
def on_progress(w, f, old, new, t):
    """The cumulative ack of queue pair f moved from ``old`` to ``new`` at t: its timer restarts,
    the selective acks below it are forgotten, and recovery ends once it passes the recovery
    sequence."""
    r = w.qp[f]
    r["acked_ps"] = t
    for s in range(old, min(new, old + w.irn_bits.shape[2] * 64)):
        _clear(w, f, IRN_SND, s)
    if r["recover_seq"] >= 0 and new > r["recover_seq"]:
        r["recover_seq"] = -1


@njit
def _recover(w, f):
    """Enter loss recovery (if not in it): the packet of the cumulative ack is lost; the recovery
    sequence is the last new packet sent."""
    r = w.qp[f]
    if r["recover_seq"] >= 0:
        return
    r["recover_seq"] = r["snd_nxt"] - 1
    r["rtx_nxt"] = r["snd_una"]
    r["rtx_end"] = max(r["rtx_end"], r["snd_una"] + 1)


@njit
def on_nack(w, f, sack):
    """A NACK whose cumulative ack the sender has taken (nic._on_ack) selectively acks ``sack``:
    mark it, recover, and say whether a packet is to be resent."""
    r = w.qp[f]
    if r["snd_una"] <= sack < r["snd_nxt"]:
        _set(w, f, IRN_SND, sack)
        r["rtx_end"] = max(r["rtx_end"], sack)
    _recover(w, f)
    return next_lost(w, f) >= 0


@njit
def on_timer(w, f, t):
    """Queue pair f's timer event popped at t. Before the deadline (RTO_low or RTO_high after the
    last progress, by the packets in flight now), set the next event (at most RTO_low away) and
    return False; at it, time out: restart the timer, resend from the cumulative ack (recovery)
    and return True if packets are in flight."""
    r = w.qp[f]
    low = w.cfg[CFG_RTO_LOW_PS]
    in_flight = r["snd_nxt"] - r["snd_una"]
    due = r["acked_ps"] + (low if in_flight <= w.cfg[CFG_RTO_LOW_PKTS] else w.cfg[CFG_RTO_HIGH_PS])
    if t < due:
        r["rto_ps"] = min(due, t + low)
        return False
    r["acked_ps"] = t
    r["rto_ps"] = t + low
    if in_flight == 0:
        return False
    r["timeouts"] += 1
    w.stats[C_TIMEOUTS] += 1
    r["recover_seq"] = -1  # a new recovery, from the cumulative ack again
    _recover(w, f)
    return True
