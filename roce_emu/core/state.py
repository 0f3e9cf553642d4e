"""State of a simulated world: one aligned record array per entity kind.

A world is a NamedTuple of a few dozen arrays, one record array per entity kind rather
than one array per field: Numba passes every array of a tuple argument as separate machine
arguments, so each field array would lengthen every kernel's signature and its compile
time. Records also keep the fields of one packet or port on one cache line. Access is ``w.qp[f]["snd_nxt"]`` (the
form that works with and without JIT). Indices are dense: ``p`` port, ``n`` node,
``k`` packet, ``L`` flow of the workload (World.flow, the task DAG's flow tasks) and ``f``
its queue pair (World.qp, a slot reused once the flow is over; packets name it).
"""

from typing import NamedTuple

import numpy as np


EV_DTYPE = np.dtype(
    [("t_ps", np.int64), ("seq", np.int64), ("kind", np.int32), ("obj", np.int32), ("arg", np.int64)],
    align=True,
)

PKT_DTYPE = np.dtype(
    [
        ("seq", np.int64),  # sequence number (DATA), cumulative ack (ACK/NACK), priority (PFC)
        ("sent_ps", np.int64),  # when the sender started transmitting it (a train: its last packet)
        # a second number whose meaning depends on the packet (0 where none applies):
        # - a train its NIC keeps until it has left (trains._send_train): when the NIC began sending it, in ps;
        # - an IRN NACK (never a train): the sequence that arrived out of order, its selective ack (irn.py)
        ("aux", np.int64),
        # a train handed on: when its last bit reaches the next node, from the port that passes it
        # on now (a host takes it then or later: trains.train_due_ps)
        ("last_in_ps", np.int64),
        ("qp", np.int32),  # the queue pair it belongs to (World.qp), -1 for PFC frames
        ("frame_bytes", np.int32),  # bytes buffered and serialised (the wire adds cfg[CFG_IFG])
        ("dst", np.int32),  # destination host
        ("in_port", np.int32),  # ingress port at the switch holding it
        ("nxt", np.int32),  # next packet in the same queue, -1 at the tail
        ("train_len", np.int32),  # packets it stands for: 1, or a train's length (sim.fast_forward: trains)
        # a train on its way to its host: the token of the one arrival event there that counts
        # (trains.push_take); 0 otherwise
        ("take_tok", np.int32),
        ("kind", np.int8),  # PK_*; PK_FREE in the free list
        ("prio", np.int8),
        ("ecn", np.uint8),  # CE mark (DATA) or ECN echo (ACK)
        ("n_int", np.int8),  # HPCC INT records in World.int_rec[k] (DATA: pushed by switches; ACK: echoed)
    ],
    align=True,
)

#: one HPCC INT record (docs/model.md §2.2), kept exact: no field wraps or unit rounding
INT_TS_PS = 0  # dequeue time at the hop
INT_TX_BYTES = 1  # wire bytes the egress port had sent before this packet
INT_QLEN = 2  # bytes queued at the egress port (all priorities) after this packet left
INT_PORT = 3  # the egress port (its rate is the hop's B)
INT_FIELDS = 4

#: streaming in-switch reduction (stream.py), World.gate_state[L, GATE_*]: the packets flow L's receiver holds in
#: order, and the packets its sender may have sent (its gates' limit)
GATE_HELD = 0
GATE_LIMIT = 1
#: the limit of a flow no gate holds back
GATE_OPEN = 1 << 62
#: rows of World.irn_bits[f]: the receiver's out-of-order packets, the sender's selectively acked ones
IRN_RCV = 0
IRN_SND = 1

#: per-queue-pair congestion-control timers, World.timer[f, TM_*]: the deadline, and 1 while an event is queued
TIMER_DUE = 0
TIMER_ARMED = 1

