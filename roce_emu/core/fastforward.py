"""Exact fast-forward: find a period in which the network repeats itself, and jump whole periods.

The engine is deterministic, so a world whose state at time tB equals its state at an earlier
tA, up to a shift of every time by P = tB - tA and of every sequence number of flow f by d_f,
repeats the interval [tA, tB] for as long as nothing from outside the repetition acts on it.
The jump then moves every time by n P and every sequence number by n d_f, and adds n times
what each counter gained in one period: the result is the one the exact engine reaches,
to the picosecond (docs/fast_forward.md gives the argument and its limits).

How it runs, all inside the event loop:
- **Checkpoints.** One active flow is the anchor (the one with the most packets left).
  Each data packet it sends records, in O(1), a key: the time and the number of events
  since its previous one. When the last m keys repeat the m before them (m up to
  FF_KEYS / 2), m anchor packets are a candidate period, and the packet triggers a
  checkpoint after the event: a walk over the whole state in a canonical order
  (``_walk``) that writes a signature, one (type, value) per field, floating-point fields
  apart. The last ``FF_SLOTS`` signatures are kept, with the anchor packet they were taken at.
- **Field types** say how a field may differ between two equal states: PLAIN fields are
  equal; TIME fields are equal relative to the checkpoint's time, or equal in absolute
  terms and then either past (no test can change) or beyond the jump (a horizon); SEQ
  fields of flow f move by d_f (the advance of its cumulative ack) or are stale; TX
  fields (HPCC's INT byte counters) move with their port's bytes sent; COUNTER fields
  may differ, and the jump adds n times the difference.
- **Matching.** A checkpoint is compared with the one stored m anchor packets earlier
  (hash, then field by field); without one, it is stored, and the next is taken m packets
  later. A match gives P, d_f and the horizons.
- **How far.** n whole periods, so that no absolute time in the state, no scheduled event
  (flow start, task end, fault, trace sample) and no time limit is reached, and no flow
  comes to its last packet (whose size and completion break the pattern).
- **The jump** walks the state again in the same order (``_walk`` in APPLY mode) and
  rewrites each field from its type, then restores the heap order.
- Any change of the set of active flows, a task finishing (a receiver completing a flow,
  a compute task), a fault action, a trace sample or a jump clears the stored signatures:
  the task DAG is not in the signature, so no period may span such an event. The walks are
  budgeted: a checkpoint needs at least a quarter as many
  events simulated since the last one as that one had fields, so where no exact period
  exists they stay a bounded share of the run. (The larger cost there is ``advance_ff``
  calling the exact kernel once per event, so runs without jumps are slower than off.)

Reads and writes every world array except the task DAG (with its runtime queues), the route
tables and the trace.
"""

import numpy as np

from .cc import dispatch as cc
from .heap import heap_rebuild
from .jit import njit
from .kinds import (
    CFG_NACK_PS,
    CFG_N_HOSTS,
    C_EVENTS,
    C_FF_CHECKPOINTS,
    C_FF_EVENTS,
    C_FF_JUMPS,
    C_FF_PS,
    C_FLOWS_DONE,
    C_LAST_PROGRESS_PS,
    C_NOW_PS,
    C_SIZE,
    C_TASKS_DONE,
    EV_ARRIVE,
    EV_CC_TIMER,
    EV_FLOW_START,
    EV_LINK,
    EV_NIC_WAKE,
    EV_RTO,
    EV_TASK_DONE,
    EV_TRACE,
    EV_TX_DONE,
    FL_ACTIVE,
    I64,
    M_EV_COUNT,
    M_ROUTE_EPOCH,
    N_TIMERS,
    NPRIO,
    PK_ACK,
    PK_DATA,
    PK_NACK,
    PK_PAUSE,
    PK_RESUME,
    ST_BUDGET,
    ST_FF_GROW,
    ST_INVARIANT,
    ST_STALLED,
    TIMER_SPAN,
)
from .loop import advance
from .state import INT_PORT, INT_QLEN, INT_TS_PS, INT_TX_BYTES, TIMER_ARMED, TIMER_DUE

# ---- FastForward.meta ----------------------------------------------------------------------------
FM_ANCHOR = 0  #: the flow whose data packets may trigger checkpoints, -1 to choose one
FM_COUNT = 1  #: checkpoints stored since the last reset
FM_TICK = 2  #: anchor packets since the last reset
FM_WANT = 3  #: 1 when a signature did not fit its arrays: the driver grows them
FM_ACTIVE = 4  #: active flows in FastForward.qp[FF_ACT]
FM_LAST_T = 5  #: when the anchor last sent a packet
FM_LAST_EV = 6  #: events processed then
FM_SIZE = 7

