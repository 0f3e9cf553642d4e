"""Memo fast-forward (``sim.fast_forward: memo``): reuse the exact engine's own outcome of a component.

Flows that start at the same instant and share egress ports (their data's or their ACKs')
form a *component*. If none of its ports is used by a flow the exact engine is running, or
reserved by another component, the component is *virtual*:

- **Key.** Its shape up to the order its flows started in: each flow's bytes, priority and
  congestion control (its row of World.ccp), the ports its data and its ACKs cross (renamed in
  the order they appear), and each port's rate, delay, cut-through, ECN thresholds and PFC
  settings. The run's MTU and ACK ratio are the same for every component of a run.
- **Contended.** A component whose flows' data meet at a switch port faster than it sends is left to
  the engine (a queue builds there: it would be volatile, below).
- **Miss.** The exact engine runs the component alone from its start to its last packet, on a
  heap of its own (``_private``), and the world is put back as it was: the outcome (each flow's
  receive and finish offsets and counters, each port's bytes and the start of its last
  transmission, the run's counters) is stored under the key. A component whose run drew a random
  number, marked a packet, paused a port, lost or retransmitted is *volatile*: it is not stored
  and runs in the engine like any other.
- **Hit.** The stored outcome is replayed: the flows' tasks are done at their receive offsets
  (releasing the DAG as the engine would), and their records, the ports' counters and the run's
  counters are written when the last of them ends. Nothing is simulated.
- **Reservations.** A virtual component reserves each of its ports until its last transmission
  there starts. A flow that starts and would reach a reserved port before that time is a
  conflict: the component is *materialised*, run by the exact engine on its own heap from its
  start to now and handed over to the main heap, and both go on exactly.
- **Sampling.** A seeded share of the hits (``sample_per_mille``) is run as a miss instead, and
  its outcome compared with the stored one: the largest and the mean difference of a flow's
  finish, relative to its duration, are reported.

With ``sim.memo_engine: trains`` the flows the engine runs send packet trains (``cfg[CFG_TRAIN_MAX]``
> 0, core/trains.py); a recording runs with trains off, so what is stored is the exact engine's
outcome, and a materialised component goes on as the engine's other flows do, in trains.

What is not exact: a flow that starts behind a virtual component's last packet on a port does
not wait for the rest of that packet's serialisation (at most one packet's time); switch buffers
shared with a virtual component do not see its packets (its queues hold a packet or two, since
any mark or pause makes it volatile); the order of events at one picosecond may differ.

Reads and writes every world array the exact engine does; the memo state is ``Memo``.
"""

from typing import NamedTuple

import numpy as np
from numba import types
from numba.typed import Dict, List

from .heap import heap_pop, heap_push
from .jit import njit_alloc
from .kinds import (
    CFG_HEAP_ROOM,
    CFG_IFG,
    CFG_MTU,
    CFG_TRAIN_MAX,
    CFG_N_HOSTS,
    C_EVENTS,
    C_FLOWS_DONE,
    C_LAST_PROGRESS_PS,
    C_NOW_PS,
    C_SIZE,
    C_TASKS_DONE,
    FL_DONE,
    I64,
    M_EV_COUNT,
    M_EV_SEQ,
    M_FREE,
    M_QP_FREE,
    M_ROUTE_EPOCH,
    M_TRACE_ROWS,
    NPRIO,
    POOL_MARGIN,
    ST_BUDGET,
    ST_FLOW_START,
    ST_HEAP_LOW,
    ST_IDLE,
    ST_POOL_LOW,
    ST_QP_LOW,
    ST_T_LIMIT,
    EV_TX_DONE,
    EV_ARRIVE,
    C_ECN_MARKS,
    C_PAUSES,
    C_RETRANSMITS,
    C_TIMEOUTS,
    C_DATA_DROPPED,
    C_CTRL_DROPPED,
    C_NACKS,
)
from .loop import advance
from .nic import flow_start
from .packets import ack_frame_bytes, data_header_bytes
from .paths import path_into, ser_ps
from .port import drain_kicks, kick
from .qp import same_connection
from .state import EV_DTYPE, World
from .tasks import task_done

MAX_HOPS = 64  #: ports on one path (paths.path_into)
K_RES = 4  #: reservations kept per port
POOL_CAP = 1 << 16  #: packets a trial run may hold at once (beyond: volatile)
FOREVER = I64(1) << 62

# Memo.meta
MM_PENDING = 0  #: flows waiting for the end of their instant
MM_PENDING_T = 1  #: that instant
MM_ACTIVE = 2  #: flows the engine runs, listed in Memo.active
MM_SWEPT_T = 3  #: when the list was last cleared of finished flows
MM_COMPS = 4  #: components made
MM_CF = 5  #: entries of Memo.comp_flows used
MM_OFF = 8  #: 1: no component is made (run/inputs.why_no_memo): every flow runs in the engine
MM_SAMPLE = 9  #: hits re-run exactly, per mille
MM_RNG = 10  #: the sampler's own generator
# counters, reported in summary.json
MM_VIRTUAL = 11  #: components replayed or recorded
MM_HITS = 12
MM_MISSES = 13
MM_VOLATILE = 14
MM_MATERIALISED = 15
MM_MEMO_FLOWS = 16  #: flows in virtual components
MM_EXACT_FLOWS = 17  #: flows started in the engine
MM_SKIPPED_EVENTS = 18  #: events the hits stood for
MM_SAMPLED = 19
MM_ERR_MAX_PPM = 20  #: sampled hits: largest |finish difference| / duration, parts per million
MM_ERR_SUM_PPM = 21  #: their sum over sampled flows
MM_ERR_FLOWS = 22
MM_SIZE = 23

# component states
CS_VIRTUAL = 1
CS_MATERIALISED = 2
CS_DONE = 3

# memo heap events
MEV_RECV = 0  #: obj = flow: its receiver holds every byte
MEV_DONE = 1  #: obj = component: its last flow ended; write its records

