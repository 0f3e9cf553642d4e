"""Compile checked inputs into the engine's world: flat arrays with capacities, growing them, and
reading its flows as of now (flows_now, for the results and the stall report)."""

import numpy as np

from ..config.cc_params import engine_params, resolved_params
from ..config.schema import Cc, Scenario
from ..core import fastforward as ff
from ..core import kinds as K
from ..core.cc.registry import BY_NAME, code
from ..core.loop import schedule_start
from ..core.ideal import base_rtt_extremes
from ..core.paths import first_hops
from ..core.state import (
    CC_DTYPE,
    EV_DTYPE,
    FLOW_DTYPE,
    INT_FIELDS,
    PKT_DTYPE,
    PQ_DTYPE,
    QP_DTYPE,
    QP_COUNTERS,
    QTASK_DTYPE,
    QUEUE_DTYPE,
    TASK_DTYPE,
    FastForward,
    World,
)
from ..fabric.topology import Fabric
from ..units import bps_to_gbps, ns_to_ps
from .. import streams
from ..workload import Workload
from ..workload.dag import GateTable, QueueTable, TaskTable
from ..workload.jobs import cc_rows, job_seed, used_algorithms
from .inputs import Inputs, trains_engine, why_no_trains
from .sizing import first_qp_slots, heap_capacity, pool_capacity


def train_limit(scenario: Scenario, workload=None) -> int:
    """Packets a steady flow may send as one train: sim.train_max_packets with fast_forward: trains
    (or memo with memo_engine: trains), 0 (every packet alone) otherwise, and where trains do not
    apply (inputs.why_no_trains)."""
    if not trains_engine(scenario) or why_no_trains(scenario, workload):
        return 0
    return scenario.sim.train_max_packets


def config_slots(inputs: Inputs) -> np.ndarray:
    """World.cfg: the run's scalar configuration (kinds.CFG_*), all but CFG_HEAP_ROOM."""
    scenario, workload = inputs.scenario, inputs.workload
    net = scenario.network
    cfg = np.zeros(K.CFG_SIZE, np.int64)
    cfg[K.CFG_MTU] = net.mtu_bytes
    cfg[K.CFG_DATA_HDR] = net.wire.data_header_bytes
    cfg[K.CFG_ACK_BYTES] = net.wire.ack_bytes
    cfg[K.CFG_CNP_BYTES] = net.wire.cnp_bytes
    cfg[K.CFG_PFC_BYTES] = net.wire.pfc_bytes
    cfg[K.CFG_IFG] = net.wire.preamble_ifg_bytes
    cfg[K.CFG_RTO_PS] = ns_to_ps(net.nic.rto_ns)
    cfg[K.CFG_NACK_PS] = ns_to_ps(net.nic.nack_interval_ns)
    cfg[K.CFG_ACK_EVERY] = net.nic.ack_every_packets
    cfg[K.CFG_PFC_ON] = int(net.switch.pfc.enabled)
    cfg[K.CFG_ECN_ON] = int(net.switch.ecn.enabled)
    cfg[K.CFG_RESERVE] = net.switch.pfc.reserve_bytes
    cfg[K.CFG_RESUME_OFF] = net.switch.pfc.resume_offset_bytes
    cfg[K.CFG_STALL_PS] = ns_to_ps(scenario.sim.stall_timeout_ns)
    cfg[K.CFG_N_HOSTS] = inputs.fabric.n_endpoints
    cfg[K.CFG_N_FLOWS] = len(workload.flows)
    cfg[K.CFG_N_TASKS] = len(workload.tasks)
    cfg[K.CFG_CC_USED] = sum(1 << code(a) for a in used_algorithms(scenario))
    traces = scenario.output.traces
    cfg[K.CFG_TRACE] = (
        (K.TRACE_RATE_ON if "rate" in traces else 0)
        | (K.TRACE_QUEUE_ON if "queue" in traces else 0)
        | (K.TRACE_PFC_ON if scenario.output.logs_pfc else 0)
    )
    cfg[K.CFG_TRACE_PS] = max(ns_to_ps(scenario.output.trace_interval_ns), 1)
    cfg[K.CFG_TRAIN_MAX] = train_limit(scenario, workload)
    cfg[K.CFG_ACK_WITH_DATA] = int(net.switch.ack_queue == "data")
    cfg[K.CFG_TRANSPORT] = K.TRANSPORT_NAMES.index(net.transport)
    if net.transport == "irn":
        cfg[K.CFG_RTO_LOW_PS] = ns_to_ps(net.irn.rto_low_ns)
        cfg[K.CFG_RTO_HIGH_PS] = ns_to_ps(net.irn.rto_high_ns)
        cfg[K.CFG_RTO_LOW_PKTS] = net.irn.rto_low_packets
    for device, source, slots in (
        ("nic", net.jitter.nic, (K.CFG_JITTER_NIC, K.CFG_JITTER_NIC_MEAN_PS, K.CFG_JITTER_NIC_SD_PS)),
        ("switch", net.jitter.switch, (K.CFG_JITTER_SWITCH, K.CFG_JITTER_SWITCH_MEAN_PS, K.CFG_JITTER_SWITCH_SD_PS)),
    ):
        distribution, mean_ns, sd_ns = source.resolved(device)
        cfg[list(slots)] = K.JITTER_DISTRIBUTIONS.index(distribution), ns_to_ps(mean_ns), ns_to_ps(sd_ns)
    return cfg


