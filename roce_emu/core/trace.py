"""Sampled traces: every cfg[CFG_TRACE_PS] the sending flows' rates and windows, and every
switch port's egress queue, as rows of World.trace that the driver flushes between slices.
Flows come in queue-pair order; results.trace_tables sorts them by flow. The PFC log is
an event trace in the same rows: one per PFC frame, when it pauses or resumes a port.

World arrays: reads cfg, stats, port, qp; writes meta, ev, trace.
"""

from .heap import heap_push
from .jit import njit
from .kinds import (
    CFG_MTU,
    CFG_N_FLOWS,
    CFG_TRACE,
    CFG_TRACE_PS,
    C_FLOWS_DONE,
    EV_TRACE,
    FL_ACTIVE,
    I64,
    M_TRACE_ROWS,
    NO_ARG,
    TRACE_PFC_ON,
    TRACE_QUEUE_ON,
    TRACE_RATE_ON,
    TR_PFC,
    TR_QUEUE,
    TR_RATE,
)


@njit(entry=True)
def rows_per_sample(w):
    """Most rows one sample can take (the loop stops for a flush when fewer are free)."""
    mode = w.cfg[CFG_TRACE]
    n = 0
    if mode & TRACE_RATE_ON:
        n += w.qp.shape[0]
    if mode & TRACE_QUEUE_ON:
        n += w.port.shape[0]
    return n


@njit
def rows_per_event(w):
    """Rows any one event may log (the loop flushes before an event when fewer are free): one
    PFC frame arrives per event."""
    return 1 if w.cfg[CFG_TRACE] & TRACE_PFC_ON else 0


@njit
def log_pfc(w, t, p, prio, pause):
    """A PFC frame reached port p at t: it pauses (or resumes) priority prio."""
    if w.cfg[CFG_TRACE] & TRACE_PFC_ON:
        _row(w, t, TR_PFC, I64(p), I64(prio), I64(1 if pause else 0), NO_ARG)


@njit
def _row(w, t, kind, obj, a, b, c):
    i = w.meta[M_TRACE_ROWS]
    row = w.trace[i]
    row[0] = t
    row[1] = kind
    row[2] = obj
    row[3] = a
    row[4] = b
    row[5] = c
    w.meta[M_TRACE_ROWS] = i + 1


@njit
def sample(w, t):
    """Record one sample at t; schedule the next while flows remain unfinished."""
    mode = w.cfg[CFG_TRACE]
    if mode & TRACE_RATE_ON:
        for f in range(w.qp.shape[0]):
            r = w.qp[f]
            if r["flow"] >= 0 and r["state"] == FL_ACTIVE:
                acked = min(r["snd_una"] * w.cfg[CFG_MTU], r["size_bytes"])
                _row(w, t, TR_RATE, I64(r["flow"]), r["rate_bps"], r["window_bytes"], acked)
    if mode & TRACE_QUEUE_ON:
        for p in range(w.port.shape[0]):
            if w.port[p]["at_host"] == 0:
                _row(w, t, TR_QUEUE, I64(p), w.port[p]["q_bytes"], NO_ARG, NO_ARG)
    if w.stats[C_FLOWS_DONE] < w.cfg[CFG_N_FLOWS]:
        heap_push(w.ev, w.meta, t + w.cfg[CFG_TRACE_PS], EV_TRACE, NO_ARG, NO_ARG)