# stored outcome, per component: a header, then per flow, per port, the run's counters
V_FLOWS = 0
V_PORTS = 1
V_EVENTS = 2
V_PACKETS = 3  #: most packets the component held at once
V_HEAP = 4  #: most events it had pending
V_END = 5  #: offset of the last thing it did (the done event)
V_HEAD = 6
V_PER_FLOW = 7  #: recv, finish, sent, delivered, dropped, retransmits, timeouts
V_PER_PORT = 4 + NPRIO  #: last start, tx bytes, data packets, peak queue, bytes per priority

#: counters whose run-wide value the replay sets itself (not added from the stored outcome)
_OWN_STATS = (C_NOW_PS, C_EVENTS, C_FLOWS_DONE, C_TASKS_DONE, C_LAST_PROGRESS_PS)
#: a component whose run moved one of these is volatile
_VOLATILE_STATS = (C_ECN_MARKS, C_PAUSES, C_RETRANSMITS, C_TIMEOUTS, C_DATA_DROPPED, C_CTRL_DROPPED, C_NACKS)


class Memo(NamedTuple):
    meta: np.ndarray  # int64[MM_SIZE]
    users: np.ndarray  # int32[ports]: engine-run flows whose data or ACKs cross the port
    res_comp: np.ndarray  # int64[ports, K_RES]: components reserving the port, -1 for none
    res_end: np.ndarray  # int64[ports, K_RES]: until when
    active: np.ndarray  # int64[flows]: flows the engine runs (until swept)
    pending: np.ndarray  # int64[flows]
    comp_of: np.ndarray  # int64[flows]: the component a flow belongs to, -1 for none
    comp_t0: np.ndarray  # int64[flows]: per component, its start
    comp_val: np.ndarray  # int64[flows]: its stored outcome (index into the values)
    comp_state: np.ndarray  # int8[flows]
    comp_first: np.ndarray  # int64[flows]: its first entry of comp_flows
    comp_n: np.ndarray  # int64[flows]: its flows
    comp_flows: np.ndarray  # int64[flows]
    heap: np.ndarray  # EV_DTYPE: MEV_* events
    hmeta: np.ndarray  # int64[M_EV_SEQ + 1]: the memo heap's count and sequence
    rename: np.ndarray  # int64[ports]: scratch, -1
    mark: np.ndarray  # int64[ports]: scratch, -1
    load: np.ndarray  # int64[ports]: scratch, 0
    parent: np.ndarray  # int64[flows]: scratch (union-find)
    path: np.ndarray  # int32[2, MAX_HOPS]: scratch
    buf: np.ndarray  # int64[...]: scratch for keys and values


def new_memo(world: World, sample_per_mille: int, seed: int, off: bool) -> tuple:
    """The memo state for a world, and its table (key hash -> values index, keys, values)."""
    n_ports, n_flows = len(world.port), len(world.flow)
    meta = np.zeros(MM_SIZE, np.int64)
    meta[MM_SAMPLE] = sample_per_mille
    meta[MM_RNG] = (seed * 0x9E3779B97F4A7C15 + 1) & ((1 << 63) - 1) or 1
    meta[MM_OFF] = 1 if off else 0
    meta[MM_SWEPT_T] = -1
    memo = Memo(
        meta=meta,
        users=np.zeros(n_ports, np.int32),
        res_comp=np.full((n_ports, K_RES), -1, np.int64),
        res_end=np.zeros((n_ports, K_RES), np.int64),
        active=np.zeros(n_flows, np.int64),
        pending=np.zeros(n_flows, np.int64),
        comp_of=np.full(n_flows, -1, np.int64),
        comp_t0=np.zeros(n_flows, np.int64),
        comp_val=np.zeros(n_flows, np.int64),
        comp_state=np.zeros(n_flows, np.int8),
        comp_first=np.zeros(n_flows, np.int64),
        comp_n=np.zeros(n_flows, np.int64),
        comp_flows=np.zeros(n_flows, np.int64),
        heap=np.zeros(2 * n_flows + 64, EV_DTYPE),
        hmeta=np.zeros(M_EV_SEQ + 1, np.int64),
        rename=np.full(n_ports, -1, np.int64),
        mark=np.full(n_ports, -1, np.int64),
        load=np.zeros(n_ports, np.int64),
        parent=np.zeros(n_flows, np.int64),
        path=np.zeros((2, MAX_HOPS), np.int32),
        buf=np.zeros(1 << 20, np.int64),
    )
    index = Dict.empty(key_type=types.int64, value_type=types.int64)
    keys = List.empty_list(types.int64[::1])
    values = List.empty_list(types.int64[::1])
    volatile = Dict.empty(key_type=types.int64, value_type=types.int64)
    return memo, (index, keys, values, volatile)


@njit_alloc
def _with_heap(w, ev):
    """The world with another event heap (the exact engine's kernels take it as it is)."""
    return World(
        w.cfg, w.stats, w.meta, w.rng, ev, w.kick, w.pkt, w.pkt_free, w.port, w.pq, w.node, w.route_off,
        w.route_ports, w.flow, w.qp, w.qp_free, w.ccp, w.ccs, w.timer, w.int_rec, w.int_prev, w.trace, w.task,
        w.succ_off, w.succ, w.qtask, w.queue, w.link_plan, w.gate_off, w.gate_in, w.gate_out, w.gate_state, w.irn_bits,
    )  # fmt: skip


@njit_alloc
def _paths(w, mm, L):
    """Write flow L's data path into mm.path[0] and its ACK path into mm.path[1]; return their lengths."""
    fl = w.flow[L]
    off = w.route_off[w.meta[M_ROUTE_EPOCH]]
    port_node = w.port["node"]
    n_hosts = w.cfg[CFG_N_HOSTS]
    a = path_into(mm.path[0], off, w.route_ports, port_node, w.port["peer_port"], w.port["pass_to"], n_hosts,
                  I64(fl["src"]), I64(fl["dst"]), fl["ecmp_hash"])  # fmt: skip
    b = path_into(mm.path[1], off, w.route_ports, port_node, w.port["peer_port"], w.port["pass_to"], n_hosts,
                  I64(fl["dst"]), I64(fl["src"]), fl["ecmp_hash"])  # fmt: skip
    return a, b


