"""Engine arrays -> tidy results: flows.csv rows (with the ideal FCT) and summary.json fields."""

import numpy as np

from .. import __version__
from ..config.cc_params import params_from_engine
from ..core import kinds as K
from ..core.ideal import flow_hops_and_ideal_fcts
from ..core.paths import flow_path
from ..core.state import World
from ..fabric.topology import Fabric
from ..run.world import flows_now
from ..units import format_ps_as_ns, ps_to_ns
from .metrics import io_streaming, size_buckets

FLOW_COLUMNS = (
    "flow_id",
    "src",
    "dst",
    "bytes",
    "start_ns",
    "finish_ns",
    "fct_ns",
    "ideal_fct_ns",
    "slowdown",
    "retransmits",
    "timeouts",
    "packets_sent",
    "packets_dropped",
    "hops",
)


def flow_paths(world: World, f: int) -> tuple[np.ndarray, np.ndarray]:
    """The ports a flow's data and its ACKs cross in the healthy fabric (route epoch 0)."""
    r = world.flow[f]
    n_hosts = int(world.cfg[K.CFG_N_HOSTS])
    port = world.port
    args = (world.route_off[0], world.route_ports, port["node"], port["peer_port"], port["pass_to"], n_hosts)
    fwd = flow_path(*args, int(r["src"]), int(r["dst"]), int(r["ecmp_hash"]))
    rev = flow_path(*args, int(r["dst"]), int(r["src"]), int(r["ecmp_hash"]))
    return fwd, rev


def flow_table(world: World) -> dict[str, np.ndarray]:
    """Every flow's results as numeric columns (times in ps, -1 for none), computed in bulk."""
    flow = flows_now(world)
    cfg = world.cfg
    hops = np.zeros(len(flow), np.int64)
    ideal = np.zeros(len(flow), np.int64)
    int_bytes = K.CC_INT_BYTES[flow["cc"]]
    for extra in np.unique(int_bytes):  # the flows whose packets carry as many INT bytes (HPCC's, or none)
        mine = int_bytes == extra
        hops[mine], ideal[mine] = flow_hops_and_ideal_fcts(
            world.route_off[0],
            world.route_ports,
            world.port["node"],
            world.port["peer_port"],
            world.port["pass_to"],
            int(cfg[K.CFG_N_HOSTS]),
            flow["src"][mine].astype(np.int64),
            flow["dst"][mine].astype(np.int64),
            flow["ecmp_hash"][mine].astype(np.int64),
            flow["size_bytes"][mine].astype(np.int64),
            cfg[K.CFG_MTU],
            cfg[K.CFG_DATA_HDR] + extra,
            cfg[K.CFG_ACK_BYTES] + extra,
            cfg[K.CFG_IFG],
            world.port["nominal_bps"],
            world.port["prop_ps"],
        )
    start = flow["start_ps"].astype(np.int64)
    finish = flow["finish_ps"].astype(np.int64)
    return {
        "flow_id": np.arange(len(flow)),
        "src": flow["src"],
        "dst": flow["dst"],
        "bytes": flow["size_bytes"],
        "start_ps": start,
        "finish_ps": finish,
        "fct_ps": np.where(finish >= 0, finish - start, -1),
        "ideal_ps": ideal,
        "retransmits": flow["retransmits"],
        "timeouts": flow["timeouts"],
        "packets_sent": flow["pkts_sent"],
        "packets_dropped": flow["pkts_dropped"],
        "hops": hops,
    }