def bdp_cap_packets(inputs: Inputs, base_rtt_ps: int) -> int:
    """IRN's BDP cap (0 with go-back-N): network.irn.bdp_cap_packets, or the bandwidth-delay
    product of the fabric's longest path (its base RTT at the fastest NIC's rate) in MTU-sized
    packets, rounded up, as the paper sizes it."""
    net = inputs.scenario.network
    if net.transport != "irn":
        return 0
    if net.irn.bdp_cap_packets is not None:
        return net.irn.bdp_cap_packets
    port = inputs.port
    line_bps = int(port["rate_bps"][port["at_host"] == 1].max())
    return max(1, -(-base_rtt_ps * line_bps // (8 * net.mtu_bytes * 10**12)))


def route_extremes(inputs: Inputs, cfg: np.ndarray, rows: list[str]) -> tuple[list[int], int]:
    """(the healthy fabric's largest base RTT in ps for each row's algorithm, its data frames
    carrying that algorithm's INT; the most switch hops of any route in any epoch if some flow
    carries INT, else 0: World.int_rec's room per packet). The all-pairs route walk (O(hosts^2))
    runs only for an algorithm that needs the base RTT (HPCC, DCTCP; row 0's for IRN's BDP cap),
    once per INT size, and for INT room per hop (HPCC, for the longest detour a failure forces);
    a row that needs no base RTT gets 0."""
    scenario = inputs.scenario
    irn_cap = scenario.network.transport == "irn" and scenario.network.irn.bdp_cap_packets is None
    specs = [BY_NAME[a] for a in rows]
    needs = [spec.needs_fabric_rtt or (irn_cap and row == 0) for row, spec in enumerate(specs)]
    with_int = any(BY_NAME[a].int_header_bytes for a in used_algorithms(scenario))
    frames = {spec.int_header_bytes for spec, need in zip(specs, needs) if need}
    if not (frames or with_int):
        return [0] * len(rows), 0
    port, plan = inputs.port, inputs.plan

    def walk(int_bytes: int) -> tuple:
        frame = int(cfg[K.CFG_MTU] + cfg[K.CFG_DATA_HDR] + int_bytes + cfg[K.CFG_IFG])
        args = (plan.route_ports, port["node"], port["peer_port"], port["pass_to"], port["rate_bps"], port["prop_ps"])
        return (*args, inputs.fabric.n_endpoints, frame)

    rtt = {}
    max_switch_hops = 0
    for int_bytes in sorted(frames or {0}):
        rtt[int_bytes], max_switch_hops = base_rtt_extremes(plan.route_off[0], *walk(int_bytes))
    for epoch in range(1, len(plan.route_off) if with_int else 1):  # detours only matter for INT
        max_switch_hops = max(max_switch_hops, base_rtt_extremes(plan.route_off[epoch], *walk(0))[1])
    rtts = [int(rtt[spec.int_header_bytes]) if need else 0 for spec, need in zip(specs, needs)]
    return rtts, int(max_switch_hops) if with_int else 0


def cc_parameters(inputs: Inputs, rows: list[Cc], base_rtt_ps: list[int]) -> np.ndarray:
    """World.ccp: a row per congestion control of the run (workload.jobs.cc_rows), its
    algorithm's parameters in engine units, defaults resolved for the NIC rate and the row's
    base RTT."""
    port = inputs.port
    line_gbps = bps_to_gbps(float(port["rate_bps"][port["at_host"] == 1].max()))
    ccp = np.zeros((len(rows), max(BY_NAME[cc.algorithm].n_params for cc in rows)), np.float64)
    for i, (cc, rtt) in enumerate(zip(rows, base_rtt_ps)):
        values = engine_params(cc.algorithm, resolved_params(cc.algorithm, dict(cc.params), line_gbps), rtt)
        ccp[i, : len(values)] = values
    return ccp


def build_world(inputs: Inputs) -> World:
    """The engine's world for checked inputs (inputs.check_inputs): configuration slots, flow
    records, the base RTT and CC parameters, empty pools, and the first events queued."""
    scenario, fabric, workload, plan = inputs.scenario, inputs.fabric, inputs.workload, inputs.plan
    flows = workload.flows
    route_off, route_ports = plan.route_off, plan.route_ports
    cfg = config_slots(inputs)
    port, node = inputs.port, inputs.node
    rows, job_rows = cc_rows(scenario)
    flow = _flows(scenario, fabric, workload, route_off[0], route_ports, rows, job_rows)
    n_qps = first_qp_slots(len(flows), fabric.n_endpoints)
    base_rtt_ps, max_switch_hops = route_extremes(inputs, cfg, [cc.algorithm for cc in rows])
    ccp = cc_parameters(inputs, rows, base_rtt_ps)
    cfg[K.CFG_IRN_CAP] = bdp_cap_packets(inputs, base_rtt_ps[0])
    n_ports = len(port)
    pool_cap = pool_capacity(n_ports, n_qps)
    fanout = np.diff(workload.tasks.succ_off)
    # a finishing task releases its successors, and may start a task of each of two runtime queues
    queues = workload.tasks.queues
    cfg[K.CFG_HEAP_ROOM] = K.HEAP_MARGIN + (int(fanout.max()) if len(fanout) else 0) + 2 * (len(queues.task) > 0)
    roots = int(np.count_nonzero(workload.tasks.n_deps == 0))
    pq = np.zeros((n_ports, K.NPRIO), PQ_DTYPE)
    pq["head"] = -1
    pq["tail"] = -1
    meta = np.zeros(K.M_SIZE, np.int64)
    meta[K.M_FREE] = pool_cap
    meta[K.M_QP_FREE] = n_qps
    # the engine's per-packet draws (ECN marks, losses, jitter): network.jitter.seed, else the scenario's seed
    noise_seed = scenario.seed if scenario.network.jitter.seed is None else scenario.network.jitter.seed
    rng_state = streams.sequence(noise_seed, streams.ENGINE).generate_state(1, np.uint64)
    world = World(
        cfg=cfg,
        stats=np.zeros(K.C_SIZE, np.int64),
        meta=meta,
        rng=np.maximum(rng_state, np.uint64(1)),
        ev=np.zeros(
            heap_capacity(pool_cap, n_ports, n_qps) + roots + int(cfg[K.CFG_HEAP_ROOM]) + len(plan.actions), EV_DTYPE
        ),
        kick=np.zeros(K.NPRIO * n_ports + K.KICK_CAP, np.int32),
        pkt=_new_packets(pool_cap),
        pkt_free=np.arange(pool_cap - 1, -1, -1, dtype=np.int32),  # pops the lowest id first
        port=port,
        pq=pq,
        node=node,
        route_off=route_off,
        route_ports=route_ports,
        flow=flow,
        qp=_new_qps(n_qps),
        qp_free=np.arange(n_qps - 1, -1, -1, dtype=np.int32),  # pops the lowest slot first
        ccp=ccp,
        ccs=np.zeros(n_qps, CC_DTYPE),
        timer=np.zeros((n_qps, K.N_TIMERS, 2), np.int64),
        int_rec=np.zeros((pool_cap, max_switch_hops, INT_FIELDS), np.int64),
        int_prev=np.zeros((n_qps, max_switch_hops, INT_FIELDS), np.int64),
        trace=np.zeros((_trace_rows(cfg, n_qps, n_ports), K.TR_COLS), np.int64),
        task=_tasks(workload.tasks),
        succ_off=workload.tasks.succ_off,
        succ=workload.tasks.succ,
        qtask=_queued_tasks(queues),
        queue=_queues(queues),
        link_plan=plan.actions,
        **_gates(workload.gates, len(flows)),
        irn_bits=np.zeros((n_qps, 2, -(-int(cfg[K.CFG_IRN_CAP]) // 64)), np.uint64),
    )
    schedule_start(world)
    return world


def _gates(gates: GateTable | None, n_flows: int) -> dict:
    """World.gate_*: the streaming reduction's gates (core/stream.py) as CSR rows per flow, of
    the gates on it and of the flows it gates; no rows without gates."""
    if gates is None:
        return dict(
            gate_off=np.zeros((2, 1), np.int64),
            gate_in=np.zeros((0, 2), np.int64),
            gate_out=np.zeros((0, 2), np.int64),
            gate_state=np.zeros((0, 2), np.int64),
        )
    by_flow = np.lexsort((gates.source, gates.flow))
    by_source = np.lexsort((gates.flow, gates.source))
    off = np.zeros((2, n_flows + 1), np.int64)
    np.cumsum(np.bincount(gates.flow, minlength=n_flows), out=off[0, 1:])
    np.cumsum(np.bincount(gates.source, minlength=n_flows), out=off[1, 1:])
    return dict(
        gate_off=off,
        gate_in=np.stack([gates.source[by_flow], gates.window[by_flow]], axis=1).astype(np.int64),
        gate_out=np.stack([gates.flow[by_source], gates.window[by_source]], axis=1).astype(np.int64),
        gate_state=np.zeros((n_flows, 2), np.int64),
    )


#: first size of the fast-forward signature: fields per port, per flow in flight
FF_FIELDS_PER_PORT = 24
FF_FIELDS_PER_FLOW = 64
FF_FLOATS_PER_FLOW = 8


def new_fast_forward(world: World) -> FastForward:
    """The exact fast-forward's arrays for a world. The signature arrays start with room for
    a few hundred flows in flight and grow (ST_FF_GROW) when a checkpoint needs more."""
    n_ports, n_qps = len(world.port), len(world.qp)
    cap = 4096 + FF_FIELDS_PER_PORT * n_ports + FF_FIELDS_PER_FLOW * min(n_qps, 256)
    fcap = FF_FLOATS_PER_FLOW * min(n_qps, 256)
    meta = np.zeros(ff.FM_SIZE, np.int64)
    meta[ff.FM_ANCHOR] = -1
    qp = np.zeros((ff.FF_QP_ROWS, n_qps), np.int64)
    qp[ff.FF_POS] = -1
    return FastForward(
        meta=meta,
        sig=np.zeros((ff.FF_SLOTS, 2, cap), np.int64),
        fsig=np.zeros((ff.FF_SLOTS, fcap)),
        ck=np.zeros((ff.FF_CK_ROWS, ff.CK_SIZE), np.int64),
        qp=qp,
        port=np.zeros(n_ports, np.int64),
        tmp=np.zeros((ff.FF_TMP_ROWS, len(world.ev)), np.int64),
    )


def grow_fast_forward(fast: FastForward, world: World) -> FastForward:
    """After ST_FF_GROW: room for twice the signature a checkpoint asked for (the stored ones
    are forgotten); after the world's heap or queue pairs grew: room for them."""
    if fast.meta[ff.FM_WANT]:
        walk = fast.ck[ff.FF_SLOTS]
        fast.meta[ff.FM_WANT] = 0
        fast.meta[ff.FM_COUNT] = 0
        fast = fast._replace(
            sig=np.zeros((ff.FF_SLOTS, 2, 2 * max(int(walk[ff.X_IDX]), fast.sig.shape[2])), np.int64),
            fsig=np.zeros((ff.FF_SLOTS, 2 * max(int(walk[ff.X_FIDX]), fast.fsig.shape[1]))),
        )
    if fast.tmp.shape[1] < len(world.ev):
        fast = fast._replace(tmp=np.zeros((ff.FF_TMP_ROWS, len(world.ev)), np.int64))
    more = len(world.qp) - fast.qp.shape[1]
    if more > 0:  # the queue pairs grew
        extra = np.zeros((ff.FF_QP_ROWS, more), np.int64)
        extra[ff.FF_POS] = -1
        fast = fast._replace(qp=np.concatenate([fast.qp, extra], axis=1))
    return fast


def _queued_tasks(queues: QueueTable) -> np.ndarray:
    rows = np.zeros(len(queues.task), QTASK_DTYPE)
    for name in ("task", "queue", "key", "gate", "frees"):
        rows[name] = getattr(queues, name)
    rows["deadline_ps"] = queues.deadline
    rows["next"] = -1
    return rows


def _queues(queues: QueueTable) -> np.ndarray:
    out = np.zeros(len(queues.ordered), QUEUE_DTYPE)
    out["first"] = -1
    out["ordered"] = queues.ordered
    return out


def _tasks(table: TaskTable) -> np.ndarray:
    task = np.zeros(len(table), TASK_DTYPE)
    task["kind"] = np.where(table.is_flow, K.TK_FLOW, K.TK_COMPUTE)
    task["duration_ps"] = table.duration_ps
    task["earliest_ps"] = table.earliest_ps
    task["host"] = table.host
    task["deps_left"] = table.n_deps
    task["qrow"] = -1
    task["qrow"][table.queues.task] = np.arange(len(table.queues.task))
    task["start_ps"] = -1
    task["finish_ps"] = -1
    return task


def _trace_rows(cfg, n_flows: int, n_ports: int) -> int:
    """Trace buffer rows: room for many samples between flushes (0 without traces)."""
    if cfg[K.CFG_TRACE] == 0:
        return 0
    per_sample = (n_flows if cfg[K.CFG_TRACE] & K.TRACE_RATE_ON else 0) + (
        n_ports if cfg[K.CFG_TRACE] & K.TRACE_QUEUE_ON else 0
    )
    return max(1 << 16, 64 * per_sample)


def _new_qps(n: int) -> np.ndarray:
    qp = np.zeros(n, QP_DTYPE)
    qp["flow"] = -1
    return qp


def _new_packets(n: int) -> np.ndarray:
    pkt = np.zeros(n, PKT_DTYPE)
    pkt["kind"] = K.PK_FREE
    pkt["qp"] = -1
    pkt["nxt"] = -1
    return pkt


def ecmp_hashes(scenario: Scenario, workload: Workload) -> np.ndarray:
    """Each flow's ECMP hash, seeded: a job's flows from the job's own stream (workload/jobs.py),
    so that they take the same paths alone as among other jobs."""
    F = len(workload.flows)
    if workload.job is None:
        return streams.rng(scenario.seed, streams.HASHES).integers(0, 2**62, F, dtype=np.int64)
    hashes = np.zeros(F, np.int64)
    job = workload.job[:F]
    for i, part in enumerate(workload.jobs):
        mine = job == i
        rng = np.random.default_rng(job_seed(scenario, part.name).spawn(1)[0])
        hashes[mine] = rng.integers(0, 2**62, int(mine.sum()), dtype=np.int64)
    return hashes


def connections(queue_pair: str, posted: np.ndarray) -> np.ndarray:
    """Each flow's connection id for the engine (network.nic.queue_pair): flows from one NIC port to
    one destination at one priority with the same id go in order, one queue pair after the other;
    -1 is a queue pair of its own. ``posted``: the connection the workload posts each flow on (a
    collective's group and channel), -1 for none."""
    if queue_pair == "flow":
        return np.full(len(posted), -1, np.int32)
    if queue_pair == "connection":
        return np.zeros(len(posted), np.int32)
    return posted.astype(np.int32)


def _flows(
    scenario: Scenario, fabric: Fabric, workload: Workload, route_off, route_ports, rows: list[Cc], job_rows: list[int]
) -> np.ndarray:
    """World.flow: each flow of the workload as it waits to start, with its congestion control's
    row of World.ccp (its job's, cc_rows) and algorithm."""
    table = workload.flows
    F = len(table)
    hashes = ecmp_hashes(scenario, workload)
    flow = np.zeros(F, FLOW_DTYPE)
    flow["src"] = table.src
    flow["dst"] = table.dst
    flow["size_bytes"] = table.size_bytes
    flow["start_ps"] = table.start_ps
    flow["prio"] = table.prio
    flow["conn"] = connections(scenario.network.nic.queue_pair, table.conn)
    flow["ecmp_hash"] = hashes
    flow["nic_port"] = first_hops(
        route_off, route_ports, fabric.n_endpoints, table.src.astype(np.int64), table.dst.astype(np.int64), hashes
    )
    if workload.job is not None:
        flow["cc_row"] = np.asarray(job_rows, np.int16)[workload.job[:F]]
    flow["cc"] = np.array([code(cc.algorithm) for cc in rows], np.int8)[flow["cc_row"]]
    flow["state"] = K.FL_WAITING
    flow["qp"] = -1
    flow["finish_ps"] = -1
    return flow


def grow(world: World) -> World:
    """Double the packet pool and the event heap, keeping every id and event as it is."""
    cap = len(world.pkt)
    pkt = np.concatenate([world.pkt, _new_packets(cap)])
    n_free = int(world.meta[K.M_FREE])
    # the new ids go under the old free ones: allocation continues exactly as before
    free = np.concatenate(
        [np.arange(2 * cap - 1, cap - 1, -1, dtype=np.int32), world.pkt_free[:n_free], np.zeros(cap - n_free, np.int32)]
    )
    world.meta[K.M_FREE] = cap + n_free
    ev = np.zeros(max(2 * len(world.ev), heap_capacity(2 * cap, len(world.port), len(world.qp))), EV_DTYPE)
    ev[: len(world.ev)] = world.ev
    int_rec = np.concatenate([world.int_rec, np.zeros_like(world.int_rec)])
    return world._replace(pkt=pkt, pkt_free=free, ev=ev, int_rec=int_rec)


def grow_qps(world: World) -> World:
    """Double the queue-pair slots (a flow starts and none is free), keeping every slot as it
    is; the trace buffer keeps room for a sample of them all."""
    n = len(world.qp)
    free = np.concatenate([np.arange(2 * n - 1, n - 1, -1, dtype=np.int32), world.qp_free])
    free[n:] = 0  # ST_QP_LOW: no old slot was free
    world.meta[K.M_QP_FREE] = n
    trace = world.trace
    rows = _trace_rows(world.cfg, 2 * n, len(world.port))
    if rows > len(trace):
        trace = np.concatenate([trace, np.zeros((rows - len(trace), K.TR_COLS), np.int64)])
    return world._replace(
        qp=np.concatenate([world.qp, _new_qps(n)]),
        qp_free=free,
        ccs=np.concatenate([world.ccs, np.zeros(n, CC_DTYPE)]),
        timer=np.concatenate([world.timer, np.zeros_like(world.timer)]),
        int_prev=np.concatenate([world.int_prev, np.zeros_like(world.int_prev)]),
        trace=trace,
        irn_bits=np.concatenate([world.irn_bits, np.zeros_like(world.irn_bits)]),
    )


def flows_now(world: World) -> np.ndarray:
    """Every flow's record (FLOW_DTYPE) as of now: a flow still in flight (a run that stopped
    early) takes its counters from its open queue pair. Without such flows, the world's own
    array (not a copy: read it, do not write it)."""
    live = np.flatnonzero(world.flow["qp"] >= 0)
    if not len(live):
        return world.flow
    flow = world.flow.copy()
    qp = world.qp[flow["qp"][live]]
    for name in QP_COUNTERS:
        flow[name][live] = qp[name]
    return flow