@njit_alloc
def _sweep(w, mm, t):
    """Forget the engine-run flows that are over (their queue pair closed), once per instant."""
    if mm.meta[MM_SWEPT_T] == t:
        return
    mm.meta[MM_SWEPT_T] = t
    n = mm.meta[MM_ACTIVE]
    keep = 0
    for i in range(n):
        L = mm.active[i]
        if w.flow[L]["state"] == FL_DONE:
            _count_users(w, mm, L, -1)
        else:
            mm.active[keep] = L
            keep += 1
    mm.meta[MM_ACTIVE] = keep


@njit_alloc
def _count_users(w, mm, L, delta):
    a, b = _paths(w, mm, L)
    for j in range(a):
        mm.users[mm.path[0, j]] += delta
    for j in range(b):
        mm.users[mm.path[1, j]] += delta


@njit_alloc
def _port_free(w, p):
    """Nothing of the engine's is at port p now: idle, nothing queued, not paused, and nothing
    of what it sent still held at the other end."""
    pt = w.port[p]
    if pt["busy"] != 0 or pt["q_bytes"] != 0:
        return False
    peer = pt["peer_port"]
    for q in range(NPRIO):
        if w.pq[p, q]["paused"] != 0 or w.pq[peer, q]["in_bytes"] != 0 or w.pq[peer, q]["hdrm_bytes"] != 0:
            return False
    return True


@njit_alloc
def _conflicts(w, mm, L, t, materialise):
    """Whether flow L, starting at t, may be part of a virtual component: no engine-run flow
    crosses its ports, they are free, and no virtual component reserves one of them beyond the
    time L's packets can first get there. Returns that and how many flows the virtual
    components in its way have; with ``materialise`` they are run into the engine."""
    a, b = _paths(w, mm, L)
    for h in range(2):
        for i in range(a if h == 0 else b):
            if mm.users[mm.path[h, i]] > 0:
                _sweep(w, mm, t)
                a, b = _paths(w, mm, L)
    cc = w.flow[L]["cc"]
    data_wire = min(w.cfg[CFG_MTU], w.flow[L]["size_bytes"]) + data_header_bytes(w, cc) + w.cfg[CFG_IFG]
    ack_wire = ack_frame_bytes(w, cc) + w.cfg[CFG_IFG]
    free = True
    need = 0
    found = np.empty(2 * MAX_HOPS * K_RES, np.int64)
    n_found = 0
    reach = t
    for h in range(2):
        for i in range(a if h == 0 else b):
            p = mm.path[h, i]
            if mm.users[p] > 0 or not _port_free(w, p):
                free = False
            for r in range(K_RES):
                c = mm.res_comp[p, r]
                if c >= 0 and mm.res_end[p, r] > reach:
                    free = False
                    need += mm.comp_n[c]
                    found[n_found] = c
                    n_found += 1
            reach += w.port[p]["prop_ps"]
            if w.port[p]["cut_through"] == 0:  # stored and forwarded: the first packet's whole frame
                reach += ser_ps(data_wire if h == 0 else ack_wire, w.port[p]["rate_bps"])
    if materialise:
        for j in range(n_found):
            _materialise(w, mm, found[j], t)
    return free, need


# ----------------------------------------------------------------------------------------------
# the exact engine on a component's own heap


