"""Network profiles: sets of model choices that reproduce another simulator's results.

- ``roce_v2`` (the default): real RoCEv2 framing (docs/model.md §6.3), ACKs in the switches'
  control queue, headroom of three link BDPs plus three frames.
- ``hpcc_ns3``: the HPCC ns-3 simulator's choices (docs/importers.md): a 48 B data header, a
  60 B ACK (88 B with HPCC's INT), TIMELY's 8 B timestamp, no preamble or gap; switches queue
  ACKs with data; PFC headroom of exactly 3 x rate x delay; a queue pair per flow
  (``network.nic.queue_pair: flow``).

A profile fills in the keys a scenario leaves out; keys it sets keep their values. One source
of truth: the schema applies ``with_defaults`` and the port records call ``headroom_bytes``.
"""

import copy

from ..core.cc.registry import BY_NAME

PROFILES = ("roce_v2", "hpcc_ns3")
#: the HPCC simulator's header model (custom-header.cc): data header, ACK header before
#: padding, the ACK's minimum size, TIMELY's timestamp
HPCC_DATA_HEADER, HPCC_ACK_HEADER, HPCC_MIN_FRAME, HPCC_TS_BYTES = 48, 46, 60, 8


def with_defaults(network: dict) -> dict:
    """The raw ``network`` mapping with the profile's values where the scenario gives none."""
    if network.get("profile") != "hpcc_ns3":
        return network
    out = copy.deepcopy(network)
    cc = out.get("cc") or {}
    algorithm = cc.get("algorithm", "none") if isinstance(cc, dict) else "none"
    spec = BY_NAME.get(algorithm) if isinstance(algorithm, str) else None
    int_bytes = spec.int_header_bytes if spec is not None else 0
    ts = HPCC_TS_BYTES if algorithm == "timely" else 0
    wire = out.setdefault("wire", {}) if isinstance(out.get("wire", {}), dict) else out["wire"]
    if isinstance(wire, dict):
        wire.setdefault("data_header_bytes", HPCC_DATA_HEADER + ts)
        # the engine adds the INT bytes to the ACK; the simulator pads the whole ACK to 60 B
        wire.setdefault("ack_bytes", max(HPCC_ACK_HEADER + int_bytes + ts, HPCC_MIN_FRAME) - int_bytes)
        wire.setdefault("cnp_bytes", HPCC_MIN_FRAME)
        wire.setdefault("preamble_ifg_bytes", 0)
    switch = out.setdefault("switch", {})
    if isinstance(switch, dict):
        switch.setdefault("ack_queue", "data")
    nic = out.setdefault("nic", {})
    if isinstance(nic, dict):
        nic.setdefault("queue_pair", "flow")  # every flow its own queue pair (RdmaClient per flow)
    return out


def headroom_bytes(profile: str, rate_bps: int, prop_ps: int, max_frame_wire: int) -> int:
    """PFC headroom of a switch port: bytes that can still arrive after XOFF is decided.
    roce_v2: three one-way link BDPs (the HPCC model) plus three maximum frames (the frame in
    service when XOFF is queued, the frame the upstream has started, and the PAUSE's own
    wait), so that zero-delay links stay lossless. hpcc_ns3: the three BDPs alone, as that
    simulator sets them (third.cc)."""
    bdp3 = 3 * rate_bps * prop_ps // (8 * 10**12)
    return bdp3 if profile == "hpcc_ns3" else bdp3 + 3 * max_frame_wire
