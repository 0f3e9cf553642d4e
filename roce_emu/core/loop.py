"""The event loop: ``advance`` processes events until a limit and returns a status code.

The Python driver calls it in slices; every stopping test happens before an event
is taken, so slicing never changes the result.

World arrays: reads cfg, pkt, node, flow, qp, trace, task, gate_state; writes stats, meta, ev, port.
"""

from .cc import dispatch as cc
from .heap import heap_pop, heap_push
from .jit import njit
from .kinds import (
    ARRIVE_PORT_MASK,
    ARRIVE_TOKEN,
    CFG_HEAP_ROOM,
    CFG_N_FLOWS,
    CFG_STALL_PS,
    CFG_STOP_AT_START,
    CFG_TRACE,
    C_EVENTS,
    C_FLOWS_DONE,
    C_LAST_PROGRESS_PS,
    C_NOW_PS,
    EV_ARRIVE,
    EV_CC_TIMER,
    EV_FLOW_START,
    EV_LINK,
    EV_NIC_WAKE,
    EV_RTO,
    EV_TASK_DONE,
    EV_TRACE,
    EV_TX_DONE,
    I64,
    M_COMPUTING,
    M_EV_COUNT,
    M_INVARIANT,
    M_INVARIANT_KIND,
    M_FREE,
    M_PLAN_LEFT,
    M_QP_FREE,
    M_TRACE_ROWS,
    NO_ARG,
    PK_DATA,
    POOL_MARGIN,
    ST_BUDGET,
    ST_FLOW_START,
    ST_HEAP_LOW,
    ST_IDLE,
    ST_INVARIANT,
    ST_POOL_LOW,
    ST_QP_LOW,
    ST_STALLED,
    ST_TRACE_FULL,
    ST_T_LIMIT,
    TIMER_SPAN,
    TRACE_QUEUE_ON,
    TRACE_RATE_ON,
)
from .links import apply_link_action, schedule_link_plan
from .nic import flow_start, on_host_arrive, on_rto
from . import trains
from . import pfc
from .packets import pkt_free, pkt_lose
from .pfc import is_pfc
from .port import drain_kicks, kick, on_switch_arrive, on_tx_done
from .stream import on_delivered, open_gates
from .tasks import schedule_roots, task_done
from .trace import rows_per_event, rows_per_sample, sample


@njit(inline="always")
def _on_arrive(w, k, arg, t):
    pk = w.pkt[k]
    if arg >> ARRIVE_TOKEN != pk["take_tok"]:
        return  # a train's arrival at its host, pushed again since (trains.push_take)
    p_in = arg & ARRIVE_PORT_MASK
    if w.port[p_in]["down"] != 0:  # the link failed while the packet was on it
        pkt_lose(w, k)
        return
    kind = pk["kind"]
    if is_pfc(kind):
        if pfc.on_frame(w, k, p_in, t):
            kick(w, p_in)
        return
    node = w.port[p_in]["node"]
    if w.node[node]["is_host"] != 0:
        if trains.taken_later(w, k, I64(node), p_in, t):
            return
        p = on_host_arrive(w, k, node, t)
        if kind == PK_DATA and w.gate_state.shape[0] > 0:
            on_delivered(w, I64(pk["qp"]), t)
        pkt_free(w, k)
        if p >= 0:
            kick(w, p)
    else:
        on_switch_arrive(w, k, p_in, t)


@njit(entry=True)
def advance(w, t_limit_ps, max_events):
    """Process events with t_ps <= t_limit_ps, at most max_events of them."""
    ev = w.ev
    meta = w.meta
    stats = w.stats
    n_flows = w.cfg[CFG_N_FLOWS]
    stall_ps = w.cfg[CFG_STALL_PS]
    trace_rows = rows_per_sample(w)
    event_rows = rows_per_event(w)
    heap_room = w.cfg[CFG_HEAP_ROOM]
    stop_at_start = w.cfg[CFG_STOP_AT_START]
    done = 0
    while True:
        if meta[M_EV_COUNT] == 0:
            return ST_IDLE
        if ev[0]["t_ps"] > t_limit_ps:
            return ST_T_LIMIT
        if done >= max_events:
            return ST_BUDGET
        if meta[M_FREE] < POOL_MARGIN:
            return ST_POOL_LOW
        if ev.shape[0] - meta[M_EV_COUNT] < heap_room:
            return ST_HEAP_LOW
        if ev[0]["kind"] == EV_FLOW_START:
            if stop_at_start != 0:
                return ST_FLOW_START
            if meta[M_QP_FREE] == 0:
                return ST_QP_LOW
        free_rows = w.trace.shape[0] - meta[M_TRACE_ROWS]
        if free_rows < event_rows or (ev[0]["kind"] == EV_TRACE and free_rows < trace_rows):
            return ST_TRACE_FULL
        t, kind, obj, arg = heap_pop(ev, meta)
        stats[C_NOW_PS] = t
        stats[C_EVENTS] += 1
        done += 1
        if kind == EV_ARRIVE:
            _on_arrive(w, obj, arg, t)
        elif kind == EV_TX_DONE:
            on_tx_done(w, obj, t)
        elif kind == EV_NIC_WAKE:
            if w.port[obj]["wake_ps"] == t:
                w.port[obj]["wake_ps"] = 0
                kick(w, obj)
        elif kind == EV_RTO:  # the slot's timer, for whichever flow holds it now (nic.arm_rto)
            p = on_rto(w, obj, t)
            if p >= 0:
                kick(w, p)
        elif kind == EV_CC_TIMER:
            flow = arg // TIMER_SPAN
            if w.qp[obj]["flow"] == flow:
                cc.on_timer(w, obj, arg % TIMER_SPAN, t)
            kick(w, w.flow[flow]["nic_port"])
        elif kind == EV_FLOW_START:
            kick(w, flow_start(w, obj, t))
        elif kind == EV_TASK_DONE:
            task_done(w, obj, t)
        elif kind == EV_TRACE:
            sample(w, t)
        elif kind == EV_LINK:
            apply_link_action(w, obj, t)
        drain_kicks(w, t)
        if meta[M_INVARIANT] != 0:
            meta[M_INVARIANT_KIND] = kind
            return ST_INVARIANT
        if (
            stats[C_FLOWS_DONE] < n_flows
            and meta[M_COMPUTING] == 0
            and meta[M_PLAN_LEFT] == 0
            and t - stats[C_LAST_PROGRESS_PS] > stall_ps
        ):
            return ST_STALLED


@njit(entry=True)
def schedule_start(w):
    """Schedule the link plan (first, so a fault wins ties), open the streaming reduction's gates
    (stream.open_gates), release the DAG's roots (flows and compute without predecessors), and
    put the first trace sample at the earliest of them if sampled traces are on (the PFC log
    needs no samples)."""
    schedule_link_plan(w)
    open_gates(w)
    schedule_roots(w)
    first = -1
    for k in range(w.task.shape[0]):
        s = w.task[k]["start_ps"]
        if s >= 0 and (first < 0 or s < first):
            first = s
    if w.cfg[CFG_TRACE] & (TRACE_RATE_ON | TRACE_QUEUE_ON) != 0 and first >= 0:
        heap_push(w.ev, w.meta, first, EV_TRACE, NO_ARG, NO_ARG)
