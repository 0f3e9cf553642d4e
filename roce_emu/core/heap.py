"""Min-heap of events in one record array, ordered by (t_ps, seq).

Four children per event (those of i at 4i + 1 ... 4i + 4), not two: half the levels for a pop
to walk, its siblings side by side in memory. The order is unique (no two events share a
sequence number), so the events come out as from a binary heap, in less engine time
(docs/performance.md, "Engine speed").

The sequence number is taken at push time, so ties break by scheduling order and a
run is deterministic however it is sliced.

World arrays: the event heap (World.ev) and its counters (World.meta), passed in.
"""

from .jit import njit
from .kinds import M_EV_COUNT, M_EV_SEQ


@njit
def _before(ev, i, t, seq):
    ti = ev[i]["t_ps"]
    return ti < t or (ti == t and ev[i]["seq"] < seq)


@njit
def heap_push(ev, meta, t_ps, kind, obj, arg):
    i = meta[M_EV_COUNT]
    seq = meta[M_EV_SEQ]
    meta[M_EV_COUNT] = i + 1
    meta[M_EV_SEQ] = seq + 1
    while i > 0:
        parent = (i - 1) >> 2
        if _before(ev, parent, t_ps, seq):
            break
        ev[i] = ev[parent]
        i = parent
    ev[i]["t_ps"] = t_ps
    ev[i]["seq"] = seq
    ev[i]["kind"] = kind
    ev[i]["obj"] = obj
    ev[i]["arg"] = arg


@njit(inline="always")
def _sift_down(ev, i, n, t, seq):
    """Move the hole at i down past the children that come before (t, seq); return where
    the event (t, seq) belongs."""
    while True:
        c = 4 * i + 1
        if c >= n:
            break
        best = c
        bt = ev[c]["t_ps"]
        bs = ev[c]["seq"]
        for j in range(c + 1, min(c + 4, n)):
            jt = ev[j]["t_ps"]
            if jt < bt or (jt == bt and ev[j]["seq"] < bs):
                best = j
                bt = jt
                bs = ev[j]["seq"]
        if bt < t or (bt == t and bs < seq):
            ev[i] = ev[best]
            i = best
        else:
            break
    return i


@njit(inline="always")
def heap_pop(ev, meta):
    """Remove the earliest event; return (t_ps, kind, obj, arg)."""
    t_ps = ev[0]["t_ps"]
    kind = ev[0]["kind"]
    obj = ev[0]["obj"]
    arg = ev[0]["arg"]
    n = meta[M_EV_COUNT] - 1
    meta[M_EV_COUNT] = n
    if n > 0:
        i = _sift_down(ev, 0, n, ev[n]["t_ps"], ev[n]["seq"])
        ev[i] = ev[n]
    return t_ps, kind, obj, arg


@njit
def heap_rebuild(ev, meta):
    """Drop the events whose kind is negative and restore the heap order of the rest
    (after fast-forward moved some events in time). Sequence numbers are kept, so ties
    still break by scheduling order."""
    n = 0
    for i in range(meta[M_EV_COUNT]):
        if ev[i]["kind"] >= 0:
            ev[n] = ev[i]
            n += 1
    meta[M_EV_COUNT] = n
    for start in range((n - 2) // 4, -1, -1):
        ev[n] = ev[start]  # the slot past the last event holds it while the hole moves down
        i = _sift_down(ev, start, n, ev[n]["t_ps"], ev[n]["seq"])
        ev[i] = ev[n]