PORT_DTYPE = np.dtype(
    [
        ("rate_bps", np.int64),  # serialisation rate now (a slow_link fault changes it)
        ("nominal_bps", np.int64),  # the fabric's rate (ideal FCTs use it)
        ("prop_ps", np.int64),
        ("kmin_bytes", np.int64),  # ECN RED thresholds on the egress queue
        ("kmax_bytes", np.int64),
        ("pmax", np.float64),
        ("loss", np.float64),  # probability of losing each packet sent (a lossy_port fault)
        ("headroom_bytes", np.int64),  # PFC headroom of this ingress port
        ("pfc_shift", np.int64),  # dynamic threshold alpha = 2**-shift
        ("tx_bytes", np.int64),  # wire bytes sent
        ("tx_data_pkts", np.int64),
        ("pauses_sent", np.int64),
        ("ecn_marks", np.int64),
        ("drops", np.int64),  # data packets refused at this ingress
        ("wake_ps", np.int64),  # host ports: pending NIC wake-up time, 0 if none
        ("tx_end_ps", np.int64),  # with trains on: when the packet being sent ends (a cut train's old end is stale)
        ("end_ev_ps", np.int64),  # with trains on: when the port's one live end event (EV_TX_DONE) is due
        # with trains on, the two bounds of tx_end_ps (its maximum): when the port's own sending
        # ends (its packets and the control packets sent inside a train), and when a train's last
        # packet can leave by its arrival (0 at a NIC)
        ("tx_own_ps", np.int64),
        ("tx_in_ps", np.int64),
        ("q_bytes", np.int64),  # egress bytes queued over all priorities
        ("max_q_bytes", np.int64),  # peak of q_bytes
        ("data_keys", np.int64),  # sum (wrapping) of the path keys of the flows in data_flows
        ("data_rate", np.int64),  # sum of the NIC rates (bit/s) of the flows in data_flows
        ("in_bps", np.int64),  # the most that can arrive for this port: its node's other links that may feed it
        ("round_len", np.int64),  # host ports with trains on: the train length of this round robin round
        ("round_id", np.int64),  # trains: rounds started on this port
        ("round_pkts", np.int64),  # trains: packets sent in this round
        # trains: tx_train's flow and first sequence number (trains.train_key), which tell it from a
        # packet that reuses its slot once its receiver has taken it
        ("tx_train_key", np.int64),
        # trains: one packet's time here of the train the port is passing on, else 0: control
        # packets still go inside it once its receiver has taken it (trains._control_inside_train)
        ("tx_one_ps", np.int64),
        # network.jitter: when the last packet sent here comes out of the holds on its way (jitter.py), 0 without
        ("jit_out_ps", np.int64),
        ("node", np.int32),  # owner node
        ("data_flows", np.int32),  # active flows whose data leaves by this port (counted with trains on)
        ("peer_port", np.int32),  # the peer's port on the same link (our packets arrive there)
        ("tx_pkt", np.int32),  # packet being serialised, -1 if idle
        ("tx_train", np.int32),  # trains: the last train the port began to hand on (trains._send_train)
        ("rr_prio", np.int32),  # round-robin position among data priorities
        ("act_head", np.int32),  # host ports: ring of active queue pairs
        ("act_count", np.int32),
        ("round_left", np.int32),  # queue pairs still to send a train of round_len this round
        ("round_qps", np.int32),  # queue pairs in this round when it started
        ("pass_to", np.int32),  # a packet arriving here leaves its node by this port (-1: by the routes)
        ("busy", np.uint8),
        ("at_host", np.uint8),
        ("cut_through", np.uint8),  # a multi_dim NIC link: its router passes what it sends on as it comes in
        ("down", np.uint8),  # the link is down: a switch port discards what it would send, a NIC holds it
    ],
    align=True,
)

#: a scheduled network change (faults: in the scenario), applied by an EV_LINK event
LINK_PLAN_DTYPE = np.dtype(
    [
        ("t_ps", np.int64),
        ("value", np.int64),  # LA_RATE: the new rate (bit/s); LA_ROUTES: the route epoch
        ("loss", np.float64),  # LA_LOSS: the new loss probability
        ("action", np.int32),  # LA_*
        ("port", np.int32),  # the port (LA_DOWN, LA_UP, LA_RATE act on its peer too)
    ],
    align=True,
)

#: per (port, priority): the egress FIFO and PFC pause, and the ingress MMU accounting
PQ_DTYPE = np.dtype(
    [
        ("bytes", np.int64),  # egress queue bytes (frames)
        ("in_bytes", np.int64),  # ingress bytes in reserve + shared pool
        ("hdrm_bytes", np.int64),  # ingress bytes in headroom
        ("ahead_bytes", np.int64),  # egress bytes of queued trains beyond their first packet (not yet arrived)
        ("tx_bytes", np.int64),  # wire bytes sent of this priority (all kinds: data, ACKs, CNPs, PFC frames)
        ("head", np.int32),
        ("tail", np.int32),
        ("paused", np.uint8),  # egress paused by the peer's PFC
        ("xoff_sent", np.uint8),  # we paused the peer
    ],
    align=True,
)