@njit_alloc
def _private(w, mm, c, t0, t_stop, rec, ports, n_ports):
    """Run component c's flows in the exact engine from t0, on a heap of their own, until t_stop
    or until all of them are over (t_stop = FOREVER). With ``rec`` (int64 array) record each
    flow's receive time into rec[2 * i] and each port's last transmission start into
    rec[2 * n_flows + j] (ports[j]). Return (status, events, fewest free packets, most events
    pending, last time); what is left on the own heap goes to the world's heap."""
    first, n = mm.comp_first[c], mm.comp_n[c]
    ev = np.zeros(4096, EV_DTYPE)
    train_max = w.cfg[CFG_TRAIN_MAX]  # memo_engine: trains
    if rec.shape[0] > 0:  # a recording is the exact engine's; a materialised component goes on in trains
        w.cfg[CFG_TRAIN_MAX] = 0
    main_count, main_seq = w.meta[M_EV_COUNT], w.meta[M_EV_SEQ]
    w.meta[M_EV_COUNT] = 0
    w.meta[M_EV_SEQ] = 0
    wp = _with_heap(w, ev)
    for i in range(n):
        kick(wp, flow_start(wp, mm.comp_flows[first + i], t0))
        drain_kicks(wp, t0)
    events0 = w.stats[C_EVENTS]
    watched = np.empty(len(_VOLATILE_STATS), np.int64)  # a trial run stops as soon as it is volatile
    for i, s in enumerate(_VOLATILE_STATS):
        watched[i] = w.stats[s]
    rng0 = w.rng[0]
    budget = 0  # and after 64 events per packet of its flows (it waits for something outside it)
    for i in range(n):
        budget += 64 * ((w.flow[mm.comp_flows[first + i]]["size_bytes"] + w.cfg[CFG_MTU] - 1) // w.cfg[CFG_MTU]) + 1024
    least_free = w.meta[M_FREE]
    free0 = least_free
    most_ev = w.meta[M_EV_COUNT]
    last = t0
    status = ST_BUDGET
    record = rec.shape[0] > 0
    while True:
        if w.meta[M_EV_COUNT] == 0:
            status = ST_IDLE
            break
        if t_stop == FOREVER:
            over = True
            for i in range(n):
                if w.flow[mm.comp_flows[first + i]]["state"] != FL_DONE:
                    over = False
                    break
            if over:
                status = ST_IDLE
                break
        kind = wp.ev[0]["kind"]
        obj = wp.ev[0]["obj"]
        t = wp.ev[0]["t_ps"]
        if t > t_stop:
            status = ST_T_LIMIT
            break
        if record and kind == EV_TX_DONE:
            k = w.port[obj]["tx_pkt"]
            if k >= 0:
                start = t - ser_ps(I64(w.pkt[k]["frame_bytes"]) + w.cfg[CFG_IFG], w.port[obj]["rate_bps"])
                for j in range(n_ports):
                    if ports[j] == obj:
                        rec[2 * n + j] = start - t0
        watch = -1
        if record and kind == EV_ARRIVE:
            q = w.pkt[obj]["qp"]
            if q >= 0:
                watch = w.qp[q]["flow"]
        if wp.ev.shape[0] - w.meta[M_EV_COUNT] < w.cfg[CFG_HEAP_ROOM] + 8:
            bigger = np.zeros(2 * wp.ev.shape[0], EV_DTYPE)
            bigger[: wp.ev.shape[0]] = wp.ev
            wp = _with_heap(w, bigger)
        status = advance(wp, t_stop, I64(1))
        if status != ST_BUDGET:
            break
        if record:
            stop = w.rng[0] != rng0 or w.stats[C_EVENTS] - events0 > budget or least_free < free0 - POOL_CAP
            for i, s in enumerate(_VOLATILE_STATS):
                if w.stats[s] != watched[i]:
                    stop = True
            if stop:
                status = ST_BUDGET  # not ST_IDLE: _record reads it as volatile
                break
        last = t
        least_free = min(least_free, w.meta[M_FREE])
        most_ev = max(most_ev, w.meta[M_EV_COUNT])
        if watch >= 0:
            q = w.flow[watch]["qp"]
            if q >= 0 and w.qp[q]["rcv_nxt"] == w.qp[q]["n_pkts"]:
                for i in range(n):
                    if mm.comp_flows[first + i] == watch and rec[2 * i] < 0:
                        rec[2 * i] = t - t0
    events = w.stats[C_EVENTS] - events0
    if record and status == ST_IDLE:  # its heap ran dry: over only if every flow is
        for i in range(n):
            if w.flow[mm.comp_flows[first + i]]["state"] != FL_DONE:
                status = ST_BUDGET
    if record and status != ST_IDLE:  # a trial run stopped early: _record puts its packets and queue pairs back
        w.meta[M_EV_COUNT] = main_count
        w.meta[M_EV_SEQ] = main_seq
        w.cfg[CFG_TRAIN_MAX] = train_max
        return status, events, least_free, most_ev, last
    # what is left (timers of closed queue pairs, or the packets of a component handed over) joins the world
    left = np.zeros(w.meta[M_EV_COUNT], EV_DTYPE)
    m = 0
    while w.meta[M_EV_COUNT] > 0:
        tt, kk, oo, aa = heap_pop(wp.ev, w.meta)
        left[m]["t_ps"] = tt
        left[m]["kind"] = kk
        left[m]["obj"] = oo
        left[m]["arg"] = aa
        m += 1
    w.meta[M_EV_COUNT] = main_count
    w.meta[M_EV_SEQ] = main_seq
    for i in range(m):
        heap_push(w.ev, w.meta, left[i]["t_ps"], left[i]["kind"], left[i]["obj"], left[i]["arg"])
    w.cfg[CFG_TRAIN_MAX] = train_max
    return status, events, least_free, most_ev, last


# ----------------------------------------------------------------------------------------------
# making, keying, recording and replaying components


@njit_alloc
def _key(w, mm, c, ports_out):
    """Component c's key into mm.buf; its ports, named in order, into ports_out. Return the
    key's length and the number of ports."""
    first, n = mm.comp_first[c], mm.comp_n[c]
    n_ports = _name_ports(w, mm, c, ports_out)
    buf = mm.buf
    buf[0] = n
    buf[1] = n_ports
    k = 2
    for i in range(n):
        L = mm.comp_flows[first + i]
        buf[k] = w.flow[L]["size_bytes"]
        buf[k + 1] = w.flow[L]["prio"] + 256 * w.flow[L]["cc_row"]  # its priority and congestion control
        buf[k + 2] = _same_connection(w, mm, first, i)
        k += 3
        a, b = _paths(w, mm, L)
        for h in range(2):
            m = a if h == 0 else b
            buf[k] = m
            k += 1
            for j in range(m):
                buf[k] = mm.rename[mm.path[h, j]]
                k += 1
    for j in range(n_ports):
        p = ports_out[j]
        mm.rename[p] = -1
        pt = w.port[p]
        buf[k] = pt["rate_bps"]
        buf[k + 1] = pt["prop_ps"]
        buf[k + 2] = pt["cut_through"] * 2 + pt["at_host"]
        buf[k + 3] = pt["kmin_bytes"]
        buf[k + 4] = pt["kmax_bytes"]
        buf[k + 5] = pt["headroom_bytes"] * 64 + pt["pfc_shift"]
        buf[k + 6] = w.node[w.port[pt["peer_port"]]["node"]]["buffer_bytes"]
        k += 7
    return k, n_ports


@njit_alloc
def _same_connection(w, mm, first, i):
    """1 + the first flow of the component (by its order) on flow i's connection, 0 if it has its
    own: the engine's rule (qp.same_connection), so flows the key puts on one connection go in
    order on one queue pair."""
    fl = w.flow[mm.comp_flows[first + i]]
    for j in range(i + 1):
        if same_connection(w.flow[mm.comp_flows[first + j]], fl):
            return I64(j + 1)
    return I64(0)


@njit_alloc
def _contended(w, mm, c):
    """Whether the data of component c's flows meet at a switch port faster than it sends: a
    queue builds there, so the run would mark or pause (and be volatile) or its outcome depend
    on the order of arrivals; the engine runs it without trying. (A NIC shares its port among
    its queue pairs by round robin, so its flows together bring at most its rate to any port:
    nothing queues in the network there.)"""
    first, n = mm.comp_first[c], mm.comp_n[c]
    over = False
    for i in range(n):  # each NIC port's rate, once at each port its flows' data cross
        g = w.flow[mm.comp_flows[first + i]]["nic_port"]
        leader = True
        for j in range(i):
            if w.flow[mm.comp_flows[first + j]]["nic_port"] == g:
                leader = False
                break
        if not leader:
            continue
        rate = w.port[g]["rate_bps"]
        for k in range(i, n):
            L = mm.comp_flows[first + k]
            if w.flow[L]["nic_port"] != g:
                continue
            a, _ = _paths(w, mm, L)
            for j in range(1, a):
                p = mm.path[0, j]
                if mm.mark[p] != g:
                    mm.mark[p] = g
                    mm.load[p] += rate
                    if mm.load[p] > w.port[p]["rate_bps"]:
                        over = True
    for i in range(n):  # clear the scratch
        a, _ = _paths(w, mm, mm.comp_flows[first + i])
        for j in range(1, a):
            mm.load[mm.path[0, j]] = 0
            mm.mark[mm.path[0, j]] = -1
    return over


@njit_alloc
def _hash(buf, n):
    h = np.uint64(1469598103934665603)
    for i in range(n):
        h = (h ^ np.uint64(buf[i] & 0x7FFFFFFFFFFFFFFF)) * np.uint64(1099511628211)
        h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(0x7FFFFFFFFFFFFFFF))


