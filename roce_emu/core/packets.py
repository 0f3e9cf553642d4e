"""Packet pool (free-list stack) and the per-(port, priority) FIFO queues threaded through it.

World arrays: reads cfg; writes stats, meta, pkt, pkt_free, port, pq, qp.
"""

from .jit import njit
from .kinds import (
    CC_INT_BYTES,
    CFG_ACK_BYTES,
    CFG_DATA_HDR,
    CFG_IFG,
    C_CTRL_DROPPED,
    C_DATA_DROPPED,
    C_LINK_LOST,
    INV_DOUBLE_FREE,
    INV_QUEUE_NEGATIVE,
    M_INVARIANT,
    I64,
    M_INVARIANT_OBJ,
    M_FREE,
    PK_DATA,
    PK_FREE,
)
from .qp import qp_release


@njit(entry=True)
def pkt_alloc(w, kind, f, seq, frame_bytes, prio, dst):
    """A packet from the pool; ``f`` is the queue pair it belongs to (-1 for PFC frames),
    which stays open while the packet exists."""
    if f >= 0:
        w.qp[f]["alive"] += 1
    n = w.meta[M_FREE] - 1
    w.meta[M_FREE] = n
    k = w.pkt_free[n]
    r = w.pkt[k]
    r["kind"] = kind
    r["qp"] = f
    r["seq"] = seq
    r["frame_bytes"] = frame_bytes
    r["prio"] = prio
    r["ecn"] = 0
    r["dst"] = dst
    r["in_port"] = -1
    r["sent_ps"] = 0
    r["aux"] = 0
    r["last_in_ps"] = 0
    r["nxt"] = -1
    r["train_len"] = 1
    r["take_tok"] = 0
    r["n_int"] = 0
    return k


@njit(inline="always")
def data_header_bytes(w, cc):
    """Header bytes of a data frame of a flow whose algorithm is cc (CC_*): the fabric's, and
    the INT its packets carry (HPCC's)."""
    return w.cfg[CFG_DATA_HDR] + CC_INT_BYTES[cc]


@njit(inline="always")
def ack_frame_bytes(w, cc):
    """Bytes of an ACK or NACK frame of a flow whose algorithm is cc (CC_*), its INT echo included."""
    return w.cfg[CFG_ACK_BYTES] + CC_INT_BYTES[cc]


@njit
def wire_bytes(w, k):
    """Bytes packet k occupies on the wire: its frame, and the preamble and gap of each packet
    it stands for (one, or a train's length, train_len)."""
    return w.pkt[k]["frame_bytes"] + w.pkt[k]["train_len"] * w.cfg[CFG_IFG]


@njit(inline="always")
def count_sent(w, p, prio, wire):
    """Port p put ``wire`` bytes of priority ``prio`` on the wire (negative: a cut train sends
    fewer): the port's total, which HPCC's INT reports, and its share of the priority (links.csv)."""
    w.port[p]["tx_bytes"] += wire
    w.pq[p, prio]["tx_bytes"] += wire


@njit
def invariant_broken(w, code, obj):
    """Record the first broken invariant; the loop stops after the current event."""
    if w.meta[M_INVARIANT] == 0:
        w.meta[M_INVARIANT] = code
        w.meta[M_INVARIANT_OBJ] = obj


@njit(entry=True)
def pkt_free(w, k):
    if w.pkt[k]["kind"] == PK_FREE:
        invariant_broken(w, INV_DOUBLE_FREE, k)
        return
    w.pkt[k]["kind"] = PK_FREE
    n = w.meta[M_FREE]
    w.pkt_free[n] = k
    w.meta[M_FREE] = n + 1
    f = w.pkt[k]["qp"]
    if f >= 0:
        qp_release(w, I64(f))


@njit
def pkt_lose(w, k):
    """A network fault (down link, lossy port, no route) destroyed packet k: count it and free it."""
    if w.pkt[k]["kind"] == PK_DATA:
        w.stats[C_DATA_DROPPED] += 1
        w.stats[C_LINK_LOST] += 1
        w.qp[w.pkt[k]["qp"]]["pkts_dropped"] += 1
    else:
        w.stats[C_CTRL_DROPPED] += 1
    pkt_free(w, k)


@njit
def fifo_push(w, p, prio, k):
    q = w.pq[p, prio]
    w.pkt[k]["nxt"] = -1
    tail = q["tail"]
    if tail < 0:
        q["head"] = k
    else:
        w.pkt[tail]["nxt"] = k
    q["tail"] = k
    size = w.pkt[k]["frame_bytes"]
    q["bytes"] += size
    n = w.pkt[k]["train_len"]
    if n > 1:
        q["ahead_bytes"] += size - size // n
    pt = w.port[p]
    total = pt["q_bytes"] + size
    pt["q_bytes"] = total
    if total > pt["max_q_bytes"]:
        pt["max_q_bytes"] = total


@njit
def fifo_shrink(w, p, prio, k, size):
    """Train k, queued at port p, is cut short by ``size`` bytes (trains.cut_train): the queue
    holds that much less, all of it from the part still arriving (ahead_bytes)."""
    q = w.pq[p, prio]
    q["bytes"] -= size
    q["ahead_bytes"] -= size
    w.port[p]["q_bytes"] -= size
    w.pkt[k]["frame_bytes"] -= size


@njit
def fifo_pop(w, p, prio):
    q = w.pq[p, prio]
    k = q["head"]
    nxt = w.pkt[k]["nxt"]
    q["head"] = nxt
    if nxt < 0:
        q["tail"] = -1
    w.pkt[k]["nxt"] = -1
    size = w.pkt[k]["frame_bytes"]
    q["bytes"] -= size
    n = w.pkt[k]["train_len"]
    if n > 1:
        q["ahead_bytes"] -= size - size // n
    w.port[p]["q_bytes"] -= size
    if q["bytes"] < 0:
        invariant_broken(w, INV_QUEUE_NEGATIVE, p)
    return k