NODE_DTYPE = np.dtype(
    [
        ("buffer_bytes", np.int64),
        ("pfc_free_bytes", np.int64),  # buffer - total headroom - total reserve
        ("used_bytes", np.int64),  # data bytes held
        ("shared_used", np.int64),
        ("max_used", np.int64),
        ("is_host", np.uint8),
    ],
    align=True,
)

#: one flow of the workload, for the whole run: what it is, and what became of it (its
#: queue pair's counters are copied here when the queue pair closes)
FLOW_DTYPE = np.dtype(
    [
        ("size_bytes", np.int64),
        ("start_ps", np.int64),  # its earliest start, then when it was released
        ("finish_ps", np.int64),  # when its sender had every ACK (-1 until then)
        ("ecmp_hash", np.int64),
        ("pkts_sent", np.int64),
        ("pkts_delivered", np.int64),
        ("pkts_dropped", np.int64),
        ("retransmits", np.int64),
        ("timeouts", np.int64),
        ("src", np.int32),
        ("dst", np.int32),
        ("nic_port", np.int32),  # sender's first-hop port
        ("qp", np.int32),  # its queue pair while it has one, else -1
        ("conn", np.int32),  # >= 0: it goes in order after its connection's earlier flows (nic.flow_start); -1: alone
        ("cc_row", np.int16),  # its congestion control's row of World.ccp (a job's own, or the run's)
        ("prio", np.int8),
        ("state", np.int8),  # FL_*
        ("cc", np.int8),  # CC_* of that row's algorithm
    ],
    align=True,
)

#: what a queue pair counts while it is open and hands to its flow's record when it closes
QP_COUNTERS = ("finish_ps", "pkts_sent", "pkts_delivered", "pkts_dropped", "retransmits", "timeouts", "state")

#: the live state of a flow, from its start until its last packet is gone (qp.py): a slot of
#: World.qp, reused by later flows, so memory grows with the flows in flight
QP_DTYPE = np.dtype(
    [
        ("size_bytes", np.int64),
        ("n_pkts", np.int64),
        ("ecmp_hash", np.int64),
        ("snd_nxt", np.int64),  # next sequence to send
        ("snd_una", np.int64),  # cumulative ack (packets)
        ("max_sent", np.int64),  # one past the highest sequence ever sent
        ("rcv_nxt", np.int64),  # receiver's next expected sequence
        ("nack_seq", np.int64),  # sequence last NACKed, -1 if none
        ("nack_ps", np.int64),  # time of the last NACK
        ("rto_ps", np.int64),  # retransmission deadline
        ("rate_bps", np.int64),  # pacing rate
        ("next_tx_ps", np.int64),  # earliest start of the next packet
        ("window_bytes", np.int64),  # 0 = no window
        ("finish_ps", np.int64),  # -1 until its sender has every ACK
        ("pkts_sent", np.int64),  # data packets put on the wire (with retransmissions)
        ("pkts_delivered", np.int64),  # data packets that reached the receiver
        ("pkts_dropped", np.int64),
        ("retransmits", np.int64),
        ("timeouts", np.int64),
        ("steady", np.int64),  # packets sent since the rate last moved or congestion was signalled (trains)
        ("steady_rate", np.int64),  # the pacing rate they were sent at
        ("path_key", np.int64),  # a hash of the ports its data crosses (trains)
        ("round_id", np.int64),  # trains: the NIC round it last sent in
        ("round_sent", np.int64),  # trains: packets it sent in that round
        ("credit", np.float64),  # trains: packets per-packet round robin owes it (+) or it owes (-)
        # IRN (irn.py): the last ACK progress (or the start), for its timeouts; in loss recovery, the
        # next sequence to consider resending, one past the last inferred lost, and the recovery
        # sequence (the last new packet sent before recovery, -1 outside it)
        ("acked_ps", np.int64),
        ("rtx_nxt", np.int64),
        ("rtx_end", np.int64),
        ("recover_seq", np.int64),
        ("flow", np.int32),  # the flow it serves (World.flow), -1 while the slot is free
        ("alive", np.int32),  # packets that name it (data, ACK, NACK, CNP): it closes when none is left
        ("src", np.int32),
        ("dst", np.int32),
        ("nic_port", np.int32),  # sender's first-hop port
        ("act_next", np.int32),  # ring of active queue pairs on the NIC port
        ("act_prev", np.int32),
        ("conn", np.int32),  # its flow's connection, -1 for none
        ("conn_next", np.int32),  # the flow of its connection that waits for this one to have sent all, -1
        ("cc_row", np.int16),  # its flow's row of World.ccp
        ("cc", np.int8),  # its flow's CC_*: what the congestion-control hooks (cc/dispatch.py) run
        ("prio", np.int8),
        ("state", np.int8),  # FL_*
        ("in_ring", np.uint8),
        ("rto_armed", np.uint8),  # the slot's EV_RTO event is pending (it outlives the flow: qp_open keeps it)
    ],
    align=True,
)


