"""The fabric as the engine holds it: one record per port (rate, delay, ECN thresholds, PFC
headroom and alpha) and per node (buffer and the PFC shared pool). A switch whose buffer cannot
hold its ports' headroom and reserve is refused here. No Numba."""

import numpy as np

from ..config.profiles import headroom_bytes
from ..config.schema import MIB, Scenario
from ..core.state import NODE_DTYPE, PORT_DTYPE
from ..errors import ScenarioError
from ..units import gbps_to_bps
from .topology import Fabric


def port_records(scenario: Scenario, fabric: Fabric) -> np.ndarray:
    net = scenario.network
    P = len(fabric.port_node)
    is_host_port = fabric.port_node < fabric.n_endpoints  # endpoints (hosts, I/O controllers, units) own NICs
    rate = fabric.port_rate_bps
    ecn = net.switch.ecn
    scale = rate / gbps_to_bps(ecn.reference_rate_gbps) if ecn.scale_with_rate else np.ones(P)
    max_frame = net.frame_bytes
    pfc = net.switch.pfc
    if pfc.headroom_bytes is None:
        headroom = np.array(
            [headroom_bytes(net.profile, int(r), int(d), max_frame) for r, d in zip(rate, fabric.port_prop_ps)],
            np.int64,
        )
    else:
        headroom = np.full(P, pfc.headroom_bytes, np.int64)
    host_rate = rate[[ports[0] for ports in fabric.node_ports[: fabric.n_hosts]]].min()  # the host links
    doublings = np.round(np.log2(np.maximum(rate / host_rate, 1.0))).astype(np.int64)
    port = np.zeros(P, PORT_DTYPE)
    port["node"] = fabric.port_node
    port["peer_port"] = fabric.port_peer
    port["rate_bps"] = rate
    port["nominal_bps"] = rate
    port["prop_ps"] = fabric.port_prop_ps
    port["at_host"] = is_host_port
    port["pass_to"] = fabric.port_pass
    port["in_bps"] = _in_bps(fabric, rate)
    port["cut_through"] = fabric.port_cut_through
    port["tx_pkt"] = -1
    port["tx_train"] = -1
    port["act_head"] = -1
    kmin, kmax, pmax = ecn.resolved(net.cc.algorithm)
    port["kmin_bytes"] = np.round(kmin * scale)
    port["kmax_bytes"] = np.round(kmax * scale)
    port["pmax"] = pmax
    port["headroom_bytes"] = np.where(is_host_port, 0, headroom)
    port["pfc_shift"] = np.maximum(pfc.alpha_shift - doublings, 0)
    return port


def _in_bps(fabric: Fabric, rate: np.ndarray) -> np.ndarray:
    """Per port, the rates of its node's other links that may forward to it, added up: a port
    passes on what arrives by a link whose packets all leave by one port (``port_pass``, a
    multi_dim NIC link's dimension link) only if it is that port. A switch port at least that
    fast never needs a queue (trains.never_queues)."""
    free = fabric.port_pass < 0
    own = np.where(free, rate, 0)
    total = np.bincount(fabric.port_node, weights=own, minlength=fabric.n_nodes)
    fed = total[fabric.port_node] - own
    passed = np.flatnonzero(~free)
    np.add.at(fed, fabric.port_pass[passed], rate[passed])
    return np.round(fed).astype(np.int64)


def node_records(scenario: Scenario, fabric: Fabric, port: np.ndarray, source: str) -> np.ndarray:
    """One record per node. With PFC, every switch port holds headroom and reserve out of its
    switch's buffer; a buffer that cannot hold them is refused, with a size that would do: one
    that keeps the buffer given as the shared pool beside the largest switch's reserves."""
    sw = scenario.network.switch
    node = np.zeros(fabric.n_nodes, NODE_DTYPE)
    node["is_host"][: fabric.n_endpoints] = 1
    node["buffer_bytes"][fabric.n_endpoints :] = sw.buffer_bytes
    node["pfc_free_bytes"][fabric.n_endpoints :] = sw.buffer_bytes
    if not sw.pfc.enabled:
        return node
    reserved = np.zeros(fabric.n_nodes, np.int64)
    for n in range(fabric.n_endpoints, fabric.n_nodes):
        owned = fabric.node_ports[n]
        reserved[n] = int(port["headroom_bytes"][owned].sum()) + sw.pfc.reserve_bytes * len(owned)
    node["pfc_free_bytes"][fabric.n_endpoints :] = sw.buffer_bytes - reserved[fabric.n_endpoints :]
    worst = int(np.argmax(reserved))
    if sw.buffer_bytes <= reserved[worst]:
        suggest = -(-(int(reserved[worst]) + sw.buffer_bytes) // MIB) * MIB
        raise ScenarioError(
            source,
            "network.switch.buffer_bytes",
            f"{sw.buffer_bytes} is not allowed: switch '{fabric.names[worst]}' needs more than {reserved[worst]} "
            f"bytes for PFC headroom and reserve on its {len(fabric.node_ports[worst])} ports; give "
            f"{suggest} (the {sw.buffer_bytes} shared beside them), or shorter links (a port's headroom is "
            f"about 3 x rate x delay; network.switch.pfc.headroom_bytes sets it)",
        )
    return node