@njit_alloc
def _record(w, mm, c, t0, ports, n_ports):
    """Run component c alone from t0 to its end and put the world back as it was; return its
    outcome (empty if it is volatile, or -1-status if the world needs more room first)."""
    first, n = mm.comp_first[c], mm.comp_n[c]
    if w.meta[M_QP_FREE] <= n:
        return np.full(1, -1 - ST_QP_LOW, np.int64)
    if w.meta[M_FREE] < 8 * POOL_MARGIN + 256 * n:
        return np.full(1, -1 - ST_POOL_LOW, np.int64)
    peers = np.empty(n_ports, np.int64)
    for j in range(n_ports):
        peers[j] = w.port[ports[j]]["peer_port"]
    port_before = w.port[ports[:n_ports]].copy()
    pq_before = w.pq[ports[:n_ports]].copy()
    peer_port_before = w.port[peers].copy()
    peer_pq_before = w.pq[peers].copy()
    nodes = np.empty(2 * n_ports, np.int64)
    for j in range(n_ports):
        nodes[2 * j] = w.port[ports[j]]["node"]
        nodes[2 * j + 1] = w.port[peers[j]]["node"]
    node_before = w.node[nodes].copy()
    stats_before = w.stats.copy()
    trace_rows = w.meta[M_TRACE_ROWS]  # (a PFC log's rows of a run that is put back go too)
    rng_before = w.rng[0]
    flows = mm.comp_flows[first : first + n]
    flow_before = w.flow[flows].copy()
    for j in range(n_ports):
        w.port[ports[j]]["max_q_bytes"] = 0
    for i in range(n):
        w.task[flows[i]]["finish_ps"] = FOREVER  # its task is done by the replay, not by this run
    free0, qfree0 = w.meta[M_FREE], w.meta[M_QP_FREE]  # what a run stopped early gives back
    low = max(free0 - POOL_CAP - 16, 0)
    pkt_free_before = w.pkt_free[low:free0].copy()
    slots = w.qp_free[qfree0 - n : qfree0].copy()
    qp_before = w.qp[slots].copy()
    rec = np.full(2 * n + n_ports, -1, np.int64)
    status, events, least_free, most_ev, last = _private(w, mm, c, t0, FOREVER, rec, ports, n_ports)
    if status != ST_IDLE:  # its packets and queue pairs are still held: free them as they were
        w.pkt_free[low:free0] = pkt_free_before
        w.meta[M_FREE] = free0
        w.qp_free[qfree0 - n : qfree0] = slots
        w.meta[M_QP_FREE] = qfree0
        for i in range(n):
            w.qp[slots[i]] = qp_before[i]
    volatile = status != ST_IDLE or w.rng[0] != rng_before
    for s in _VOLATILE_STATS:
        if w.stats[s] != stats_before[s]:
            volatile = True
    for i in range(n):
        if w.flow[flows[i]]["state"] != FL_DONE or rec[2 * i] < 0:
            volatile = True
    val = np.zeros(V_HEAD + V_PER_FLOW * n + V_PER_PORT * n_ports + C_SIZE, np.int64)
    if not volatile:
        val[V_FLOWS] = n
        val[V_PORTS] = n_ports
        val[V_EVENTS] = events
        val[V_PACKETS] = w.meta[M_FREE] - least_free
        val[V_HEAP] = most_ev
        end = last - t0
        k = V_HEAD
        for i in range(n):
            fl = w.flow[flows[i]]
            val[k] = rec[2 * i]
            val[k + 1] = fl["finish_ps"] - t0
            val[k + 2] = fl["pkts_sent"]
            val[k + 3] = fl["pkts_delivered"]
            val[k + 4] = fl["pkts_dropped"]
            val[k + 5] = fl["retransmits"]
            val[k + 6] = fl["timeouts"]
            end = max(end, fl["finish_ps"] - t0)
            k += V_PER_FLOW
        for j in range(n_ports):
            p = ports[j]
            val[k] = rec[2 * n + j]
            val[k + 1] = w.port[p]["tx_bytes"] - port_before[j]["tx_bytes"]
            val[k + 2] = w.port[p]["tx_data_pkts"] - port_before[j]["tx_data_pkts"]
            val[k + 3] = w.port[p]["max_q_bytes"]
            for q in range(NPRIO):
                val[k + 4 + q] = w.pq[p, q]["tx_bytes"] - pq_before[j, q]["tx_bytes"]
            k += V_PER_PORT
        for s in range(C_SIZE):
            val[k + s] = w.stats[s] - stats_before[s]
        for s in _OWN_STATS:
            val[k + s] = 0
        val[V_END] = end
    # put the world back: the component has not run yet
    for j in range(n_ports):
        w.port[ports[j]] = port_before[j]
        w.pq[ports[j]] = pq_before[j]
    for j in range(n_ports):
        w.port[peers[j]] = peer_port_before[j]
        w.pq[peers[j]] = peer_pq_before[j]
    for j in range(2 * n_ports):
        mx = w.node[nodes[j]]["max_used"]
        w.node[nodes[j]] = node_before[j]
        w.node[nodes[j]]["max_used"] = max(node_before[j]["max_used"], mx)
    events_now = w.stats[C_EVENTS]
    w.stats[:] = stats_before
    w.stats[C_EVENTS] = events_now  # the events were processed
    w.rng[0] = rng_before
    w.meta[M_TRACE_ROWS] = trace_rows
    for i in range(n):
        w.flow[flows[i]] = flow_before[i]
        w.task[flows[i]]["finish_ps"] = -1
    if volatile:
        return np.zeros(0, np.int64)
    return val


