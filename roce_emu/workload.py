"""Workload section -> a flat table of flows (explicit flows first, then expanded patterns)."""
from dataclasses import dataclass

import numpy as np

from .config.schema import Scenario
from .errors import ScenarioError
from .topology import Fabric


@dataclass(frozen=True)
class FlowTable:
    src: np.ndarray  # int32
    dst: np.ndarray  # int32
    size_bytes: np.ndarray  # int64
    start_ps: np.ndarray  # int64
    prio: np.ndarray  # int8

    def __len__(self) -> int:
        return len(self.src)


def ns_to_ps(ns: float) -> int:
    return int(round(ns * 1000))


def build_flows(scenario: Scenario, fabric: Fabric, source: str) -> FlowTable:
    """Expand the workload into flows; check host ids against the fabric."""
    H = fabric.n_hosts
    default_prio = scenario.network.nic.data_priority
    rows: list[tuple[int, int, int, int, int]] = []
    for i, flow in enumerate(scenario.workload.flows):
        for end in ("src", "dst"):
            _check_host(source, f"workload.flows.{i}.{end}", getattr(flow, end), H)
        if flow.src == flow.dst:
            raise ScenarioError(source, f"workload.flows.{i}.dst",
                                f"{flow.dst} is not allowed: a flow needs two different hosts")
        rows.append((flow.src, flow.dst, flow.bytes, ns_to_ps(flow.start_ns), flow.priority or default_prio))
    rng = np.random.default_rng(np.random.SeedSequence(scenario.seed, spawn_key=(1,)))
    for i, pattern in enumerate(scenario.workload.patterns):
        key = f"workload.patterns.{i}"
        hosts = list(range(H)) if pattern.hosts is None else list(pattern.hosts)
        for j, h in enumerate(hosts):
            _check_host(source, f"{key}.hosts.{j}", h, H)
        if len(set(hosts)) != len(hosts) or len(hosts) < 2:
            raise ScenarioError(source, f"{key}.hosts", "needs at least 2 distinct hosts")
        start = ns_to_ps(pattern.start_ns)
        for src, dst in _expand(pattern, hosts, fabric, rng, source, key):
            rows.append((src, dst, pattern.bytes, start, default_prio))
    if not rows:
        raise ScenarioError(source, "workload", "no flows: give workload.flows or workload.patterns")
    cols = list(zip(*rows))
    return FlowTable(src=np.array(cols[0], np.int32), dst=np.array(cols[1], np.int32),
                     size_bytes=np.array(cols[2], np.int64), start_ps=np.array(cols[3], np.int64),
                     prio=np.array(cols[4], np.int8))


def _check_host(source: str, key: str, host: int, n_hosts: int) -> None:
    if not 0 <= host < n_hosts:
        raise ScenarioError(source, key, f"{host} is not allowed: host ids run from 0 to {n_hosts - 1} "
                                         f"on this topology")


def _expand(pattern, hosts, fabric, rng, source, key):
    if pattern.kind == "all_to_all":
        return [(s, d) for s in hosts for d in hosts if s != d]
    if pattern.kind == "incast":
        dst = hosts[0] if pattern.dst is None else pattern.dst
        _check_host(source, f"{key}.dst", dst, fabric.n_hosts)
        return [(s, dst) for s in hosts if s != dst]
    if pattern.kind == "permutation":
        # a random derangement: every host sends to one other and receives from one other
        while True:
            order = rng.permutation(len(hosts))
            if all(order[i] != i for i in range(len(hosts))):
                return [(hosts[i], hosts[order[i]]) for i in range(len(hosts))]
    if pattern.kind == "neighbours":
        return _neighbours(fabric, hosts, source, key)
    raise AssertionError(pattern.kind)


def _neighbours(fabric: Fabric, hosts, source, key):
    """Each host sends to the host on the next router along every dimension (torus/mesh)."""
    if not fabric.dims:
        raise ScenarioError(source, f"{key}.kind", "'neighbours' needs a torus or mesh topology")
    per_node = fabric.n_hosts // int(np.prod(fabric.dims))
    chosen = set(hosts)
    pairs = []
    for h in hosts:
        router = fabric.host_attachment(h)
        coord = fabric.graph.nodes[router]["coord"]
        for d, size in enumerate(fabric.dims):
            nxt = list(coord)
            nxt[d] = coord[d] + 1
            if nxt[d] == size:
                if not fabric.wrap:
                    continue
                nxt[d] = 0
            index = int(np.ravel_multi_index(tuple(nxt), fabric.dims))
            dst = index * per_node + h % per_node
            if dst in chosen and dst != h:
                pairs.append((h, dst))
    return pairs