#: per-queue-pair congestion-control state; each algorithm uses the fields its module names
CC_DTYPE = np.dtype(
    [
        ("line_bps", np.float64),  # the sender's NIC rate: the top of every rate
        ("rate", np.float64),  # current rate R (bit/s); qp["rate_bps"] is its integer copy for pacing
        ("target", np.float64),  # DCQCN target rate R_T
        ("ref_rate", np.float64),  # HPCC / TIMELY reference rate R_c, committed once per RTT
        ("alpha", np.float64),  # DCQCN / DCTCP congestion estimate
        ("util", np.float64),  # HPCC EWMA of the bottleneck utilisation U
        ("rtt_diff", np.float64),  # TIMELY EWMA of RTT differences (ps)
        ("last_rtt_ps", np.int64),  # TIMELY RTT of the last per-RTT update
        ("update_seq", np.int64),  # per-RTT updates run on ACKs beyond this sequence
        ("stage", np.int64),  # DCQCN increase stage s / HPCC and TIMELY incStage
        ("bytes_ctr", np.int64),  # DCQCN paper: bytes sent since the last byte-counter event
        ("t_cnt", np.int64),  # DCQCN paper: timer events since the last cut
        ("bc_cnt", np.int64),  # DCQCN paper: byte-counter events since the last cut
        ("ecn_cnt", np.int64),  # DCTCP: ECN-echo ACKs in this window
        ("batch", np.int64),  # DCTCP: packets in this window
        ("cwr_seq", np.int64),  # DCTCP: no new cut until an ACK passes this sequence
        ("last_cnp_ps", np.int64),  # receiver: when it last sent this flow a CNP (-1 never)
        ("last_wire", np.int64),  # wire bytes of the last packet sent (pacing shift on a rate change)
        ("n_hops", np.int32),  # HPCC: INT records kept in World.int_prev[f]
        ("alpha_cnp", np.uint8),  # DCQCN ConnectX: a CNP arrived in this alpha slot
        ("dec_cnp", np.uint8),  # DCQCN ConnectX: a CNP arrived since the last decrease check
        ("cnp_seen", np.uint8),  # DCQCN: the first CNP has arrived (timers run from then on)
        ("in_cwr", np.uint8),  # DCTCP: window already cut for this window of data
    ],
    align=True,
)


#: a task of the workload DAG: tasks 0..F-1 are the flows (in flow order), then compute tasks
TASK_DTYPE = np.dtype(
    [
        ("duration_ps", np.int64),  # compute: how long it runs
        ("earliest_ps", np.int64),  # never starts before this (a flow's start_ns)
        ("start_ps", np.int64),  # -1 until released
        ("finish_ps", np.int64),  # -1 until done
        ("host", np.int32),  # compute: where it runs (-1 for a join)
        ("deps_left", np.int32),  # unfinished predecessors
        ("qrow", np.int32),  # its row of World.qtask if it takes part in a runtime queue, else -1
        ("kind", np.int8),  # TK_*
    ],
    align=True,
)

#: a task's part in the runtime queues (tasks.py), one row per task that has one
QTASK_DTYPE = np.dtype(
    [
        ("key", np.int64),  # dispatch queue: its rank (smaller first); ordered queue: its ticket
        ("ready_ps", np.int64),  # when its predecessors were done
        ("ticket", np.int64),  # dispatch queue: the ticket it was granted (its place in the order)
        ("deadline_ps", np.int64),  # dispatch queue: dropped if, granted, it would end past ready + this; -1 none
        ("task", np.int32),  # the task of this row
        ("queue", np.int32),  # the queue it waits for, -1 for none
        ("frees", np.int32),  # the dispatch queue it frees when it finishes, -1 for none
        ("gate", np.int32),  # ordered queue: the task whose ticket it follows
        ("next", np.int32),  # the task after it in its queue's waiting list, -1 at the end
    ],
    align=True,
)

#: a runtime queue (tasks.py)
QUEUE_DTYPE = np.dtype(
    [
        ("first", np.int64),  # the first waiting task, -1 if none
        ("next_ticket", np.int64),  # dispatch: the ticket it grants next; ordered: the ticket it serves next
        ("busy", np.int8),  # dispatch: granted and not yet freed
        ("ordered", np.int8),  # 1: an ordered queue, 0: a dispatch queue
    ],
    align=True,
)