def flow_rows(table: dict[str, np.ndarray], select=None) -> list[dict]:
    """flows.csv rows (FLOW_COLUMNS, exact decimal ns) of the flows ``select`` picks (all by
    default: a boolean mask or indices)."""
    picked = (
        np.arange(len(table["flow_id"]))
        if select is None
        else np.flatnonzero(select)
        if np.asarray(select).dtype == bool
        else np.asarray(select)
    )
    columns = {k: v[picked].tolist() for k, v in table.items()}
    rows = []
    for i in range(len(picked)):
        fct, ideal = columns["fct_ps"][i], columns["ideal_ps"][i]
        rows.append(
            {
                "flow_id": columns["flow_id"][i],
                "src": columns["src"][i],
                "dst": columns["dst"][i],
                "bytes": columns["bytes"][i],
                "start_ns": format_ps_as_ns(columns["start_ps"][i]),
                "finish_ns": format_ps_as_ns(columns["finish_ps"][i]),
                "fct_ns": format_ps_as_ns(fct),
                "ideal_fct_ns": format_ps_as_ns(ideal),
                "slowdown": repr(fct / ideal) if fct >= 0 else "",
                "retransmits": columns["retransmits"][i],
                "timeouts": columns["timeouts"][i],
                "packets_sent": columns["packets_sent"][i],
                "packets_dropped": columns["packets_dropped"][i],
                "hops": columns["hops"][i],
            }
        )
    return rows


SIZE_BUCKET_COLUMNS = (
    "bucket",
    "min_bytes",
    "max_bytes",
    "flows",
    "slowdown_mean",
    "slowdown_p50",
    "slowdown_p95",
    "slowdown_p99",
)


def slowdown_by_size(table: dict, select=None) -> list[tuple]:
    """fct_by_size.csv: FCT slowdown (FCT / ideal FCT) per flow-size decile of the finished
    flows ``select`` picks (all by default), the way background-traffic studies report it."""
    picked = np.ones(len(table["flow_id"]), bool) if select is None else np.asarray(select, bool)
    done = picked & (table["fct_ps"] >= 0)
    size = table["bytes"][done].astype(np.int64)
    slowdown = table["fct_ps"][done] / table["ideal_ps"][done]
    rows = []
    for b, (lo, hi, pick) in enumerate(size_buckets(size)):
        s = slowdown[pick]
        rows.append(
            (
                b,
                lo,
                hi,
                int(pick.sum()),
                repr(float(s.mean())),
                *(repr(float(np.percentile(s, q))) for q in (50, 95, 99)),
            )
        )
    return rows


RATE_TRACE_COLUMNS = ("t_ns", "flow_id", "rate_bps", "window_bytes", "acked_bytes")
QUEUE_TRACE_COLUMNS = ("t_ns", "port", "switch", "towards", "queue_bytes")
PFC_TRACE_COLUMNS = ("t_ns", "port", "node", "towards", "priority", "event")


def trace_tables(world: World, fabric: Fabric, trace: np.ndarray, traces=()) -> dict[str, tuple]:
    """traces_rate.csv (sending flows' pacing rate and window), traces_queue.csv (the egress
    queue of every switch port that ever held a packet), long format, from the sampled rows;
    traces_pfc.csv (every PFC frame as it paused or resumed a port) when ``traces`` has pfc."""
    tables: dict[str, tuple] = {}
    mode = int(world.cfg[K.CFG_TRACE])
    t_ns = [format_ps_as_ns(int(t)) or "0" for t in trace[:, 0]]
    if mode & K.TRACE_RATE_ON:  # the engine samples flows in queue-pair order: by time, then flow
        order = np.lexsort((trace[:, 2], trace[:, 1], trace[:, 0]))
        trace = trace[order]
        t_ns = [t_ns[i] for i in order.tolist()]
        rows = [
            (t_ns[i], obj, a, b, c) for i, (kind, obj, a, b, c) in enumerate(trace[:, 1:].tolist()) if kind == K.TR_RATE
        ]
        tables["traces_rate.csv"] = (RATE_TRACE_COLUMNS, rows)
    if mode & K.TRACE_QUEUE_ON:
        queue = trace[:, 1] == K.TR_QUEUE
        busy = set(np.unique(trace[queue & (trace[:, 3] > 0), 2]).tolist())
        node = world.port["node"]
        peer = world.port["peer_port"]
        names = fabric.names
        rows = [
            (t_ns[i], obj, names[node[obj]], names[node[peer[obj]]], a)
            for i, (kind, obj, a, _, _) in enumerate(trace[:, 1:].tolist())
            if kind == K.TR_QUEUE and obj in busy
        ]
        tables["traces_queue.csv"] = (QUEUE_TRACE_COLUMNS, rows)
    if "pfc" in traces:
        node, peer, names = world.port["node"], world.port["peer_port"], fabric.names
        pfc_rows = [
            (t_ns[i], obj, names[node[obj]], names[node[peer[obj]]], a, "pause" if b else "resume")
            for i, (kind, obj, a, b, _) in enumerate(trace[:, 1:].tolist())
            if kind == K.TR_PFC
        ]
        tables["traces_pfc.csv"] = (PFC_TRACE_COLUMNS, pfc_rows)
    return tables


