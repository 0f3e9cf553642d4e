"""Integer vocabulary shared by the engine and the Python side.

Every kind, mode and status is a named module-level integer here and nowhere else
(no bare magic numbers in if-chains). Numba freezes them at compile time. Values that
kernels pass as arguments are NumPy int64 scalars, not Python ints: Numba types a
global Python int as a literal and compiles a callee once per literal value passed,
which multiplies the cold compile.
"""

import numpy as np

from .cc import registry as _cc_registry

I64 = np.int64
NO_ARG = I64(0)  #: an unused event or call argument
NO_ID = I64(-1)  #: no flow / no host


class _Codes:
    """A family of codes numbered in the order they are declared, each with its name: the
    constant and the name its table shows are written on one line, so they cannot drift."""

    def __init__(self, kind=int):
        self.kind = kind
        self.names: list[str] = []

    def __call__(self, name: str):
        self.names.append(name)
        return self.kind(len(self.names) - 1)


# ---- event kinds (heap records' "kind") ------------------------------------
_event = _Codes(I64)
EV_FLOW_START = _event("flow start")  #: obj = flow: the flow opens its queue pair and becomes active
EV_TX_DONE = _event("transmission done")  #: obj = port: the port finished serialising its packet
EV_ARRIVE = _event("packet arrival")  #: obj = packet, arg = ingress port (and a token, ARRIVE_TOKEN): last bit arrived
#: EV_ARRIVE's arg: the ingress port in the low bits; above them, for a train's arrival at its
#: host, the token that the packet's take_tok must still hold (an older push for it is stale)
ARRIVE_TOKEN = I64(32)
ARRIVE_PORT_MASK = I64((1 << 32) - 1)
EV_NIC_WAKE = _event("NIC wake-up")  #: obj = host port: a paced queue pair may be eligible now
EV_RTO = _event("retransmission timer")  #: obj = queue pair slot (one pending per slot), arg = the flow that armed it
#: obj = queue pair, arg = its flow * TIMER_SPAN + CC timer id (TM_*): a CC timer is due
EV_CC_TIMER = _event("CC timer")
EV_TRACE = _event("trace sample")  #: sample the traces (per-flow rate, per-port queue)
EV_TASK_DONE = _event("task done")  #: obj = compute task: its duration has passed
EV_LINK = _event("link change")  #: obj = row of World.link_plan: a scheduled change to a link or to the routes
EVENT_NAMES = tuple(_event.names)  #: as error messages name them

# ---- network-fault actions (World.link_plan rows' "action") ----------------------------
LA_DOWN = I64(0)  #: the link of port and its peer stops carrying packets
LA_UP = I64(1)  #: the link carries packets again
LA_RATE = I64(2)  #: both directions of the link serialise at rate_bps
LA_LOSS = I64(3)  #: the port loses each packet it sends with probability loss (PFC frames excepted)
LA_ROUTES = I64(4)  #: the switches' tables become route epoch "epoch" (World.route_off[epoch])

# ---- task kinds (World.task): tasks 0..F-1 are the flows, in flow order ----------------
TK_FLOW = I64(0)  #: done when its receiver holds every byte
TK_COMPUTE = I64(1)  #: done duration_ps after it starts (also zero-length joins of a DAG)

# ---- packet kinds -----------------------------------------------------------
PK_FREE = I64(-1)
PK_DATA = I64(0)
PK_ACK = I64(1)
PK_NACK = I64(2)
PK_CNP = I64(3)
PK_PAUSE = I64(4)  #: PFC XOFF for priority pkts.seq
PK_RESUME = I64(5)  #: PFC XON for priority pkts.seq

# ---- transports: how a sender recovers lost packets (cfg[CFG_TRANSPORT], network.transport) --------
TP_GO_BACK_N = I64(0)  #: RoCE: the receiver drops what is out of order, the sender goes back to the gap
TP_IRN = I64(1)  #: IRN: selective repeat with the receiver's bitmap, a BDP cap and two timeouts (irn.py)
TRANSPORT_NAMES = ("go_back_n", "irn")  #: network.transport's names, by code

# ---- flow (queue pair) states -----------------------------------------------
FL_WAITING = I64(0)
FL_ACTIVE = I64(1)
FL_DONE = I64(2)

# ---- congestion-control algorithms: codes from their registry (cc/registry.py) ----------
CC_NAMES = _cc_registry.NAMES
CC_NONE = I64(_cc_registry.code("none"))  #: line rate, PFC alone keeps the fabric lossless
CC_DCQCN = I64(_cc_registry.code("dcqcn"))
CC_HPCC = I64(_cc_registry.code("hpcc"))
CC_TIMELY = I64(_cc_registry.code("timely"))
CC_DCTCP = I64(_cc_registry.code("dctcp"))
#: INT bytes every data packet and ACK of a flow carries, by its algorithm's code (HPCC's INT stack)
CC_INT_BYTES = np.array([a.int_header_bytes for a in _cc_registry.ALGORITHMS], np.int64)