class World(NamedTuple):
    cfg: np.ndarray  # int64[CFG_SIZE]
    stats: np.ndarray  # int64[C_SIZE]
    meta: np.ndarray  # int64[M_SIZE]: heap count and sequence, kick count, free packets
    rng: np.ndarray  # uint64[1]: xorshift state (ECN marking)
    ev: np.ndarray  # EV_DTYPE heap
    kick: np.ndarray  # int32[NPRIO * ports + KICK_CAP]: ports to (re)start, a stack
    pkt: np.ndarray  # PKT_DTYPE pool
    pkt_free: np.ndarray  # int32 stack of free packet ids
    port: np.ndarray  # PORT_DTYPE
    pq: np.ndarray  # PQ_DTYPE[P, NPRIO] (kinds.NPRIO priorities)
    node: np.ndarray  # NODE_DTYPE
    route_off: np.ndarray  # int64[epochs, n_nodes * n_hosts + 1]: per route epoch, CSR rows node * n_hosts + dst
    route_ports: np.ndarray  # int32
    flow: np.ndarray  # FLOW_DTYPE per workload flow
    qp: np.ndarray  # QP_DTYPE: queue-pair slots, the live state of the flows in flight (qp.py)
    qp_free: np.ndarray  # int32 stack of free queue-pair slots (meta[M_QP_FREE] of them)
    # float64[rows, width]: per congestion control of the run (row 0 network.cc, then the jobs' own),
    # its algorithm's parameters (indices in its cc_* module); a queue pair reads its row, qp["cc_row"]
    ccp: np.ndarray
    ccs: np.ndarray  # CC_DTYPE per queue pair
    timer: np.ndarray  # int64[queue pairs, N_TIMERS, 2]: CC timer deadline and armed flag (TIMER_*)
    int_rec: np.ndarray  # int64[pool, max hops, INT_FIELDS]: INT carried by each packet (0 hops if not HPCC)
    int_prev: np.ndarray  # int64[queue pairs, max hops, INT_FIELDS]: HPCC's last INT seen per queue pair
    trace: np.ndarray  # int64[rows, TR_COLS]: trace samples since the driver last flushed
    task: np.ndarray  # TASK_DTYPE: flows first, then compute tasks
    succ_off: np.ndarray  # int64[tasks + 1]: CSR rows of each task's successors
    succ: np.ndarray  # int32: successor task ids
    qtask: np.ndarray  # QTASK_DTYPE: the runtime-queue part of the tasks that have one
    queue: np.ndarray  # QUEUE_DTYPE: the runtime queues
    link_plan: np.ndarray  # LINK_PLAN_DTYPE: the scenario's faults as timed actions, in time order
    # streaming in-switch reduction (stream.py); no rows (gate_state of length 0) in a world without it
    gate_off: np.ndarray  # int64[2, flows + 1]: CSR rows per flow: its gates (row 0), the flows it gates (row 1)
    gate_in: np.ndarray  # int64[gates, 2]: per gate (by gate_off[0]) its source flow and window
    gate_out: np.ndarray  # int64[gates, 2]: per gate (by gate_off[1]) the flow it holds and its window
    gate_state: np.ndarray  # int64[flows, 2]: GATE_HELD, GATE_LIMIT per flow
    # uint64[queue pairs, 2, words]: IRN's bitmaps of one BDP cap each (irn.py), the receiver's
    # (IRN_RCV) and the sender's selective acks (IRN_SND); no words with go-back-N
    irn_bits: np.ndarray


class FastForward(NamedTuple):
    """The exact fast-forward's own state (fastforward.py), apart from the World so that the
    exact engine's kernels do not carry it."""

    meta: np.ndarray  # int64[FM_SIZE]: anchor, counts, the walk's cursor
    sig: np.ndarray  # int64[FF_SLOTS, 2, cap]: stored checkpoint signatures (field type, value)
    fsig: np.ndarray  # float64[FF_SLOTS, fcap]: their floating-point fields (compared exactly)
    ck: np.ndarray  # int64[FF_CK_ROWS, CK_SIZE]: per checkpoint (time, lengths, hash, events), the walk, the anchor
    qp: np.ndarray  # int64[FF_QP_ROWS, queue pairs]: active list and positions, per-queue-pair shift and base
    port: np.ndarray  # int64[ports]: per-port tx-byte advance in one period
    tmp: np.ndarray  # int64[FF_TMP_ROWS, heap capacity]: sort scratch