FF_SLOTS = 8  #: stored checkpoints
FF_KEYS = 128  #: the anchor's recent packet keys kept (periods of up to FF_KEYS / 2 packets)

# ---- signature field types: kind in the low 3 bits, the flow or port above -------------------
T_PLAIN = I64(0)
T_COUNTER = I64(1)
T_TIME = I64(2)
T_SEQ_BASE = I64(3)  #: the flow's cumulative ack: defines d_f
T_SEQ = I64(4)
T_TX_BASE = I64(5)  #: the port's wire bytes sent: defines its advance per period
T_TX = I64(6)
T_SHIFT = I64(3)

# ---- per-checkpoint rows of World.ff_ck ------------------------------------------------------
CK_T = 0
CK_LEN = 1
CK_FLEN = 2
CK_HASH = 3
CK_EVENTS = 4
CK_TICK = 5  #: the anchor packet (since the reset) it was taken at
# ---- the walk state (row FF_SLOTS of World.ff_ck) ---------------------------------------------
X_MODE = 0  #: EMIT or APPLY
X_IDX = 1  #: next integer field
X_FIDX = 2  #: next floating-point field
X_A = 3  #: slot of the earlier state (APPLY)
X_B = 4  #: slot being written (EMIT) or of the later state (APPLY)
X_N = 5  #: periods to jump
X_TA = 6
X_TB = 7
X_HASH = 8
CK_SIZE = 9
# ---- the anchor's recent packets (rows Q_ROW + j of World.ff_ck) --------------------------------
Q_ROW = FF_SLOTS + 1
Q_DT = 0  #: time since the anchor's packet before
Q_EVENTS = 1  #: events processed since then
FF_CK_ROWS = Q_ROW + FF_KEYS
EMIT = 0
APPLY = 1

# ---- rows of FastForward.qp (one column per queue pair) and FastForward.tmp ---------------------
FF_ACT = 0  #: the active flows' queue pairs (first ff.meta[FM_ACTIVE] entries)
FF_POS = 1  #: each queue pair's index in FF_ACT, -1 if not active
FF_SHIFT = 2  #: d_f of the match being applied (0 otherwise)
FF_BASE_A = 3  #: the flow's cumulative ack at the earlier state
FF_QP_ROWS = 4
TMP_K1 = 0
TMP_K2 = 1
TMP_IDX = 2
TMP_LKEY = 3
TMP_LRANK = 4
TMP_LIDX = 5
FF_TMP_ROWS = 6

_HASH_MUL = np.int64(1099511628211)
_NO_HORIZON = np.int64(1 << 62)


# ---- the active-flow list and resets ------------------------------------------------------------
@njit
def ff_reset(ff):
    """Forget the stored checkpoints (the state changed in a way no period repeats)."""
    ff.meta[FM_COUNT] = 0
    ff.meta[FM_TICK] = 0
    ff.meta[FM_ANCHOR] = -1


@njit
def ff_flow_started(ff, f):
    n = ff.meta[FM_ACTIVE]
    ff.qp[FF_ACT, n] = f
    ff.qp[FF_POS, f] = n
    ff.meta[FM_ACTIVE] = n + 1
    ff_reset(ff)


@njit
def ff_flow_finished(ff, f):
    n = ff.meta[FM_ACTIVE] - 1
    i = ff.qp[FF_POS, f]
    last = ff.qp[FF_ACT, n]
    ff.qp[FF_ACT, i] = last
    ff.qp[FF_POS, last] = i
    ff.qp[FF_POS, f] = -1
    ff.meta[FM_ACTIVE] = n
    ff_reset(ff)


# ---- sorting without allocation (heapsort of three parallel rows by the first two) ------------
@njit(inline="always")
def _less(a, b, i, j):
    return a[i] < a[j] or (a[i] == a[j] and b[i] < b[j])


@njit(inline="always")
def _swap(a, b, c, i, j):
    a[i], a[j] = a[j], a[i]
    b[i], b[j] = b[j], b[i]
    c[i], c[j] = c[j], c[i]


@njit
def _sift(a, b, c, root, end):
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and _less(a, b, child, child + 1):
            child += 1
        if not _less(a, b, root, child):
            return
        _swap(a, b, c, root, child)
        root = child


