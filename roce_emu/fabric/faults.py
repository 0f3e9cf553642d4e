"""The scenario's ``faults:`` compiled into the engine's link plan and the route epochs.

Every fault becomes timed actions on one port (World.link_plan rows, kinds.LA_*). Link
failures and repairs also change the routing: ``network.routing.convergence_ns`` after
each change, the switches install tables computed without the links down at that
moment. Those tables are computed here, once per distinct set of dead links, so the
engine switches between them with no Python in the loop.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..config.schema import MIN_RATE_GBPS, Fault, Scenario
from ..core import kinds as K
from ..core.state import LINK_PLAN_DTYPE
from ..errors import ScenarioError
from ..units import bps_to_gbps, gbps_to_bps, ns_to_ps
from .. import streams
from .routing import build_routes
from .topology import Fabric

INFINITE_PS = np.iinfo(np.int64).max


@dataclass
class LinkPlan:
    actions: np.ndarray  # LINK_PLAN_DTYPE, in time order
    route_off: np.ndarray  # int64[epochs, rows + 1], absolute offsets into route_ports
    route_ports: np.ndarray  # int32, every epoch's rows one after the other


@dataclass(frozen=True)
class _Window:
    """One fault resolved to a port and a time window [start_ps, end_ps)."""

    index: int
    fault: Fault
    port: int
    peer: int  # the port at the link's other end
    start_ps: int
    end_ps: int  # INFINITE_PS: until the end of the run


def compile_faults(scenario: Scenario, fabric: Fabric, healthy: tuple[np.ndarray, np.ndarray], source: str) -> LinkPlan:
    """The link plan of the scenario's faults, and the route epochs they need after the healthy
    fabric's routes (routing.build_routes); ScenarioError for a name, link or overlap that is wrong."""
    windows = [w for i, fault in enumerate(scenario.faults) for w in _resolve(scenario, i, fault, fabric, source)]
    _refuse_overlaps(windows, source)
    rows: list[tuple[int, int, int, float, int]] = []  # (t_ps, action, port, loss, value)
    for w in windows:
        rows.extend(_actions(w, fabric))
    tables, route_rows = _route_epochs(windows, fabric, healthy, ns_to_ps(scenario.network.routing.convergence_ns))
    rows.extend(route_rows)
    order = sorted(range(len(rows)), key=lambda i: rows[i][0])  # stable: ties keep the file's order
    actions = np.zeros(len(rows), LINK_PLAN_DTYPE)
    for j, i in enumerate(order):
        t_ps, action, port, loss, value = rows[i]
        actions[j] = (t_ps, value, loss, action, port)
    route_off = np.stack([off + sum(len(p) for _, p in tables[:i]) for i, (off, _) in enumerate(tables)])
    route_ports = np.concatenate([ports for _, ports in tables])
    return LinkPlan(actions, route_off, route_ports)


def fabric_links(fabric: Fabric) -> list[int]:
    """Every link of the fabric as `roce-emu topo --links` lists it (not a reduction unit's link
    inside its switch), by its lower port, in port order."""
    return [p for p in range(len(fabric.port_peer)) if p < fabric.port_peer[p] and fabric.port_tier[p] != "unit"]


def chosen_links(scenario: Scenario, i: int, fault: Fault, fabric: Fabric) -> list[int]:
    """The links fault i acts on, by their lower port: its ``fraction`` of the fabric's links
    (rounded half up, at least one), drawn from the scenario's seed; [] for a fault that names
    its link or port."""
    if fault.fraction is None:
        return []
    links = fabric_links(fabric)
    count = max(1, math.floor(fault.fraction * len(links) + 0.5))
    rng = streams.rng(scenario.seed, streams.SLOW_LINK_FRACTION, i)
    return sorted(links[j] for j in rng.choice(len(links), count, replace=False))


def slowed_links(scenario: Scenario, fabric: Fabric) -> list[dict]:
    """The links chosen by the faults with a ``fraction``, each as {fault, link: [a, b],
    rate_gbps} (summary.json names them)."""
    return [
        {
            "fault": i,
            "link": [fabric.names[fabric.port_node[p]], fabric.names[fabric.port_node[fabric.port_peer[p]]]],
            "rate_gbps": bps_to_gbps(_slow_rate_bps(fault, int(fabric.port_rate_bps[p]))),
        }
        for i, fault in enumerate(scenario.faults)
        for p in chosen_links(scenario, i, fault, fabric)
    ]


def _slow_rate_bps(fault: Fault, nominal_bps: int) -> int:
    """A slow_link's rate on a link of nominal rate: rate_gbps, or the nominal rate over factor."""
    if fault.rate_gbps is not None:
        return gbps_to_bps(fault.rate_gbps)
    assert fault.factor is not None  # the schema's _keys_of_kind
    return int(round(nominal_bps / fault.factor))