#: congestion-control timers per flow (one pending event each, see cc/base.py)
TM_ALPHA = I64(0)
TM_DECREASE = I64(1)
TM_INCREASE = I64(2)
N_TIMERS = 3
TIMER_SPAN = 8  #: EV_CC_TIMER's arg packs the flow and the timer id (< TIMER_SPAN)

# ---- trace records (rows of World.trace) --------------------------------------------
TR_RATE = I64(0)  #: obj = flow, a = pacing rate (bit/s), b = window (bytes, 0 = none), c = bytes acked
TR_QUEUE = I64(1)  #: obj = port, a = egress queue bytes (all priorities), b = c = 0
TR_PFC = I64(2)  #: obj = the port a PFC frame reached (paused or resumed), a = priority, b = 1 pause / 0 resume
TR_COLS = 6  #: t_ps, kind, obj, a, b, c
TRACE_RATE_ON = 1  #: bits of cfg[CFG_TRACE]
TRACE_QUEUE_ON = 2
TRACE_PFC_ON = 4  #: every PFC frame as it takes effect (an event log, not a sample)

# ---- priorities ---------------------------------------------------------------
NPRIO = 8
CTRL_PRIO = I64(0)  #: strict priority, never paused, outside the shared buffer

# ---- status codes returned by loop.advance --------------------------------------
_status = _Codes()
ST_IDLE = _status("idle")  #: no event left
ST_T_LIMIT = _status("time_limit")  #: next event is after the time limit
ST_BUDGET = _status("budget")  #: processed the slice's event budget
ST_POOL_LOW = _status("pool_low")  #: packet pool nearly empty: grow and call again
ST_HEAP_LOW = _status("heap_low")  #: event heap nearly full: grow and call again
ST_STALLED = _status("stalled")  #: unfinished flows but no progress for cfg[CFG_STALL_PS]
ST_TRACE_FULL = _status("trace_full")  #: the trace buffer cannot take another sample: flush it and call again
ST_INVARIANT = _status("invariant")  #: an engine invariant broke (meta[M_INVARIANT]): the run stops at that event
ST_FF_GROW = _status("ff_grow")  #: a fast-forward signature needs more room (FastForward.meta): grow and call again
ST_QP_LOW = _status("qp_low")  #: a flow starts next but no queue-pair slot is free: grow and call again
ST_FLOW_START = _status("flow_start")  #: a flow starts next and cfg[CFG_STOP_AT_START] asks to stop there (memo.py)
STATUS_NAMES = tuple(_status.names)

# ---- invariant violations (meta[M_INVARIANT]); meta[M_INVARIANT_OBJ] names the entity --------------
_invariant = _Codes()
INV_NONE = _invariant("")
#: obj = switch node: its buffer or an ingress counter went below zero
INV_BUFFER_NEGATIVE = _invariant("buffer accounting below zero at switch node")
#: obj = switch node: more bytes held than its buffer
INV_BUFFER_OVER = _invariant("buffer over capacity at switch node")
INV_DOUBLE_FREE = _invariant("packet freed twice")  #: obj = packet
INV_QUEUE_NEGATIVE = _invariant("egress queue bytes below zero at port")  #: obj = port
#: obj = port: the stack of ports to restart overflowed (a port would stay idle)
INV_KICKS_FULL = _invariant("restart stack full at port")
INVARIANT_NAMES = tuple(_invariant.names)  #: as error messages name them

# Free slots the loop keeps in the pool and the heap before taking an event:
# one event allocates and schedules only a handful of packets and events.
POOL_MARGIN = 64
HEAP_MARGIN = 64
KICK_CAP = 64  #: restart-stack room beyond one entry per (port, priority)

# ---- scalar configuration: indices into World.cfg (int64) ----------------------
CFG_MTU = 0  #: payload bytes per data packet
CFG_DATA_HDR = 1  #: data frame header bytes (everything but payload), before a flow's INT (CC_INT_BYTES)
CFG_ACK_BYTES = 2  #: before a flow's INT (CC_INT_BYTES)
CFG_CNP_BYTES = 3
CFG_PFC_BYTES = 4
CFG_IFG = 5  #: preamble + inter-frame gap bytes (wire only, not buffered)
CFG_RTO_PS = 6
CFG_NACK_PS = 7  #: minimum interval between repeated NACKs of one gap
CFG_PFC_ON = 8
CFG_ECN_ON = 9
CFG_RESERVE = 10  #: guaranteed bytes per ingress (port, priority)
CFG_RESUME_OFF = 11  #: XON hysteresis bytes
CFG_STALL_PS = 12
CFG_N_HOSTS = 13
CFG_N_FLOWS = 14
CFG_CC_USED = 15  #: bit 1 << CC_* set for each algorithm some flow of the run uses (its queue pairs' qp["cc"])
CFG_TRACE = 16  #: TRACE_*_ON bits, 0 = no traces
CFG_TRACE_PS = 17  #: trace sampling interval
CFG_N_TASKS = 18
CFG_TRAIN_MAX = 19  #: packets a steady flow may send as one train (sim.fast_forward: trains); 0 = every packet alone
CFG_HEAP_ROOM = 20  #: free heap records the loop keeps before an event: HEAP_MARGIN + the most successors of a task
CFG_ACK_WITH_DATA = 21  #: 1: switches queue ACKs and NACKs with their flow's data (HPCC ns-3); 0: in the control queue
CFG_ACK_EVERY = 22  #: a receiver acknowledges every this many in-order packets (and a flow's last)
CFG_STOP_AT_START = 23  #: 1: advance stops before a flow's start (ST_FLOW_START), for memo.py to decide how it runs
# network.jitter (jitter.py): per role (a NIC, a switch) the JD_* distribution of a packet's hold, its mean and
# its standard deviation (normal only); JD_NONE everywhere = no hold and no random draw
CFG_JITTER_NIC = 24
CFG_JITTER_NIC_MEAN_PS = 25
CFG_JITTER_NIC_SD_PS = 26
CFG_JITTER_SWITCH = 27
CFG_JITTER_SWITCH_MEAN_PS = 28
CFG_JITTER_SWITCH_SD_PS = 29
CFG_TRANSPORT = 30  #: TP_* of the run's loss recovery (network.transport)
CFG_IRN_CAP = 31  #: IRN: the BDP cap, packets a flow may have in flight (0 with go-back-N)
CFG_RTO_LOW_PS = 32  #: IRN: the timeout with at most cfg[CFG_RTO_LOW_PKTS] packets in flight
CFG_RTO_HIGH_PS = 33  #: IRN: the timeout with more in flight
CFG_RTO_LOW_PKTS = 34
CFG_SIZE = 35

