"""Integer vocabulary shared by the engine and the Python side.

Every kind, mode and status is a named module-level integer here and nowhere else
(no bare magic numbers in if-chains). Numba freezes them at compile time.
"""

# ---- event kinds (heap records' "kind") ------------------------------------
EV_FLOW_START = 0  #: obj = flow: the flow's queue pair becomes active
EV_TX_DONE = 1  #: obj = port: the port finished serialising its packet
EV_ARRIVE = 2  #: obj = packet, arg = ingress port: last bit arrived
EV_NIC_WAKE = 3  #: obj = host port: a paced queue pair may be eligible now
EV_RTO = 4  #: obj = flow: retransmission timer check

# ---- packet kinds -----------------------------------------------------------
PK_FREE = -1
PK_DATA = 0
PK_ACK = 1
PK_NACK = 2
PK_CNP = 3
PK_PAUSE = 4  #: PFC XOFF for priority pkts.seq
PK_RESUME = 5  #: PFC XON for priority pkts.seq

# ---- flow (queue pair) states -----------------------------------------------
FL_WAITING = 0
FL_ACTIVE = 1
FL_DONE = 2

# ---- congestion-control algorithms --------------------------------------------
CC_NONE = 0
CC_NAMES = ("none",)

# ---- priorities ---------------------------------------------------------------
NPRIO = 8
CTRL_PRIO = 0  #: strict priority, never paused, outside the shared buffer

# ---- status codes returned by advance_nb ---------------------------------------
ST_IDLE = 0  #: no event left
ST_T_LIMIT = 1  #: next event is after the time limit
ST_BUDGET = 2  #: processed the slice's event budget
ST_POOL_LOW = 3  #: packet pool nearly empty: grow and call again
ST_HEAP_LOW = 4  #: event heap nearly full: grow and call again
ST_STALLED = 5  #: unfinished flows but no progress for cfg[CFG_STALL_PS]
STATUS_NAMES = ("idle", "time_limit", "budget", "pool_low", "heap_low", "stalled")

# Free slots the loop keeps in the pool and the heap before taking an event:
# one event allocates and schedules only a handful of packets and events.
POOL_MARGIN = 64
HEAP_MARGIN = 64
KICK_CAP = 64

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
CFG_SIZE = 15

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
C_CTRL_DROPPED = 14
C_BUFFER_OVERFLOW = 15  #: admissions refused for the total buffer with PFC on
C_SIZE = 16
STAT_NAMES = (
    "now_ps", "events", "data_packets_sent", "data_packets_delivered",
    "data_packets_dropped", "acks_sent", "nacks_sent", "pfc_pauses_sent",
    "pfc_resumes_sent", "ecn_marks", "timeouts", "retransmits", "flows_finished",
    "last_progress_ps", "control_packets_dropped", "buffer_overflows",
)

# ---- mutable scalars: indices into World.meta (int64) --------------------------------
M_EV_COUNT = 0
M_EV_SEQ = 1
M_KICKS = 2
M_FREE = 3
M_SIZE = 4