@njit_alloc
def _reserve(mm, c, ports, n_ports, val, t0):
    base = V_HEAD + V_PER_FLOW * val[V_FLOWS]
    for j in range(n_ports):
        end = t0 + val[base + V_PER_PORT * j]
        p = ports[j]
        slot = -1
        for r in range(K_RES):
            if mm.res_comp[p, r] < 0 or mm.res_end[p, r] <= t0:
                slot = r
                break
        if slot < 0:  # no room: keep the latest ends
            slot = 0
            for r in range(1, K_RES):
                if mm.res_end[p, r] < mm.res_end[p, slot]:
                    slot = r
        mm.res_comp[p, slot] = c
        mm.res_end[p, slot] = end


@njit_alloc
def _unreserve(mm, c, ports, n_ports):
    for j in range(n_ports):
        p = ports[j]
        for r in range(K_RES):
            if mm.res_comp[p, r] == c:
                mm.res_comp[p, r] = -1


@njit_alloc
def _name_ports(w, mm, c, out):
    """Name component c's ports in the order its flows' data and ACK paths cross them
    (mm.rename[p], the port itself in out); return how many. mm.rename is left set."""
    first, n = mm.comp_first[c], mm.comp_n[c]
    m = 0
    for i in range(n):
        a, b = _paths(w, mm, mm.comp_flows[first + i])
        for h in range(2):
            for j in range(a if h == 0 else b):
                p = mm.path[h, j]
                if mm.rename[p] < 0:
                    mm.rename[p] = m
                    out[m] = p
                    m += 1
    return m


@njit_alloc
def _comp_ports(w, mm, c, out):
    """Component c's ports in key order (as _key names them) into out; return how many."""
    m = _name_ports(w, mm, c, out)
    for j in range(m):
        mm.rename[out[j]] = -1
    return m


@njit_alloc
def _start_exact(w, mm, L, t):
    """Flow L starts in the engine at t."""
    kick(w, flow_start(w, L, t))
    drain_kicks(w, t)
    mm.meta[MM_EXACT_FLOWS] += 1
    if mm.meta[MM_OFF] == 0:
        mm.active[mm.meta[MM_ACTIVE]] = L
        mm.meta[MM_ACTIVE] += 1
        _count_users(w, mm, L, 1)


@njit_alloc
def _materialise(w, mm, c, t):
    """Virtual component c is run into the engine: its flows from its start to t on their own
    heap, then handed over to the world's heap."""
    if mm.comp_state[c] != CS_VIRTUAL:
        return
    mm.comp_state[c] = CS_MATERIALISED
    mm.meta[MM_MATERIALISED] += 1
    ports = np.empty(mm.comp_n[c] * 2 * MAX_HOPS, np.int64)
    n_ports = _comp_ports(w, mm, c, ports)
    _unreserve(mm, c, ports, n_ports)
    _private(w, mm, c, mm.comp_t0[c], t - 1, np.zeros(0, np.int64), ports, n_ports)
    first, n = mm.comp_first[c], mm.comp_n[c]
    for i in range(n):
        L = mm.comp_flows[first + i]
        mm.active[mm.meta[MM_ACTIVE]] = L
        mm.meta[MM_ACTIVE] += 1
        _count_users(w, mm, L, 1)


@njit_alloc
def _replay(w, mm, c, val, t0):
    """Component c takes its stored outcome: tasks done at their receive offsets, records at its end."""
    mm.comp_state[c] = CS_VIRTUAL
    first, n = mm.comp_first[c], mm.comp_n[c]
    for i in range(n):
        heap_push(mm.heap, mm.hmeta, t0 + val[V_HEAD + V_PER_FLOW * i], I64(MEV_RECV), mm.comp_flows[first + i], c)
    heap_push(mm.heap, mm.hmeta, t0 + val[V_END], I64(MEV_DONE), c, I64(0))


@njit_alloc
def _finish(w, mm, c, val, t):
    """Write virtual component c's outcome into the records."""
    mm.comp_state[c] = CS_DONE
    first, n = mm.comp_first[c], mm.comp_n[c]
    t0 = mm.comp_t0[c]
    k = V_HEAD
    for i in range(n):
        fl = w.flow[mm.comp_flows[first + i]]
        fl["finish_ps"] = t0 + val[k + 1]
        fl["pkts_sent"] = val[k + 2]
        fl["pkts_delivered"] = val[k + 3]
        fl["pkts_dropped"] = val[k + 4]
        fl["retransmits"] = val[k + 5]
        fl["timeouts"] = val[k + 6]
        fl["state"] = FL_DONE
        fl["qp"] = -1
        k += V_PER_FLOW
    ports = np.empty(n * 2 * MAX_HOPS, np.int64)
    n_ports = _comp_ports(w, mm, c, ports)
    _unreserve(mm, c, ports, n_ports)
    for j in range(n_ports):
        p = ports[j]
        w.port[p]["tx_bytes"] += val[k + 1]
        w.port[p]["tx_data_pkts"] += val[k + 2]
        w.port[p]["max_q_bytes"] = max(w.port[p]["max_q_bytes"], val[k + 3])
        for q in range(NPRIO):
            w.pq[p, q]["tx_bytes"] += val[k + 4 + q]
        k += V_PER_PORT
    for s in range(C_SIZE):
        w.stats[s] += val[k + s]
    w.stats[C_FLOWS_DONE] += n
    w.stats[C_LAST_PROGRESS_PS] = t


