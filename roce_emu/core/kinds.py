"""Integer vocabulary shared by the engine and the Python side.

Every kind, mode and status is a named module-level integer here and nowhere else
(no bare magic numbers in if-chains). Numba freezes them at compile time. Values that
kernels pass as arguments are NumPy int64 scalars, not Python ints: Numba types a
global Python int as a literal and compiles a callee once per literal value passed
(heap_push was compiled 12 times), which doubled the cold compile.
"""
import numpy as np

from .cc import registry as _cc_registry

I64 = np.int64
NO_ARG = I64(0)  #: an unused event or call argument
NO_ID = I64(-1)  #: no flow / no host

# ---- event kinds (heap records' "kind") ------------------------------------
EV_FLOW_START = I64(0)  #: obj = flow: the flow opens its queue pair and becomes active
EV_TX_DONE = I64(1)  #: obj = port: the port finished serialising its packet
EV_ARRIVE = I64(2)  #: obj = packet, arg = ingress port: last bit arrived
EV_NIC_WAKE = I64(3)  #: obj = host port: a paced queue pair may be eligible now
EV_RTO = I64(4)  #: obj = queue pair, arg = its flow: retransmission timer check
EV_CC_TIMER = I64(5)  #: obj = queue pair, arg = its flow * TIMER_SPAN + CC timer id (TM_*): a CC timer is due
EV_TRACE = I64(6)  #: sample the traces (per-flow rate, per-port queue)
EV_TASK_DONE = I64(7)  #: obj = compute task: its duration has passed
EV_LINK = I64(8)  #: obj = row of World.link_plan: a scheduled change to a link or to the routes

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

#: congestion-control timers per flow (one pending event each, see cc/base.py)
TM_ALPHA = I64(0)
TM_DECREASE = I64(1)
TM_INCREASE = I64(2)
N_TIMERS = 3
TIMER_SPAN = 8  #: EV_CC_TIMER's arg packs the flow and the timer id (< TIMER_SPAN)

# ---- trace records (rows of World.trace) --------------------------------------------
TR_RATE = I64(0)  #: obj = flow, a = pacing rate (bit/s), b = window (bytes, 0 = none), c = bytes acked
TR_QUEUE = I64(1)  #: obj = port, a = egress queue bytes (all priorities), b = c = 0
TR_COLS = 6  #: t_ps, kind, obj, a, b, c
TRACE_RATE_ON = 1  #: bits of cfg[CFG_TRACE]
TRACE_QUEUE_ON = 2

# ---- priorities ---------------------------------------------------------------
NPRIO = 8
CTRL_PRIO = I64(0)  #: strict priority, never paused, outside the shared buffer

# ---- status codes returned by advance_nb ---------------------------------------
ST_IDLE = 0  #: no event left
ST_T_LIMIT = 1  #: next event is after the time limit
ST_BUDGET = 2  #: processed the slice's event budget
ST_POOL_LOW = 3  #: packet pool nearly empty: grow and call again
ST_HEAP_LOW = 4  #: event heap nearly full: grow and call again
ST_STALLED = 5  #: unfinished flows but no progress for cfg[CFG_STALL_PS]
ST_TRACE_FULL = 6  #: the trace buffer cannot take another sample: flush it and call again
ST_INVARIANT = 7  #: an engine invariant broke (meta[M_FAULT]): the run stops at that event
ST_FF_GROW = 8  #: a fast-forward signature needs more room (FastForward.meta): grow and call again
ST_QP_LOW = 9  #: a flow starts next but no queue-pair slot is free: grow and call again
STATUS_NAMES = ("idle", "time_limit", "budget", "pool_low", "heap_low", "stalled", "trace_full", "invariant",
                "ff_grow", "qp_low")

# ---- invariant violations (meta[M_FAULT]); meta[M_FAULT_OBJ] names the entity --------------
F_NONE = 0
F_BUFFER_NEGATIVE = 1  #: obj = switch node: its buffer or an ingress counter went below zero
F_BUFFER_OVER = 2  #: obj = switch node: more bytes held than its buffer
F_DOUBLE_FREE = 3  #: obj = packet: freed twice
F_QUEUE_NEGATIVE = 4  #: obj = port: an egress queue's byte count went below zero
F_KICKS_FULL = 5  #: obj = port: the stack of ports to restart overflowed (a port would stay idle)
FAULT_NAMES = ("", "buffer accounting below zero at switch node", "buffer over capacity at switch node",
               "packet freed twice", "egress queue bytes below zero at port", "restart stack full at port")