# ---- jitter distributions: cfg[CFG_JITTER_NIC], cfg[CFG_JITTER_SWITCH] (network.jitter.*.distribution) --------
_dist = _Codes(I64)
JD_NONE = _dist("none")
JD_UNIFORM = _dist("uniform")  #: uniform on [0, 2 mean]
JD_EXPONENTIAL = _dist("exponential")
JD_NORMAL = _dist("normal")  #: mean and sd; a draw below zero holds nothing
JITTER_DISTRIBUTIONS = tuple(_dist.names)

# ---- counters: indices into World.stats (int64) ---------------------------------
_stat = _Codes()
C_NOW_PS = _stat("now_ps")
C_EVENTS = _stat("events")
C_DATA_SENT = _stat("data_packets_sent")
C_DATA_DELIVERED = _stat("data_packets_delivered")
C_DATA_DROPPED = _stat("data_packets_dropped")
C_ACKS = _stat("acks_sent")
C_NACKS = _stat("nacks_sent")
C_PAUSES = _stat("pfc_pauses_sent")
C_RESUMES = _stat("pfc_resumes_sent")
C_ECN_MARKS = _stat("ecn_marks")
C_TIMEOUTS = _stat("timeouts")
C_RETRANSMITS = _stat("retransmits")
C_FLOWS_DONE = _stat("flows_finished")
C_LAST_PROGRESS_PS = _stat("last_progress_ps")
C_CTRL_DROPPED = _stat("control_packets_dropped")  #: ACK, NACK, CNP and PFC frames lost to network faults
C_BUFFER_OVERFLOW = _stat("buffer_overflows")  #: admissions refused for the total buffer with PFC on
C_CNPS = _stat("cnps_sent")  #: congestion notifications sent by receivers (CNP packets or CNP/ECE-flagged ACKs)
C_TASKS_DONE = _stat("tasks_finished")
#: data packets lost to network faults (down links, lossy ports, no route); also in C_DATA_DROPPED
C_LINK_LOST = _stat("data_packets_lost_on_links")
C_ROUTE_UPDATES = _stat("route_updates")  #: route epochs installed after link failures or repairs
C_FF_JUMPS = _stat("fast_forward_jumps")  #: fast-forward jumps over repeated periods
C_FF_EVENTS = _stat("events_skipped")  #: events the jumps skipped (not in C_EVENTS, which counts processed events)
C_FF_PS = _stat("skipped_ps")  #: simulated time the jumps skipped
C_FF_CHECKPOINTS = _stat("fast_forward_checkpoints")  #: fast-forward signatures taken
C_TRAINS = _stat("trains_sent")  #: data trains sent (each answered by an ACK train, not counted here)
C_TRAIN_PKTS = _stat("packets_in_trains")  #: data packets carried in trains
C_SIZE = len(_stat.names)
STAT_NAMES = tuple(_stat.names)  #: summary.json's name of each counter

# ---- mutable scalars: indices into World.meta (int64) --------------------------------
M_EV_COUNT = 0
M_EV_SEQ = 1
M_KICKS = 2
M_FREE = 3
M_TRACE_ROWS = 4  #: rows of World.trace in use
M_COMPUTING = 5  #: compute tasks running now (a run waiting on them is not stalled)
M_INVARIANT = 6  #: F_* of the first broken invariant, 0 while all hold
M_INVARIANT_OBJ = 7
M_INVARIANT_KIND = 8  #: the kind of the event that broke it
M_ROUTE_EPOCH = 9  #: the routing table in use (World.route_off[epoch])
M_PLAN_LEFT = 10  #: link actions not yet applied (a run waiting on one is not stalled)
M_QP_FREE = 11  #: free queue-pair slots (World.qp_free)
M_SIZE = 12