def in_flight_per_flow(world: World) -> np.ndarray:
    """Data packets of each flow still in the network (counted in the packet pool)."""
    live = world.pkt["kind"] == K.PK_DATA
    flows = world.qp["flow"][world.pkt["qp"][live]]  # the flow of each packet's queue pair
    return np.bincount(flows, weights=world.pkt["train_len"][live], minlength=len(world.flow)).astype(np.int64)


def summary(world: World, fabric: Fabric, scenario, outcome, table: dict[str, np.ndarray]) -> dict:
    stats = world.stats
    counters = {
        name: int(stats[i])
        for i, name in enumerate(K.STAT_NAMES)
        if name not in ("now_ps", "events", "last_progress_ps", "skipped_ps")
    }
    switches = slice(fabric.n_endpoints, None)
    done = table["fct_ps"] >= 0
    slowdowns = table["fct_ps"][done] / table["ideal_ps"][done]
    fcts = ps_to_ns(table["fct_ps"][done])
    finishes = world.flow["finish_ps"][world.flow["finish_ps"] >= 0]
    events = int(stats[K.C_EVENTS])
    return {
        "scenario": scenario.name,
        "seed": scenario.seed,
        "version": __version__,
        "status": outcome.status,
        "reason": outcome.reason,
        "topology": fabric.kind,
        "hosts": fabric.n_hosts,
        "switches": fabric.n_switches,
        "links": fabric.n_links,
        "cc_algorithm": scenario.network.cc.algorithm,
        "cc_params": params_from_engine(scenario.network.cc.algorithm, world.ccp[0]),
        "flows": len(table["flow_id"]),
        "sim_time_ns": float(format_ps_as_ns(int(stats[K.C_NOW_PS])) or 0),
        "last_finish_ns": float(format_ps_as_ns(int(finishes.max()))) if len(finishes) else None,
        **counters,
        "data_packets_in_flight": int(in_flight_per_flow(world).sum()),
        "max_switch_buffer_bytes": int(world.node["max_used"][switches].max()),
        "max_queue_bytes": int(world.port["max_q_bytes"][world.port["at_host"] == 0].max()),
        "switch_buffer_bytes": scenario.network.switch.buffer_bytes,
        "mean_fct_ns": float(fcts.mean()) if len(fcts) else None,
        "max_fct_ns": float(fcts.max()) if len(fcts) else None,
        "mean_slowdown": float(slowdowns.mean()) if len(slowdowns) else None,
        "p50_slowdown": float(np.percentile(slowdowns, 50)) if len(slowdowns) else None,
        "p99_slowdown": float(np.percentile(slowdowns, 99)) if len(slowdowns) else None,
        "fast_forward": scenario.sim.fast_forward,
        # true once a packet train was sent, or with the memo: exact jumps repeat a period the engine simulated
        "approximate": int(stats[K.C_TRAINS]) > 0 or scenario.sim.fast_forward == "memo",
        "skipped_ns": float(format_ps_as_ns(int(stats[K.C_FF_PS])) or 0),
        "events": events,
        "wall_s": round(outcome.wall_s, 6),
        "engine_load_s": round(outcome.load_s, 6),
        "events_per_s": round(events / outcome.wall_s, 1) if outcome.wall_s > 0 else None,
        **io_streaming(world, fabric, table),
    }