def _resolve(scenario: Scenario, i: int, fault: Fault, fabric: Fabric, source: str) -> list[_Window]:
    """The fault's windows: one for a named link or port, one per chosen link for a fraction."""
    start = ns_to_ps(fault.at_ns)
    end = ns_to_ps(fault.until_ns) if fault.until_ns is not None else INFINITE_PS
    if fault.fraction is not None:
        ports = chosen_links(scenario, i, fault, fabric)
    else:
        ports = [_named_port(i, fault, fabric, source)]
    floor = gbps_to_bps(MIN_RATE_GBPS)
    if fault.factor is not None and any(_slow_rate_bps(fault, int(fabric.port_rate_bps[p])) < floor for p in ports):
        below = f"it slows a link below {MIN_RATE_GBPS:g} Gb/s"
        raise ScenarioError(source, f"faults.{i}.factor", f"{fault.factor:g} is not allowed: {below}")
    return [_Window(i, fault, p, int(fabric.port_peer[p]), start, end) for p in ports]


def _named_port(i: int, fault: Fault, fabric: Fabric, source: str) -> int:
    """The port of a fault's ``link`` (its first node's end) or ``port``."""
    assert fault.nodes is not None  # a fault without a fraction names its link or port (the schema's _keys_of_kind)
    key = f"faults.{i}.{'link' if fault.link is not None else 'port'}"
    ids = {name: n for n, name in enumerate(fabric.names)}
    nodes = []
    for j, name in enumerate(fault.nodes):
        if name not in ids:
            examples = ", ".join(fabric.names[:2] + fabric.names[fabric.n_endpoints : fabric.n_endpoints + 2])
            raise ScenarioError(
                source,
                f"{key}.{j}",
                f"'{name}' is not allowed: no node of this {fabric.kind} "
                f"has that name (names like {examples}; roce-emu topo SCENARIO --links lists them)",
            )
        nodes.append(ids[name])
    try:
        return fabric.port_towards(nodes[0], nodes[1])
    except KeyError:
        raise ScenarioError(
            source, key, f"{fault.nodes} is not allowed: no link joins {fault.nodes[0]} and {fault.nodes[1]}"
        ) from None


def _target(w: _Window) -> tuple[str, int]:
    """What two faults must not both act on at once: the link (both ports) or the one port."""
    if w.fault.kind == "lossy_port":
        return w.fault.kind, w.port
    return w.fault.kind, min(w.port, w.peer)


def _refuse_overlaps(windows: list[_Window], source: str) -> None:
    seen: dict[tuple[str, int], list[_Window]] = {}
    for w in windows:
        for other in seen.setdefault(_target(w), []):
            if w.start_ps < other.end_ps and other.start_ps < w.end_ps:
                raise ScenarioError(
                    source,
                    f"faults.{w.index}",
                    f"overlaps faults.{other.index}: two {w.fault.kind} "
                    f"faults on the same {'port' if w.fault.kind == 'lossy_port' else 'link'} "
                    "must not overlap in time",
                )
        seen[_target(w)].append(w)


def _actions(w: _Window, fabric: Fabric) -> list[tuple[int, int, int, float, int]]:
    """The fault's start and, if it ends, its end, as (t_ps, action, port, loss, value)."""
    kind = w.fault.kind
    nominal = int(fabric.port_rate_bps[w.port])
    if kind == "link_down":
        start, end = (K.LA_DOWN, 0.0, 0), (K.LA_UP, 0.0, 0)
    elif kind == "slow_link":
        start, end = (K.LA_RATE, 0.0, _slow_rate_bps(w.fault, nominal)), (K.LA_RATE, 0.0, nominal)
    else:
        assert w.fault.loss is not None
        start, end = (K.LA_LOSS, float(w.fault.loss), 0), (K.LA_LOSS, 0.0, 0)
    out = [(w.start_ps, int(start[0]), w.port, start[1], start[2])]
    if w.end_ps != INFINITE_PS:
        out.append((w.end_ps, int(end[0]), w.port, end[1], end[2]))
    return out


def _route_epochs(
    windows: list[_Window], fabric: Fabric, healthy: tuple[np.ndarray, np.ndarray], convergence_ps: int
) -> tuple[list[tuple], list[tuple]]:
    """The route epochs' tables (epoch 0: the healthy fabric's) and the LA_ROUTES rows that install
    them convergence_ps after each change of the set of links down. A change that leaves every
    table as it was (a host's only link: no way round it) installs nothing."""
    downs = [w for w in windows if w.fault.kind == "link_down"]
    changes = sorted({w.start_ps for w in downs} | {w.end_ps for w in downs if w.end_ps != INFINITE_PS})
    tables = [healthy]
    epoch_of: dict[frozenset[int], int] = {frozenset(): 0}  # a dead set seen before (a repair) is not rebuilt
    rows = []
    current = 0
    for t in changes:
        dead = frozenset(p for w in downs if w.start_ps <= t < w.end_ps for p in (w.port, w.peer))
        if dead not in epoch_of:
            table = build_routes(fabric, dead)
            epoch = next(
                (
                    i
                    for i, (off, ports) in enumerate(tables)
                    if np.array_equal(off, table[0]) and np.array_equal(ports, table[1])
                ),
                None,
            )
            if epoch is None:
                epoch = len(tables)
                tables.append(table)
            epoch_of[dead] = epoch
        epoch = epoch_of[dead]
        if epoch != current:
            rows.append((t + convergence_ps, int(K.LA_ROUTES), -1, 0.0, epoch))
            current = epoch
    return tables, rows