@njit
def _sort3(a, b, c, n):
    for start in range(n // 2 - 1, -1, -1):
        _sift(a, b, c, start, n)
    for end in range(n - 1, 0, -1):
        _swap(a, b, c, 0, end)
        _sift(a, b, c, 0, end)


# ---- one field of the walk ------------------------------------------------------------------------
@njit
def _put_x(x, sig, shift, tx, typ, v):
    """_put on the arrays it needs (a narrow call: passing the world costs every array's
    fields as arguments)."""
    i = x[X_IDX]
    x[X_IDX] = i + 1
    if x[X_MODE] == EMIT:
        if i < sig.shape[2]:
            sig[x[X_B], 0, i] = typ
            sig[x[X_B], 1, i] = v
        x[X_HASH] = x[X_HASH] * _HASH_MUL + typ * 31 + (v if typ == T_PLAIN else 0)
        return v
    kind = typ & 7
    if kind == T_PLAIN:
        return v
    va = sig[x[X_A], 1, i]
    n = x[X_N]
    if kind == T_COUNTER:
        return v + n * (v - va)
    if kind == T_TIME:
        if v - x[X_TB] == va - x[X_TA]:
            return v + n * (x[X_TB] - x[X_TA])
        return v
    d = shift[typ >> T_SHIFT] if kind == T_SEQ_BASE or kind == T_SEQ else tx[typ >> T_SHIFT]
    if v - va == d:
        return v + n * d
    return v


@njit(inline="always")
def _put(ff, typ, v):
    """EMIT: append (typ, v) to the signature and return v. APPLY: return the field's value
    after the jump, from its value v now (the later state) and in the earlier state."""
    return _put_x(ff.ck[FF_SLOTS], ff.sig, ff.qp[FF_SHIFT], ff.port, typ, v)


@njit
def _putf(ff, v):
    x = ff.ck[FF_SLOTS]
    j = x[X_FIDX]
    x[X_FIDX] = j + 1
    if x[X_MODE] == EMIT and j < ff.fsig.shape[1]:
        ff.fsig[x[X_B], j] = v


@njit(inline="always")
def _i(v):
    return np.int64(v)


# ---- the canonical walk over the state ------------------------------------------------------------
@njit
def _walk_int(x, sig, shift, tx, rec):
    """One INT record (a hop's time, bytes sent, queue and port)."""
    p = rec[INT_PORT]
    rec[INT_TS_PS] = _put_x(x, sig, shift, tx, T_TIME, rec[INT_TS_PS])
    rec[INT_TX_BYTES] = _put_x(x, sig, shift, tx, T_TX | (p << T_SHIFT), rec[INT_TX_BYTES])
    _put_x(x, sig, shift, tx, T_PLAIN, rec[INT_QLEN] | (p << 40))


@njit
def _walk_pkt_x(pkt, int_rec, x, sig, shift, tx, k):
    pk = pkt[k]
    kind = _i(pk["kind"])
    f = _i(pk["qp"])
    n_int = _i(pk["n_int"])
    # the plain fields packed three to a value (each fits 16 or 32 bits)
    _put_x(
        x,
        sig,
        shift,
        tx,
        T_PLAIN,
        (kind + 8) | (_i(pk["prio"]) << 8) | (_i(pk["ecn"]) << 16) | (n_int << 24) | ((_i(pk["in_port"]) + 1) << 32),
    )
    _put_x(x, sig, shift, tx, T_PLAIN, (f + 1) | ((_i(pk["dst"]) + 1) << 32))
    _put_x(x, sig, shift, tx, T_PLAIN, _i(pk["frame_bytes"]))
    if kind == PK_DATA or kind == PK_ACK or kind == PK_NACK:
        pk["seq"] = _put_x(x, sig, shift, tx, T_SEQ | (f << T_SHIFT), pk["seq"])
    else:
        _put_x(x, sig, shift, tx, T_PLAIN, pk["seq"])
    if kind == PK_PAUSE or kind == PK_RESUME:
        _put_x(x, sig, shift, tx, T_PLAIN, pk["sent_ps"])
    else:
        pk["sent_ps"] = _put_x(x, sig, shift, tx, T_TIME, pk["sent_ps"])
    for i in range(n_int):
        _walk_int(x, sig, shift, tx, int_rec[k, i])


@njit(inline="always")
def _walk_pkt(w, ff, k):
    _walk_pkt_x(w.pkt, w.int_rec, ff.ck[FF_SLOTS], ff.sig, ff.qp[FF_SHIFT], ff.port, k)


@njit
def _walk_flow(w, ff, f):
    r = w.qp[f]
    c = w.ccs[f]
    _put(ff, T_PLAIN, f)
    r["snd_una"] = _put(ff, T_SEQ_BASE | (f << T_SHIFT), r["snd_una"])
    seq = T_SEQ | (f << T_SHIFT)
    r["snd_nxt"] = _put(ff, seq, r["snd_nxt"])
    r["max_sent"] = _put(ff, seq, r["max_sent"])
    r["rcv_nxt"] = _put(ff, seq, r["rcv_nxt"])
    has_nack = _i(r["nack_seq"] >= 0)
    _put(ff, T_PLAIN, has_nack)
    if has_nack:
        r["nack_seq"] = _put(ff, seq, r["nack_seq"])
        gap = w.cfg[CFG_NACK_PS]  # the time from which a repeated NACK may go
        r["nack_ps"] = _put(ff, T_TIME, r["nack_ps"] + gap) - gap
    r["rto_ps"] = _put(ff, T_TIME, r["rto_ps"])
    r["next_tx_ps"] = _put(ff, T_TIME, r["next_tx_ps"])
    _put(ff, T_PLAIN, r["rate_bps"])
    _put(ff, T_PLAIN, r["window_bytes"])
    _put(ff, T_PLAIN, _i(r["in_ring"]))
    _put(ff, T_PLAIN, _i(r["conn_next"]))
    r["pkts_sent"] = _put(ff, T_COUNTER, r["pkts_sent"])
    r["pkts_delivered"] = _put(ff, T_COUNTER, r["pkts_delivered"])
    r["pkts_dropped"] = _put(ff, T_COUNTER, r["pkts_dropped"])
    r["retransmits"] = _put(ff, T_COUNTER, r["retransmits"])
    r["timeouts"] = _put(ff, T_COUNTER, r["timeouts"])
    _putf(ff, c["rate"])
    _putf(ff, c["target"])
    _putf(ff, c["ref_rate"])
    _putf(ff, c["alpha"])
    _putf(ff, c["util"])
    _putf(ff, c["rtt_diff"])
    _put(ff, T_PLAIN, c["last_rtt_ps"])
    _put(ff, T_PLAIN, c["stage"])
    _put(ff, T_PLAIN, c["bytes_ctr"])
    _put(ff, T_PLAIN, c["t_cnt"])
    _put(ff, T_PLAIN, c["bc_cnt"])
    _put(ff, T_PLAIN, c["ecn_cnt"])
    _put(ff, T_PLAIN, c["batch"])
    _put(ff, T_PLAIN, c["last_wire"])
    _put(ff, T_PLAIN, _i(c["n_hops"]))
    _put(ff, T_PLAIN, _i(c["alpha_cnp"]))
    _put(ff, T_PLAIN, _i(c["dec_cnp"]))
    _put(ff, T_PLAIN, _i(c["cnp_seen"]))
    _put(ff, T_PLAIN, _i(c["in_cwr"]))
    c["update_seq"] = _put(ff, seq, c["update_seq"])
    c["cwr_seq"] = _put(ff, seq, c["cwr_seq"])
    last = c["last_cnp_ps"]
    _put(ff, T_PLAIN, _i(last >= 0))
    if last >= 0:  # DCQCN paper receiver: the time from which it may send the next CNP
        gap = cc.cnp_gap_ps(w, f)
        c["last_cnp_ps"] = _put(ff, T_TIME, last + gap) - gap
    for tm in range(N_TIMERS):
        armed = w.timer[f, tm, TIMER_ARMED]
        _put(ff, T_PLAIN, armed)
        if armed != 0:
            w.timer[f, tm, TIMER_DUE] = _put(ff, T_TIME, w.timer[f, tm, TIMER_DUE])
    for i in range(_i(c["n_hops"])):
        _walk_int(ff.ck[FF_SLOTS], ff.sig, ff.qp[FF_SHIFT], ff.port, w.int_prev[f, i])


@njit(inline="always")
def _pq_idle(q):
    return (
        q["bytes"] == 0
        and q["in_bytes"] == 0
        and q["hdrm_bytes"] == 0
        and q["head"] < 0
        and q["paused"] == 0
        and q["xoff_sent"] == 0
    )


@njit
def _walk_port(w, ff, p, now):
    """A port that holds, sends, paces or pauses anything (idle ports write nothing)."""
    pt = w.port[p]
    mask = 0
    for prio in range(NPRIO):
        if not _pq_idle(w.pq[p, prio]):
            mask |= 1 << prio
    waking = _i(pt["wake_ps"] > now)
    if pt["busy"] == 0 and pt["act_count"] == 0 and waking == 0 and mask == 0:
        return
    _put(ff, T_PLAIN, p)
    _put(ff, T_PLAIN, _i(pt["busy"]))
    if pt["busy"] != 0:
        k = _i(pt["tx_pkt"])
        _put(ff, T_PLAIN, _i(k >= 0))
        if k >= 0:  # else a packet a multi_dim NIC link's router already passes on (port._try_send)
            _walk_pkt(w, ff, k)
    n_act = _i(pt["act_count"])
    _put(ff, T_PLAIN, n_act)
    f = pt["act_head"]
    for _ in range(n_act):
        _put(ff, T_PLAIN, _i(f))
        f = w.qp[f]["act_next"]
    _put(ff, T_PLAIN, waking)
    if waking != 0:
        pt["wake_ps"] = _put(ff, T_TIME, pt["wake_ps"])
    _put(ff, T_PLAIN, _i(mask))
    for prio in range(NPRIO):
        if mask & (1 << prio) == 0:
            continue
        q = w.pq[p, prio]
        _put(ff, T_PLAIN, q["bytes"])
        _put(ff, T_PLAIN, q["in_bytes"])
        _put(ff, T_PLAIN, q["hdrm_bytes"])
        _put(ff, T_PLAIN, _i(q["paused"]))
        _put(ff, T_PLAIN, _i(q["xoff_sent"]))
        count = 0
        k = q["head"]
        while k >= 0:
            count += 1
            k = w.pkt[k]["nxt"]
        _put(ff, T_PLAIN, _i(count))
        k = q["head"]
        while k >= 0:
            _walk_pkt(w, ff, _i(k))
            k = w.pkt[k]["nxt"]


@njit
def _walk_events(w, ff):
    """Pending events: packets on the wire, ports finishing, NIC wake-ups, in (time, sequence)
    order; then the lazily re-armed timers (RTO, CC) of active flows, by flow, with their rank
    among the others. Dead events (stale wake-ups, timers of finished flows) are left out; a
    jump drops those it passes (no-ops the exact run processed) and keeps the later ones."""
    ev = w.ev
    tmp = ff.tmp
    x = ff.ck[FF_SLOTS]
    apply = x[X_MODE] == APPLY
    jump_to = x[X_TB] + x[X_N] * (x[X_TB] - x[X_TA])
    m = 0
    for i in range(w.meta[M_EV_COUNT]):
        kind = ev[i]["kind"]
        obj = ev[i]["obj"]
        keep = False
        if kind == EV_ARRIVE or kind == EV_TX_DONE:
            keep = True
        elif kind == EV_NIC_WAKE:
            keep = w.port[obj]["wake_ps"] == ev[i]["t_ps"]
        elif kind == EV_RTO:  # the slot's timer (nic.arm_rto), live while a flow in it sends
            keep = w.qp[obj]["state"] == FL_ACTIVE
        elif kind == EV_CC_TIMER:  # of its queue pair's flow, which still sends
            keep = w.qp[obj]["flow"] == ev[i]["arg"] // TIMER_SPAN and w.qp[obj]["state"] == FL_ACTIVE
        else:  # scheduled: flow starts, task ends, faults, trace samples stay where they are
            continue
        if keep:
            tmp[TMP_K1, m] = ev[i]["t_ps"]
            tmp[TMP_K2, m] = ev[i]["seq"]
            tmp[TMP_IDX, m] = i
            m += 1
        elif apply and ev[i]["t_ps"] <= jump_to:  # the exact run processed it, as a no-op
            if kind == EV_RTO:
                w.qp[obj]["rto_armed"] = 0
            ev[i]["kind"] = -1
    _sort3(tmp[TMP_K1], tmp[TMP_K2], tmp[TMP_IDX], m)
    live = 0
    lazy = 0
    for j in range(m):
        e = tmp[TMP_IDX, j]
        kind = _i(ev[e]["kind"])
        obj = _i(ev[e]["obj"])
        if kind == EV_RTO or kind == EV_CC_TIMER:
            tmp[TMP_LKEY, lazy] = obj * 8 + (1 + ev[e]["arg"] % TIMER_SPAN if kind == EV_CC_TIMER else 0)
            tmp[TMP_LRANK, lazy] = live
            tmp[TMP_LIDX, lazy] = e
            lazy += 1
            continue
        live += 1
        ev[e]["t_ps"] = _put(ff, T_TIME, ev[e]["t_ps"])
        if kind == EV_ARRIVE:
            _put(ff, T_PLAIN, kind | (ev[e]["arg"] << 8))
            _walk_pkt(w, ff, obj)
        else:
            _put(ff, T_PLAIN, kind | (obj << 8))
    _sort3(tmp[TMP_LKEY], tmp[TMP_LRANK], tmp[TMP_LIDX], lazy)
    _put(ff, T_PLAIN, _i(lazy))
    for j in range(lazy):
        e = tmp[TMP_LIDX, j]
        _put(ff, T_PLAIN, tmp[TMP_LKEY, j])
        _put(ff, T_PLAIN, tmp[TMP_LRANK, j])
        ev[e]["t_ps"] = _put(ff, T_TIME, ev[e]["t_ps"])


@njit
def _walk(w, ff, now):
    """Every field that can shape the future, in one canonical order (EMIT and APPLY alike)."""
    _put(ff, T_PLAIN, np.int64(w.rng[0]))
    _put(ff, T_PLAIN, w.meta[M_ROUTE_EPOCH])
    stats = w.stats
    for i in range(C_SIZE):
        if i == C_NOW_PS or i == C_EVENTS or i >= C_FF_JUMPS:  # the fast-forward's own counters last
            continue
        stats[i] = _put(ff, T_TIME if i == C_LAST_PROGRESS_PS else T_COUNTER, stats[i])
    for p in range(w.port.shape[0]):
        pt = w.port[p]
        pt["tx_bytes"] = _put(ff, T_TX_BASE | (p << T_SHIFT), pt["tx_bytes"])
        for prio in range(w.pq.shape[1]):
            w.pq[p, prio]["tx_bytes"] = _put(ff, T_COUNTER, w.pq[p, prio]["tx_bytes"])
        pt["tx_data_pkts"] = _put(ff, T_COUNTER, pt["tx_data_pkts"])
        pt["pauses_sent"] = _put(ff, T_COUNTER, pt["pauses_sent"])
        pt["ecn_marks"] = _put(ff, T_COUNTER, pt["ecn_marks"])
        pt["drops"] = _put(ff, T_COUNTER, pt["drops"])
        _put(ff, T_PLAIN, _i(pt["rr_prio"]))
    for n in range(w.cfg[CFG_N_HOSTS], w.node.shape[0]):
        _put(ff, T_PLAIN, w.node[n]["used_bytes"])
        _put(ff, T_PLAIN, w.node[n]["shared_used"])
    tmp = ff.tmp
    n_act = ff.meta[FM_ACTIVE]
    for i in range(n_act):
        f = ff.qp[FF_ACT, i]
        tmp[TMP_K1, i] = f
        tmp[TMP_K2, i] = 0
        tmp[TMP_IDX, i] = f
    _sort3(tmp[TMP_K1], tmp[TMP_K2], tmp[TMP_IDX], n_act)
    _put(ff, T_PLAIN, n_act)
    for i in range(n_act):
        _walk_flow(w, ff, tmp[TMP_IDX, i])
    _walk_events(w, ff)  # before the ports: it tells stale wake-ups by the ports' wake times
    for p in range(w.port.shape[0]):
        _walk_port(w, ff, p, now)


# ---- checkpoints, matching and the jump ---------------------------------------------------------
@njit
def _start_walk(ff, mode, a, b, n, t_a, t_b):
    x = ff.ck[FF_SLOTS]
    x[X_MODE] = mode
    x[X_IDX] = 0
    x[X_FIDX] = 0
    x[X_A] = a
    x[X_B] = b
    x[X_N] = n
    x[X_TA] = t_a
    x[X_TB] = t_b
    x[X_HASH] = 0


@njit
def _clear_shifts(ff):
    for i in range(ff.meta[FM_ACTIVE]):
        ff.qp[FF_SHIFT, ff.qp[FF_ACT, i]] = 0


@njit
def _match(ff, a, b, t_limit):
    """Compare stored state a with the newer state b. Returns the earliest absolute time the
    jump must stay before (its horizon), or -1 if the states differ; on a match, leaves d_f in
    ff.qp[FF_SHIFT] and each port's bytes per period in ff_port."""
    ck = ff.ck
    t_a = ck[a, CK_T]
    t_b = ck[b, CK_T]
    n = ck[b, CK_LEN]
    if t_b <= t_a or ck[a, CK_LEN] != n or ck[a, CK_FLEN] != ck[b, CK_FLEN] or ck[a, CK_HASH] != ck[b, CK_HASH]:
        return -1
    for j in range(ck[b, CK_FLEN]):
        if ff.fsig[a, j] != ff.fsig[b, j]:
            return -1
    sig = ff.sig
    horizon = t_limit + 1
    ok = True
    for i in range(n):
        typ = sig[b, 0, i]
        if sig[a, 0, i] != typ:
            ok = False
            break
        va = sig[a, 1, i]
        vb = sig[b, 1, i]
        kind = typ & 7
        e = typ >> T_SHIFT
        if kind == T_PLAIN:
            ok = va == vb
        elif kind == T_TIME:
            if vb - t_b != va - t_a:
                ok = va == vb and (vb <= t_a or vb > t_b)
                if ok and vb > t_b:
                    horizon = min(horizon, vb)
        elif kind == T_SEQ_BASE:
            ok = vb >= va
            ff.qp[FF_SHIFT, e] = vb - va
            ff.qp[FF_BASE_A, e] = va
        elif kind == T_SEQ:
            ok = vb - va == ff.qp[FF_SHIFT, e] or (va == vb and vb <= ff.qp[FF_BASE_A, e])
        elif kind == T_TX_BASE:
            ff.port[e] = vb - va
        elif kind == T_TX:
            ok = vb - va == ff.port[e] or va == vb
        if not ok:
            break
    if not ok:
        _clear_shifts(ff)
        return -1
    return horizon


@njit
def _periods(w, ff, t_b, period, horizon):
    """How many whole periods the jump may take: stay before the horizon and every scheduled
    event, and keep every flow short of its last packet."""
    n = (horizon - 1 - t_b) // period
    ev = w.ev
    for i in range(w.meta[M_EV_COUNT]):
        kind = ev[i]["kind"]
        if kind == EV_FLOW_START or kind == EV_TASK_DONE or kind == EV_LINK or kind == EV_TRACE:
            n = min(n, (ev[i]["t_ps"] - 1 - t_b) // period)
    for i in range(ff.meta[FM_ACTIVE]):
        f = ff.qp[FF_ACT, i]
        d = ff.qp[FF_SHIFT, f]
        if d > 0:
            r = w.qp[f]
            n = min(n, (r["n_pkts"] - 1 - max(r["snd_nxt"], r["max_sent"])) // d)
    return n


@njit
def _jump(w, ff, a, b, n):
    ck = ff.ck
    t_a = ck[a, CK_T]
    t_b = ck[b, CK_T]
    period = t_b - t_a
    _start_walk(ff, APPLY, a, b, n, t_a, t_b)
    _walk(w, ff, t_b)
    heap_rebuild(w.ev, w.meta)
    stats = w.stats
    stats[C_NOW_PS] = t_b + n * period
    stats[C_FF_JUMPS] += 1
    stats[C_FF_EVENTS] += n * (ck[b, CK_EVENTS] - ck[a, CK_EVENTS])
    stats[C_FF_PS] += n * period
    _clear_shifts(ff)
    ff_reset(ff)


@njit
def _choose_anchor(w, ff):
    """The active flow with the most packets left to send (the lowest id among equals)."""
    best = -1
    most = -1
    for i in range(ff.meta[FM_ACTIVE]):
        f = ff.qp[FF_ACT, i]
        left = w.qp[f]["n_pkts"] - w.qp[f]["snd_nxt"]
        if left > most or (left == most and f < best):
            best = f
            most = left
    ff.meta[FM_ANCHOR] = best


@njit
def _candidate_period(w, ff, t):
    """Record the anchor's packet key; return the smallest m such that the last m keys repeat
    the m before them (a candidate period in anchor packets), or 0."""
    tick = ff.meta[FM_TICK]
    ff.meta[FM_TICK] = tick + 1
    dt = t - ff.meta[FM_LAST_T]
    dev = w.stats[C_EVENTS] - ff.meta[FM_LAST_EV]
    ff.meta[FM_LAST_T] = t
    ff.meta[FM_LAST_EV] = w.stats[C_EVENTS]
    if tick == 0:  # the first packet since a reset: no interval yet
        return 0
    ck = ff.ck
    row = Q_ROW + tick % FF_KEYS
    ck[row, Q_DT] = dt
    ck[row, Q_EVENTS] = dev
    for m in range(1, min(tick, FF_KEYS) // 2 + 1):
        same = True
        for j in range(m):
            a = Q_ROW + (tick - j) % FF_KEYS
            b = Q_ROW + (tick - j - m) % FF_KEYS
            if ck[a, Q_DT] != ck[b, Q_DT] or ck[a, Q_EVENTS] != ck[b, Q_EVENTS]:
                same = False
                break
        if same:
            return m
    return 0


@njit
def _checkpoint(w, ff, t, t_limit):
    m = _candidate_period(w, ff, t)
    if m == 0:
        return
    tick = ff.meta[FM_TICK]
    ck = ff.ck
    count = ff.meta[FM_COUNT]
    if count > 0:  # the budget: simulate a quarter as many events as the last walk had fields
        last = (count - 1) % FF_SLOTS
        if w.stats[C_EVENTS] - ck[last, CK_EVENTS] < ck[last, CK_LEN] >> 2:
            return
    earlier = -1  # the newest stored checkpoint a whole number of candidate periods back
    for back in range(1, min(count, FF_SLOTS) + 1):
        a = (count - back) % FF_SLOTS
        if (tick - ck[a, CK_TICK]) % m == 0:
            earlier = a
            break
    w.stats[C_FF_CHECKPOINTS] += 1
    b = count % FF_SLOTS
    _start_walk(ff, EMIT, -1, b, 0, 0, t)
    _walk(w, ff, t)
    x = ff.ck[FF_SLOTS]
    if x[X_IDX] > ff.sig.shape[2] or x[X_FIDX] > ff.fsig.shape[1]:
        ff.meta[FM_WANT] = 1  # the driver grows the signature arrays; this checkpoint is lost
        return
    ck[b, CK_T] = t
    ck[b, CK_LEN] = x[X_IDX]
    ck[b, CK_FLEN] = x[X_FIDX]
    ck[b, CK_HASH] = x[X_HASH]
    ck[b, CK_EVENTS] = w.stats[C_EVENTS]
    ck[b, CK_TICK] = tick
    ff.meta[FM_COUNT] = count + 1
    if earlier < 0:
        return
    horizon = _match(ff, earlier, b, t_limit)
    if horizon < 0:
        return
    n = _periods(w, ff, t, t - ck[earlier, CK_T], horizon)
    if n >= 1:
        _jump(w, ff, earlier, b, n)
    else:  # the state repeats, but something is due within one period
        _clear_shifts(ff)


@njit(entry=True)
def advance_ff(w, ff, t_limit_ps, max_events):
    """The exact engine's ``advance``, one event at a time, with fast-forward after each.

    It learns what the event did from outside: the next event's kind and object before it
    (a flow start, a fault), the finished-flow count and the anchor's packets sent after it.
    So the exact kernels carry nothing of the fast-forward, and run as fast as without it."""
    done = 0
    while True:
        if done >= max_events:
            return ST_BUDGET
        if ff.meta[FM_WANT] != 0:
            return ST_FF_GROW
        kind = -1
        obj = -1
        if w.meta[M_EV_COUNT] > 0:
            kind = w.ev[0]["kind"]
            obj = w.ev[0]["obj"]
        anchor = ff.meta[FM_ANCHOR]
        sent = w.qp[anchor]["pkts_sent"] if anchor >= 0 else 0
        finished = w.stats[C_FLOWS_DONE]
        tasks_done = w.stats[C_TASKS_DONE]
        events = w.stats[C_EVENTS]
        status = advance(w, t_limit_ps, 1)
        if w.stats[C_EVENTS] == events:  # stopped before the event (a limit, or room to grow)
            return status
        done += 1
        if kind == EV_FLOW_START:
            ff_flow_started(ff, I64(w.flow[obj]["qp"]))
        elif kind == EV_TASK_DONE or kind == EV_LINK or kind == EV_TRACE or w.stats[C_TASKS_DONE] != tasks_done:
            ff_reset(ff)  # the task DAG, a fault or the trace moved: no period spans this event
        if w.stats[C_FLOWS_DONE] != finished:  # the last ACK of one flow (packet obj) arrived
            ff_flow_finished(ff, w.pkt[obj]["qp"])
        if status == ST_STALLED or status == ST_INVARIANT:
            return status
        if ff.meta[FM_ANCHOR] < 0:
            if ff.meta[FM_ACTIVE] > 0:
                _choose_anchor(w, ff)
        elif w.qp[anchor]["pkts_sent"] != sent:
            _checkpoint(w, ff, w.stats[C_NOW_PS], t_limit_ps)
        if status != ST_BUDGET:
            return status