# Free slots the loop keeps in the pool and the heap before taking an event:
# one event allocates and schedules only a handful of packets and events.
POOL_MARGIN = 64
HEAP_MARGIN = 64
KICK_CAP = 64  #: restart-stack room beyond one entry per (port, priority)

# ---- scalar configuration: indices into World.cfg (int64) ----------------------
CFG_MTU = 0  #: payload bytes per data packet
CFG_DATA_HDR = 1  #: data frame header bytes (everything but payload)
CFG_ACK_BYTES = 2
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
CFG_CC = 15  #: CC_* code of the run's algorithm
CFG_TRACE = 16  #: TRACE_*_ON bits, 0 = no traces
CFG_TRACE_PS = 17  #: trace sampling interval
CFG_N_TASKS = 18
CFG_TRAIN_MAX = 19  #: packets a steady flow may send as one train (sim.fast_forward: on); 0 = every packet alone
CFG_HEAP_ROOM = 20  #: free heap records the loop keeps before an event: HEAP_MARGIN + the most successors of a task
CFG_SIZE = 21

# ---- counters: indices into World.stats (int64) ---------------------------------
C_NOW_PS = 0
C_EVENTS = 1
C_DATA_SENT = 2
C_DATA_DELIVERED = 3
C_DATA_DROPPED = 4
C_ACKS = 5
C_NACKS = 6
C_PAUSES = 7
C_RESUMES = 8
C_ECN_MARKS = 9
C_TIMEOUTS = 10
C_RETRANSMITS = 11
C_FLOWS_DONE = 12
C_LAST_PROGRESS_PS = 13
C_CTRL_DROPPED = 14  #: ACK, NACK, CNP and PFC frames lost to network faults
C_BUFFER_OVERFLOW = 15  #: admissions refused for the total buffer with PFC on
C_CNPS = 16  #: congestion notifications sent by receivers (CNP packets or CNP/ECE-flagged ACKs)
C_TASKS_DONE = 17
C_LINK_LOST = 18  #: data packets lost to network faults (down links, lossy ports, no route); also in C_DATA_DROPPED
C_ROUTE_UPDATES = 19  #: route epochs installed after link failures or repairs
C_FF_JUMPS = 20  #: fast-forward jumps over repeated periods
C_FF_EVENTS = 21  #: events the jumps skipped (not in C_EVENTS, which counts processed events)
C_FF_PS = 22  #: simulated time the jumps skipped
C_FF_CHECKPOINTS = 23  #: fast-forward signatures taken
C_TRAINS = 24  #: packet trains sent (data trains and the ACK trains that answer them)
C_TRAIN_PKTS = 25  #: data packets carried in trains
C_SIZE = 26
STAT_NAMES = (
    "now_ps", "events", "data_packets_sent", "data_packets_delivered",
    "data_packets_dropped", "acks_sent", "nacks_sent", "pfc_pauses_sent",
    "pfc_resumes_sent", "ecn_marks", "timeouts", "retransmits", "flows_finished",
    "last_progress_ps", "control_packets_dropped", "buffer_overflows", "cnps_sent", "tasks_finished",
    "data_packets_lost_on_links", "route_updates", "fast_forward_jumps", "events_skipped", "skipped_ps",
    "fast_forward_checkpoints", "trains_sent", "packets_in_trains",
)

# ---- mutable scalars: indices into World.meta (int64) --------------------------------
M_EV_COUNT = 0
M_EV_SEQ = 1
M_KICKS = 2
M_FREE = 3
M_TRACE_ROWS = 4  #: rows of World.trace in use
M_COMPUTING = 5  #: compute tasks running now (a run waiting on them is not stalled)
M_FAULT = 6  #: F_* of the first broken invariant, 0 while all hold
M_FAULT_OBJ = 7
M_FAULT_KIND = 8  #: the kind of the event that broke it
M_ROUTE_EPOCH = 9  #: the routing table in use (World.route_off[epoch])
M_PLAN_LEFT = 10  #: link actions not yet applied (a run waiting on one is not stalled)
M_QP_FREE = 11  #: free queue-pair slots (World.qp_free)
M_SIZE = 12