@njit_alloc
def _find(mm, i):
    while mm.parent[i] != i:
        mm.parent[i] = mm.parent[mm.parent[i]]
        i = mm.parent[i]
    return i


@njit_alloc
def _next_random(mm):
    x = np.uint64(mm.meta[MM_RNG])
    x ^= x << np.uint64(13)
    x ^= x >> np.uint64(7)
    x ^= x << np.uint64(17)
    mm.meta[MM_RNG] = np.int64(x & np.uint64(0x7FFFFFFFFFFFFFFF))
    return mm.meta[MM_RNG]


@njit_alloc
def _settle(w, mm, index, keys, values, volatile, t):
    """The instant t is over: group its pending flows into components (flows sharing a port)
    and replay, record or run each. Returns a status asking for room, or ST_BUDGET."""
    n = mm.meta[MM_PENDING]
    need = 0
    for i in range(n):
        mm.parent[i] = i
    for i in range(n):
        a, b = _paths(w, mm, mm.pending[i])
        for h in range(2):
            m = a if h == 0 else b
            for j in range(m):
                p = mm.path[h, j]
                if mm.mark[p] < 0:
                    mm.mark[p] = i
                else:
                    ra, rb = _find(mm, i), _find(mm, mm.mark[p])
                    if ra != rb:
                        mm.parent[max(ra, rb)] = min(ra, rb)
    for i in range(n):
        a, b = _paths(w, mm, mm.pending[i])
        for h in range(2):
            m = a if h == 0 else b
            for j in range(m):
                mm.mark[mm.path[h, j]] = -1
    need = n + 1
    if w.meta[M_QP_FREE] <= need:
        return ST_QP_LOW
    if w.meta[M_FREE] < 8 * POOL_MARGIN + 256 * need:
        return ST_POOL_LOW
    for i in range(n):  # groups in the order of their first flow; flows in their start order
        if _find(mm, i) != i:
            continue
        c = mm.meta[MM_COMPS]
        mm.meta[MM_COMPS] = c + 1
        mm.comp_first[c] = mm.meta[MM_CF]
        mm.comp_t0[c] = t
        m = 0
        for j in range(i, n):
            if _find(mm, j) == i:
                L = mm.pending[j]
                mm.comp_flows[mm.meta[MM_CF] + m] = L
                mm.comp_of[L] = c
                m += 1
        mm.comp_n[c] = m
        mm.meta[MM_CF] += m
        ports = np.empty(m * 2 * MAX_HOPS, np.int64)
        if m * (4 + 2 * MAX_HOPS) + 2 * MAX_HOPS * m * 7 + 2 > mm.buf.shape[0]:  # too big to key: the engine runs it
            for j in range(m):
                _start_exact(w, mm, mm.comp_flows[mm.comp_first[c] + j], t)
            continue
        klen, n_ports = _key(w, mm, c, ports)
        key = mm.buf[:klen].copy()
        h = _hash(key, klen)
        val = np.zeros(0, np.int64)
        hit = False
        if h in index:
            stored = keys[index[h]]
            if stored.shape[0] == klen and np.all(stored == key):
                val = values[index[h]]
                hit = True
        if not hit and (h in volatile or _contended(w, mm, c)):  # volatile before, or bound to queue
            mm.meta[MM_VOLATILE] += 1
            for j in range(m):
                _start_exact(w, mm, mm.comp_flows[mm.comp_first[c] + j], t)
            continue
        sample = hit and mm.meta[MM_SAMPLE] > 0 and _next_random(mm) % 1000 < mm.meta[MM_SAMPLE]
        if hit and w.meta[M_FREE] < 2 * POOL_MARGIN + val[V_PACKETS]:
            return ST_POOL_LOW  # cannot happen after the check above for small components
        if not hit or sample:
            fresh = _record(w, mm, c, t, ports, n_ports)
            if fresh.shape[0] == 1:
                mm.meta[MM_COMPS] = c  # undo: the world needs room first
                mm.meta[MM_CF] -= m
                return -1 - fresh[0]
            if fresh.shape[0] == 0:
                volatile[h] = 1
                mm.meta[MM_VOLATILE] += 1
                for j in range(m):
                    _start_exact(w, mm, mm.comp_flows[mm.comp_first[c] + j], t)
                continue
            if sample:
                _compare(mm, val, fresh)
            else:
                mm.meta[MM_MISSES] += 1
            values.append(fresh)  # keys[i] is the key of values[i]
            keys.append(key)
            slot = len(values) - 1
            if not hit and h not in index:  # (a key whose hash another key holds is run each time)
                index[h] = slot
            val = fresh
        else:
            slot = index[h]
            mm.meta[MM_HITS] += 1
            mm.meta[MM_SKIPPED_EVENTS] += val[V_EVENTS]
        mm.meta[MM_VIRTUAL] += 1
        mm.meta[MM_MEMO_FLOWS] += m
        mm.comp_val[c] = slot
        _reserve(mm, c, ports, n_ports, val, t)
        _replay(w, mm, c, val, t)
    mm.meta[MM_PENDING] = 0
    return ST_BUDGET


@njit_alloc
def _compare(mm, stored, fresh):
    """A sampled hit: the stored outcome against the one just run."""
    mm.meta[MM_SAMPLED] += 1
    n = fresh[V_FLOWS]
    for i in range(n):
        k = V_HEAD + V_PER_FLOW * i
        dur = max(fresh[k + 1], 1)
        err = abs(fresh[k + 1] - stored[k + 1]) * 1_000_000 // dur
        mm.meta[MM_ERR_MAX_PPM] = max(mm.meta[MM_ERR_MAX_PPM], err)
        mm.meta[MM_ERR_SUM_PPM] += err
        mm.meta[MM_ERR_FLOWS] += 1


# ----------------------------------------------------------------------------------------------
# the loop


@njit_alloc
def _memo_event(w, mm, values, t_limit):
    """Process the memo heap's next event."""
    t, kind, obj, arg = heap_pop(mm.heap, mm.hmeta)
    if kind == MEV_RECV:
        c = arg
        if mm.comp_state[c] == CS_VIRTUAL:
            _received(w, obj, t)
    else:
        c = obj
        if mm.comp_state[c] == CS_VIRTUAL:
            w.stats[C_NOW_PS] = max(w.stats[C_NOW_PS], t)
            _finish(w, mm, c, values[mm.comp_val[c]], t)


@njit_alloc
def _received(w, L, t):
    """Flow L's receiver holds every byte at t: its task is done (as the engine's receiver does it)."""
    w.stats[C_NOW_PS] = max(w.stats[C_NOW_PS], t)
    task_done(w, L, t)


@njit_alloc(entry=True)
def advance_memo(w, mm, index, keys, values, volatile, t_limit_ps, max_events):
    """Process events (the engine's and the memo's) with t_ps <= t_limit_ps, about max_events of them."""
    done = 0
    while True:
        t_main = w.ev[0]["t_ps"] if w.meta[M_EV_COUNT] > 0 else FOREVER
        t_memo = mm.heap[0]["t_ps"] if mm.hmeta[M_EV_COUNT] > 0 else FOREVER
        if mm.meta[MM_PENDING] > 0 and min(t_main, t_memo) > mm.meta[MM_PENDING_T]:
            status = _settle(w, mm, index, keys, values, volatile, mm.meta[MM_PENDING_T])
            if status != ST_BUDGET:
                return status
            continue
        if t_memo <= t_main and t_memo <= t_limit_ps:
            if done >= max_events:
                return ST_BUDGET
            _memo_event(w, mm, values, t_limit_ps)
            done += 1
            continue
        if w.meta[M_EV_COUNT] == 0:
            return ST_IDLE if t_memo == FOREVER else ST_T_LIMIT
        if done >= max_events:
            return ST_BUDGET
        events = w.stats[C_EVENTS]
        status = advance(w, min(t_limit_ps, t_memo - 1), max_events - done)
        done += w.stats[C_EVENTS] - events
        if status == ST_FLOW_START:
            status = _flow_start(w, mm, t_limit_ps)
            if status != ST_BUDGET:
                return status
            done += 1
            continue
        if status == ST_T_LIMIT and t_memo <= t_limit_ps:
            continue
        if status == ST_IDLE and (mm.hmeta[M_EV_COUNT] > 0 or mm.meta[MM_PENDING] > 0):
            continue
        return status


@njit_alloc
def _flow_start(w, mm, t_limit_ps):
    """The engine's next event starts a flow: make it pending (it may join a virtual
    component), or start it in the engine."""
    t = w.ev[0]["t_ps"]
    if t > t_limit_ps:
        return ST_T_LIMIT
    L = I64(w.ev[0]["obj"])
    if mm.meta[MM_PENDING] > 0 and t != mm.meta[MM_PENDING_T]:
        return ST_BUDGET  # cannot happen: the instant is settled first
    virtual, need = (False, 0) if mm.meta[MM_OFF] != 0 else _conflicts(w, mm, L, t, False)
    if not virtual:
        if w.meta[M_QP_FREE] <= need + mm.meta[MM_PENDING] + 1:
            return ST_QP_LOW
        if w.meta[M_FREE] < 8 * POOL_MARGIN + 256 * (need + mm.meta[MM_PENDING]):
            return ST_POOL_LOW
        if w.ev.shape[0] - w.meta[M_EV_COUNT] < w.cfg[CFG_HEAP_ROOM] + 4096 + 256 * need:
            return ST_HEAP_LOW
    heap_pop(w.ev, w.meta)
    w.stats[C_NOW_PS] = t
    w.stats[C_EVENTS] += 1
    if virtual:
        mm.pending[mm.meta[MM_PENDING]] = L
        mm.meta[MM_PENDING] += 1
        mm.meta[MM_PENDING_T] = t
        return ST_BUDGET
    if need > 0:
        _conflicts(w, mm, L, t, True)  # run the virtual components in its way into the engine
    if mm.meta[MM_PENDING] > 0 and _shares_pending(w, mm, L):
        n = mm.meta[MM_PENDING]  # flows of this instant in its way start in the engine too, before it
        mm.meta[MM_PENDING] = 0
        for i in range(n):
            _start_exact(w, mm, mm.pending[i], t)
    _start_exact(w, mm, L, t)
    return ST_BUDGET


@njit_alloc
def _shares_pending(w, mm, L):
    a, b = _paths(w, mm, L)
    for h in range(2):
        m = a if h == 0 else b
        for j in range(m):
            mm.mark[mm.path[h, j]] = 1
    hit = False
    for i in range(mm.meta[MM_PENDING]):
        c, d = _paths(w, mm, mm.pending[i])
        for h in range(2):
            m = c if h == 0 else d
            for j in range(m):
                if mm.mark[mm.path[h, j]] == 1:
                    hit = True
    a, b = _paths(w, mm, L)
    for h in range(2):
        m = a if h == 0 else b
        for j in range(m):
            mm.mark[mm.path[h, j]] = -1
    return hit
