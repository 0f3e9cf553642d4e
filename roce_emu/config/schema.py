"""The scenario file format (the public contract): pydantic models with documented defaults.

Units are in the key names. Defaults follow docs/model.md: real RoCEv2 framing (§6.3),
the HPCC ns-3 shared-buffer MMU and PFC (§5.1), its 100G ECN map (§6.1), 1000 B payload.
Checks that need the built topology (host ids in range, buffer vs. headroom) live in
``roce_emu.scenario_checks``.
"""

from typing import Annotated, ClassVar, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationInfo, field_validator, model_validator

from .cc_params import check_params
from ..core.cc.registry import BY_NAME, NAMES
from .profiles import PROFILES, with_defaults
from ..errors import AT

MIB = 1024 * 1024
#: switch buffers, thresholds and reserves: 1 TiB, far beyond any switch, and safe in int64 sums
MAX_BUFFER_BYTES = 1 << 40


def kmin_bytes_msg(kmin: int, kmax: int) -> str:
    return f"kmin_bytes ({kmin}) must not exceed kmax_bytes ({kmax})"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- topology ---------------------------------------------------------------------------
class Link(Strict):
    """Rate and one-way propagation delay of a link (both directions)."""

    rate_gbps: float = Field(100.0, gt=0, le=1e5)
    delay_ns: float = Field(1000.0, ge=0, le=1e9)


class LinkOverride(Strict):
    """Per-tier override of ``topology.link``; an omitted field keeps the default."""

    rate_gbps: Optional[float] = Field(None, gt=0, le=1e5)
    delay_ns: Optional[float] = Field(None, ge=0, le=1e9)


class _TopologyBase(Strict):
    link: Link = Link()
    tiers: dict[str, LinkOverride] = {}
    TIERS: ClassVar[tuple[str, ...]] = ()

    @field_validator("tiers")
    @classmethod
    def _known_tiers(cls, tiers):
        allowed = cls.TIERS
        for name in tiers:
            if name not in allowed:
                raise ValueError(f"unknown tier '{name}' (allowed: {', '.join(allowed)})")
        return tiers

    def tier_link(self, tier: str) -> Link:
        override = self.tiers.get(tier)
        if override is None:
            return self.link
        return Link(
            rate_gbps=override.rate_gbps if override.rate_gbps is not None else self.link.rate_gbps,
            delay_ns=override.delay_ns if override.delay_ns is not None else self.link.delay_ns,
        )


class SingleSwitch(_TopologyBase):
    """All hosts on one switch (a star)."""

    kind: Literal["single_switch"] = "single_switch"
    hosts: int = Field(2, ge=2, le=4096)
    TIERS: ClassVar[tuple[str, ...]] = ("host",)


class FatTree(_TopologyBase):
    """k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores."""

    kind: Literal["fat_tree"] = "fat_tree"
    k: int = Field(4, ge=2, le=64)
    oversubscription: int = Field(1, ge=1, le=16)
    TIERS: ClassVar[tuple[str, ...]] = ("host", "edge_agg", "agg_core")

    @field_validator("k")
    @classmethod
    def _even(cls, k):
        if k % 2:
            raise ValueError("must be an even integer >= 2")
        return k


class LeafSpine(_TopologyBase):
    """Two-tier Clos: every leaf links to every spine once."""

    kind: Literal["leaf_spine"] = "leaf_spine"
    leaves: int = Field(2, ge=1, le=1024)
    spines: int = Field(2, ge=1, le=1024)
    hosts_per_leaf: int = Field(4, ge=1, le=1024)
    TIERS: ClassVar[tuple[str, ...]] = ("host", "leaf_spine")


class WaferLink(Link):
    """A link on a wafer: millimetres of wire, so 100 ns by default."""

    delay_ns: float = Field(100.0, ge=0, le=1e9)


class Fred(_TopologyBase):
    """FRED's wafer-scale fabric (ISCA 2025): ``npus`` in groups of ``group_size`` under L1
    switches, the L1 switches under one L2 switch. NPU-L1 links run at ``npu_rate_gbps``
    (3 TB/s in the paper), L1-L2 links at ``uplink_rate_gbps`` (Fred-A: 1/8 of an NPU's rate;
    Fred-C: a whole group's), I/O controllers' at ``io_rate_gbps``. Delays come from ``link``
    (100 ns by default: on-wafer links are short, and a 3 TB/s port's PFC headroom, three
    times rate x delay, fits a switch's 32 MiB buffer four times over only at such delays) and
    the tiers ``host``, ``uplink`` and ``io``; those set no rate."""

    kind: Literal["fred"] = "fred"
    link: WaferLink = WaferLink()
    npus: int = Field(20, ge=2, le=4096)
    group_size: int = Field(4, ge=1, le=4096)
    npu_rate_gbps: float = Field(24000.0, gt=0, le=1e5)
    uplink_rate_gbps: float = Field(3000.0, gt=0, le=1e5)
    #: I/O controllers (io0, io1, ...), controller i on L1 switch i mod groups
    io_controllers: int = Field(0, ge=0, le=4096)
    io_rate_gbps: float = Field(1024.0, gt=0, le=1e5)  # the paper's 128 GB/s
    TIERS: ClassVar[tuple[str, ...]] = ("host", "uplink", "io")

    @model_validator(mode="after")
    def _whole_groups(self):
        if self.npus % self.group_size:
            raise ValueError(f"{AT}group_size {self.group_size} does not divide npus ({self.npus})")
        return self

    @model_validator(mode="after")
    def _rates_by_name(self):
        rated = [("link", self.link)] + [(f"tiers.{tier}", link) for tier, link in self.tiers.items()]
        for where, link in rated:
            if "rate_gbps" in link.model_fields_set:
                raise ValueError(
                    f"{AT}{where}.rate_gbps {link.rate_gbps:g} is not allowed: fred's rates are npu_rate_gbps, "
                    f"uplink_rate_gbps and io_rate_gbps (link and tiers set delays only)"
                )
        return self


class Torus(_TopologyBase):
    """N-D torus of routers (wrap-around in every dimension), hosts_per_node hosts each."""

    kind: Literal["torus"] = "torus"
    dims: list[Annotated[int, Field(ge=2, le=1024)]] = Field([4, 4], min_length=1, max_length=6)
    hosts_per_node: int = Field(1, ge=1, le=64)
    TIERS: ClassVar[tuple[str, ...]] = ("host", "fabric")


class Mesh(_TopologyBase):
    """Wafer-scale 2-D mesh of routers, no wrap-around, hosts_per_node hosts each."""

    kind: Literal["mesh"] = "mesh"
    dims: list[Annotated[int, Field(ge=1, le=1024)]] = Field([4, 4], min_length=2, max_length=2)
    hosts_per_node: int = Field(1, ge=1, le=64)
    #: I/O controllers (io0, io1, ...) on the edge routers, spread evenly around the edge
    io_controllers: int = Field(0, ge=0, le=4096)
    io_rate_gbps: float = Field(1024.0, gt=0, le=1e5)  # FRED's 128 GB/s
    TIERS: ClassVar[tuple[str, ...]] = ("host", "fabric", "io")

    @field_validator("dims")
    @classmethod
    def _two_routers(cls, dims):
        if dims[0] * dims[1] < 2:
            raise ValueError("needs at least 2 routers")
        return dims


class Dimension(Strict):
    """One dimension of a multi-dimensional fabric: how the NPUs that differ only in this
    coordinate are connected, and that link's rate and one-way delay."""

    size: int = Field(ge=2, le=1024)
    kind: Literal["ring", "fully_connected", "switch"] = "ring"
    rate_gbps: float = Field(100.0, gt=0, le=1e5)
    delay_ns: float = Field(500.0, ge=0, le=1e9)


class MultiDim(_TopologyBase):
    """NPUs on a grid of dimensions (ASTRA-sim / LIBRA style), dimension 0 varying fastest.

    Each NPU is a host behind its own router, which forwards what crosses the NPU. The link
    into the NPU (tier ``host``) defaults to the NPU's total injection bandwidth over all
    dimensions and zero delay. ``nic`` says how the NPU sends: ``per_link`` (default), a NIC
    port for each of its dimension links, at that link's rate, passed onto it cut-through;
    ``shared``, one NIC port on the host link, whose round robin serves the flows of every
    dimension."""

    kind: Literal["multi_dim"] = "multi_dim"
    dims: list[Dimension] = Field(
        default_factory=lambda: [Dimension(size=4), Dimension(size=4, kind="switch")], min_length=1, max_length=6
    )
    nic: Literal["per_link", "shared"] = "per_link"
    TIERS: ClassVar[tuple[str, ...]] = ("host",)


CustomLink = tuple[
    Annotated[int, Field(ge=0)],
    Annotated[int, Field(ge=0)],
    Annotated[float, Field(gt=0, le=1e5)],
    Annotated[float, Field(ge=0, le=1e9)],
]


class Custom(_TopologyBase):
    """Any graph of hosts and switches: nodes 0..N-1, the ``switches`` among them, and
    ``links`` as [a, b, rate_gbps, delay_ns]. Hosts are the other nodes; host ids (what
    flows and collectives name) number them in ascending node order. Each host has one link,
    to a switch. Routing is ECMP over shortest paths through switches (HPCC ns-3 style)."""

    kind: Literal["custom"] = "custom"
    switches: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    links: list[CustomLink] = Field(min_length=1, max_length=1_000_000)
    TIERS: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="after")
    def _a_graph_of_hosts_on_switches(self):
        switches = set(self.switches)
        n = 1 + max(max(switches), max(max(a, b) for a, b, _, _ in self.links))
        degree = [0] * n
        seen = set()
        for i, (a, b, _, _) in enumerate(self.links):
            if a == b:
                raise ValueError(f"{AT}links.{i} links node {a} to itself")
            if (min(a, b), max(a, b)) in seen:
                raise ValueError(f"{AT}links.{i} links nodes {a} and {b} a second time")
            seen.add((min(a, b), max(a, b)))
            if a not in switches and b not in switches:
                raise ValueError(f"{AT}links.{i} joins two hosts ({a} and {b}); hosts hang off switches")
            degree[a] += 1
            degree[b] += 1
        for node in range(n):
            if node not in switches and degree[node] != 1:
                raise ValueError(
                    f"{AT}links host node {node} has {degree[node]} links; each host needs exactly one, "
                    f"to a switch (nodes are 0 to {n - 1}; the switches are listed in switches)"
                )
        if len(switches) == n:
            raise ValueError(f"{AT}switches every node is a switch: the fabric has no host")
        root = list(range(n))

        def find(v):
            while root[v] != v:
                root[v] = root[root[v]]
                v = root[v]
            return v

        for a, b, _, _ in self.links:
            root[find(a)] = find(b)
        apart = [v for v in range(n) if find(v) != find(0)]
        if apart:
            raise ValueError(f"{AT}links node {apart[0]} is not connected to node 0")
        return self

    @property
    def n_nodes(self) -> int:
        return 1 + max(max(self.switches), max(max(a, b) for a, b, _, _ in self.links))


Topology = Annotated[
    Union[SingleSwitch, FatTree, LeafSpine, Fred, Torus, Mesh, MultiDim, Custom], Field(discriminator="kind")
]
TOPOLOGY_KINDS = ("single_switch", "fat_tree", "leaf_spine", "fred", "torus", "mesh", "multi_dim", "custom")
#: topology kinds read from another tool's file, and the keys such a section takes
FILE_TOPOLOGY_KINDS = {"astra_sim": ("kind", "file", "link", "tiers"), "ns3": ("kind", "file")}


def input_path(name: str, info: ValidationInfo) -> str:
    """A file a scenario names, relative to the scenario file's folder (the validation context's
    ``base_dir``; the working directory when the scenario did not come from a file)."""
    from pathlib import Path

    path = Path(name).expanduser()
    base = (info.context or {}).get("base_dir")
    return str(path if path.is_absolute() or base is None else Path(base) / path)


def expand_file_topology(section, info: ValidationInfo):
    """``topology: {kind: astra_sim, file: ...}`` becomes the multi_dim section it describes
    (roce_emu/importers/astra_sim.py), ``{kind: ns3, file: ...}`` the custom one
    (roce_emu/importers/ns3.py); errors in that file name the file itself."""
    if (
        not isinstance(section, dict)
        or not isinstance(section.get("kind"), str)
        or section["kind"] not in FILE_TOPOLOGY_KINDS
    ):
        return section
    allowed = FILE_TOPOLOGY_KINDS[section["kind"]]
    for key in section:
        if key not in allowed:
            raise ValueError(f"{AT}{key} unknown key '{key}' (allowed: {', '.join(allowed)})")
    if not isinstance(section.get("file"), str):
        raise ValueError(f"{AT}file required: the path of the {section['kind']} topology file")
    path = input_path(section["file"], info)
    if section["kind"] == "ns3":
        from ..importers.ns3 import read_topology

        return read_topology(path).section()
    from ..importers.astra_sim import topology_section

    extra = {k: v for k, v in section.items() if k not in ("kind", "file")}
    return topology_section(path, extra)


# ---- network ----------------------------------------------------------------------------
class Wire(Strict):
    """Frame sizes. Defaults: RoCEv2 over IPv4 without VLAN (docs/model.md §6.3)."""

    data_header_bytes: int = Field(62, ge=1, le=4096)
    ack_bytes: int = Field(66, ge=1, le=4096)
    cnp_bytes: int = Field(78, ge=1, le=4096)
    pfc_bytes: int = Field(64, ge=1, le=4096)
    preamble_ifg_bytes: int = Field(20, ge=0, le=4096)


class Pfc(Strict):
    """Priority flow control on the switches' ingress queues (HPCC ns-3 MMU, docs/model.md §5.1)."""

    enabled: StrictBool = True
    reserve_bytes: int = Field(4096, ge=0, le=MAX_BUFFER_BYTES)
    headroom_bytes: Optional[int] = Field(None, ge=0, le=MAX_BUFFER_BYTES)
    alpha_shift: int = Field(3, ge=0, le=20)
    resume_offset_bytes: int = Field(3072, ge=0, le=MAX_BUFFER_BYTES)


class Ecn(Strict):
    """RED marking on the egress queue at dequeue: 0 below Kmin, Pmax at Kmax, 1 above.

    An omitted threshold takes the congestion-control algorithm's default (core/cc/registry.py)."""

    enabled: StrictBool = True
    kmin_bytes: Optional[int] = Field(None, ge=0, le=MAX_BUFFER_BYTES)
    kmax_bytes: Optional[int] = Field(None, ge=0, le=MAX_BUFFER_BYTES)
    pmax: Optional[float] = Field(None, ge=0, le=1)
    scale_with_rate: StrictBool = True
    reference_rate_gbps: float = Field(100.0, gt=0)

    def resolved(self, algorithm: str) -> tuple[int, int, float]:
        """(kmin_bytes, kmax_bytes, pmax) at the reference rate, defaults filled in."""
        kmin, kmax, pmax = BY_NAME[algorithm].ecn
        return (
            kmin if self.kmin_bytes is None else self.kmin_bytes,
            kmax if self.kmax_bytes is None else self.kmax_bytes,
            pmax if self.pmax is None else self.pmax,
        )


class Switch(Strict):
    buffer_bytes: int = Field(32 * MIB, ge=1, le=MAX_BUFFER_BYTES)
    pfc: Pfc = Pfc()
    ecn: Ecn = Ecn()
    #: where switches queue ACKs and NACKs: the strict-priority control queue, or with their
    #: flow's data (buffered, paused by PFC, as the HPCC ns-3 simulator's switches do)
    ack_queue: Literal["control", "data"] = "control"
    #: in_network collectives: chunks a switch's reduction holds at once; a chunk beyond them
    #: waits at its senders until the oldest one has been sent down (docs/in_network.md)
    reduction_slots: int = Field(16, ge=1, le=1 << 20)


class Nic(Strict):
    """The RDMA NIC. ``ack_every_packets``: the receiver acknowledges every this many in-order
    packets, and always a flow's last packet and a packet whose congestion mark it echoes; 1
    (every packet) is the HPCC ns-3 simulator's default. More coalesces ACKs as hardware does.

    ``queue_pair``: ``flow`` (default), every flow has a queue pair of its own, and the NIC port
    serves those with data round-robin; ``connection``, flows from one NIC port to one
    destination at one priority go in order, as NCCL posts a ring's steps on one connection:
    a flow joins the round robin once the one before it has sent its last packet."""

    rto_ns: float = Field(1_000_000.0, gt=0, le=1e12)
    nack_interval_ns: float = Field(500_000.0, ge=0, le=1e12)
    data_priority: int = Field(3, ge=1, le=7)
    ack_every_packets: int = Field(1, ge=1, le=1_000_000)
    queue_pair: Literal["flow", "connection"] = "flow"


class Cc(Strict):
    """The congestion-control algorithm of every sender, and overrides of its parameters by name."""

    algorithm: Literal[NAMES] = "none"  # type: ignore[valid-type]  # the registry's names, built at import
    params: dict[str, Union[bool, int, float, str]] = {}

    @model_validator(mode="after")
    def _known_params(self):
        check_params(self.algorithm, self.params)
        return self


class Routing(Strict):
    """How the switches react to a link failure or repair: the new tables take effect
    convergence_ns after the change (fast hardware repair is well under a millisecond;
    BGP with BFD takes tens to hundreds)."""

    convergence_ns: float = Field(100_000.0, ge=0, le=1e15)


class Network(Strict):
    #: a set of model choices (config/profiles.py): roce_v2, or hpcc_ns3 to match that simulator
    profile: Literal[PROFILES] = "roce_v2"  # type: ignore[valid-type]  # profiles.py's names
    mtu_bytes: int = Field(1000, ge=64, le=65536)
    wire: Wire = Wire()
    switch: Switch = Switch()
    nic: Nic = Nic()
    cc: Cc = Cc()
    routing: Routing = Routing()

    @property
    def frame_bytes(self) -> int:
        """A full data frame on the wire: MTU, header, preamble and gap."""
        return self.mtu_bytes + self.wire.data_header_bytes + self.wire.preamble_ifg_bytes

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data):
        return with_defaults(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _data_larger_than_ack(self):
        if self.mtu_bytes + self.wire.data_header_bytes <= self.wire.ack_bytes:
            raise ValueError(
                f"{AT}mtu_bytes {self.mtu_bytes} is not allowed: a full data frame (mtu_bytes + "
                f"wire.data_header_bytes) must be larger than wire.ack_bytes ({self.wire.ack_bytes})"
            )
        return self

    @model_validator(mode="after")
    def _ecn_ordered(self):
        kmin, kmax, _ = self.switch.ecn.resolved(self.cc.algorithm)
        if kmin > kmax:
            raise ValueError(f"{AT}switch.ecn {kmin_bytes_msg(kmin, kmax)}")
        return self


# ---- workload ---------------------------------------------------------------------------
MAX_FLOW_BYTES = 1 << 50
CollectiveKind = Literal["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]
#: every collective algorithm; which kinds each one runs is workload.collectives.ALGORITHMS
CollectiveAlgorithm = Literal["ring", "halving_doubling", "direct", "hierarchical", "hierarchical_bidir", "in_network"]


class Flow(Strict):
    src: int = Field(ge=0)
    dst: int = Field(ge=0)
    bytes: int = Field(ge=1, le=MAX_FLOW_BYTES)
    start_ns: float = Field(0.0, ge=0, le=1e15)
    priority: Optional[int] = Field(None, ge=1, le=7)


PATTERN_KINDS = ("all_to_all", "permutation", "incast", "neighbours", "weight_streaming")


class Pattern(Strict):
    """A traffic pattern expanded into flows over ``hosts`` (default: all hosts). ``poisson``
    is background traffic: flows arrive at ``load`` of each host's link on average during
    ``duration_ns``, with sizes drawn from ``cdf`` (a shipped distribution or a file,
    workload/background.py); the other kinds send ``bytes`` per flow. ``weight_streaming``
    sends them from every I/O controller to each of its NPUs (those of ``hosts`` nearest to it)
    at once."""

    kind: Literal["all_to_all", "permutation", "incast", "neighbours", "poisson", "weight_streaming"]
    bytes: Optional[int] = Field(None, ge=1, le=MAX_FLOW_BYTES)
    start_ns: float = Field(0.0, ge=0, le=1e15)
    hosts: Optional[list[Annotated[int, Field(ge=0)]]] = None
    dst: Optional[int] = Field(None, ge=0)
    load: Optional[float] = Field(None, gt=0, le=1)
    cdf: Optional[str] = Field(None, min_length=1, max_length=4096)
    duration_ns: Optional[float] = Field(None, gt=0, le=1e15)

    @field_validator("cdf")
    @classmethod
    def _beside_scenario(cls, cdf, info: ValidationInfo):
        from ..workload.background import BUILTIN

        return cdf if cdf is None or cdf in BUILTIN else input_path(cdf, info)

    @model_validator(mode="after")
    def _keys_of_kind(self):
        poisson = ("load", "cdf", "duration_ns")
        needs = poisson if self.kind == "poisson" else ("bytes",)
        for key in ("bytes", *poisson):
            given = getattr(self, key) is not None
            if key in needs and not given:
                raise ValueError(f"{AT}{key} is required by kind '{self.kind}' (it needs: {', '.join(needs)})")
            if key not in needs and given:
                raise ValueError(f"{AT}{key} is not used by kind '{self.kind}' (it needs: {', '.join(needs)})")
        return self


NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"


class CollectiveSpec(Strict):
    """A collective over ``hosts`` (all hosts by default); ``bytes`` is the per-rank buffer
    (NCCL's convention), cut into ``chunks`` that pipeline through the steps and phases."""

    name: Optional[str] = Field(None, pattern=NAME_PATTERN, max_length=100)
    kind: CollectiveKind
    algorithm: CollectiveAlgorithm = "ring"
    bytes: int = Field(ge=1, le=MAX_FLOW_BYTES)
    hosts: Union[Literal["all"], list[Annotated[int, Field(ge=0)]]] = "all"
    chunks: int = Field(1, ge=1, le=4096)
    after: list[str] = []
    #: hierarchical: the order of dimensions per chunk (workload/themis.py)
    scheduler: Literal["baseline", "themis_fifo", "themis_scf"] = "baseline"


class ComputeSpec(Strict):
    """A compute task of ``duration_ns`` on each of ``hosts`` (or on the one ``host``), after the
    named tasks."""

    name: str = Field(pattern=NAME_PATTERN, max_length=100)
    host: Optional[int] = Field(None, ge=0)
    hosts: Union[Literal["all"], list[Annotated[int, Field(ge=0)]]] = "all"
    duration_ns: float = Field(ge=0, le=1e15)
    after: list[str] = []

    @model_validator(mode="after")
    def _one_host_key(self):
        if self.host is not None:
            if self.hosts != "all":
                raise ValueError("give host or hosts, not both")
            object.__setattr__(self, "hosts", [self.host])
        return self


class LayerComm(Strict):
    """A collective a layer triggers on the critical path, within its tensor-parallel group
    (``group: tp``) or its data-parallel group (``group: dp``, e.g. DLRM's embedding all-to-all)."""

    kind: CollectiveKind
    bytes: int = Field(ge=1, le=MAX_FLOW_BYTES)
    group: Literal["tp", "dp"] = "tp"
    algorithm: CollectiveAlgorithm = "ring"


class Layer(Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=100)
    forward_ns: float = Field(0.0, ge=0, le=1e12)
    backward_ns: float = Field(0.0, ge=0, le=1e12)  # input- and weight-gradient compute
    weight_grad_bytes: int = Field(0, ge=0, le=MAX_FLOW_BYTES)  # all-reduced over the dp group
    forward_comm: Optional[LayerComm] = None
    backward_comm: Optional[LayerComm] = None
    #: memory (roce-emu design --parallel): the layer's parameters on one rank, and the bytes it
    #: keeps for its backward pass over the rank's whole batch (its output, the tensor it hands on)
    params: int = Field(0, ge=0, le=MAX_FLOW_BYTES)
    activation_bytes: int = Field(0, ge=0, le=MAX_FLOW_BYTES)


class Model(Strict):
    """A built-in model whose layers, sizes and compute times roce_emu derives (roce_emu.models)."""

    name: Literal["resnet50", "transformer", "dlrm"]
    batch_per_rank: int = Field(32, ge=1, le=1 << 20)
    device_tflops: float = Field(100.0, gt=0, le=1e6)  # sustained fp16/fp32 throughput per rank
    layers: Optional[int] = Field(None, ge=1, le=1024)  # transformer blocks
    hidden: int = Field(1024, ge=8, le=1 << 20)  # transformer
    sequence: int = Field(512, ge=1, le=1 << 20)  # transformer


class Training(Strict):
    """Training iterations as compute and collectives: forward through the layers (and the
    pipeline stages), backward in reverse, each layer's weight gradients all-reduced over its
    data-parallel group while the backward pass goes on. Ranks are hosts: tensor-parallel
    index fastest, then pipeline stage, then data-parallel replica (Megatron's order). The
    ranks, tp x pp x dp, run on every host of the topology, or on the ones ``hosts`` lists."""

    model: Optional[Model] = None
    layers: list[Layer] = []
    tp: int = Field(1, ge=1, le=4096)
    pp: int = Field(1, ge=1, le=4096)
    dp: Optional[int] = Field(None, ge=1, le=1 << 20)  # default: hosts / (tp * pp)
    #: the hosts the ranks run on, rank r on hosts[r] (default: every host, rank r on host r).
    #: tp x pp x dp must equal their number: list them to leave the other hosts out on purpose
    hosts: Optional[list[Annotated[int, Field(ge=0)]]] = Field(None, min_length=1)
    dp_algorithm: CollectiveAlgorithm = "ring"
    #: hierarchical gradient all-reduces: the order of dimensions per chunk (workload/themis.py)
    scheduler: Literal["baseline", "themis_fifo", "themis_scf"] = "baseline"
    chunks: int = Field(1, ge=1, le=4096)
    pipeline_bytes: int = Field(0, ge=0, le=MAX_FLOW_BYTES)  # activations between stages, each way
    #: each rank's batch is cut into this many micro-batches that pipeline through the stages
    #: (compute, activation collectives and pipeline sends scale down with them)
    micro_batches: int = Field(1, ge=1, le=4096)
    #: the order of a stage's micro-batches: 1f1b (one forward, one backward, after a warm-up of
    #: the stages still ahead; PipeDream-Flush / Megatron) or gpipe (all forwards, then all backwards)
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    #: gradients all-reduced in buckets of at least this many bytes (PyTorch DDP's bucket_cap_mb,
    #: 25 MiB); 0: one all-reduce per layer
    bucket_bytes: int = Field(25 * MIB, ge=0, le=MAX_FLOW_BYTES)
    #: false: a stage's gradient all-reduces run one at a time, in the order their buckets fill,
    #: as NCCL runs the collectives of one process group on one stream (PyTorch DDP);
    #: true: each starts once its bucket is ready, and they share the network
    concurrent_all_reduces: StrictBool = False

    @model_validator(mode="after")
    def _one_source(self):
        if (self.model is None) == (not self.layers):
            raise ValueError("give either model or layers")
        return self


class Chakra(Strict):
    """A Chakra execution trace (MLCommons) as the iteration: ``<prefix>.<rank>.et`` (or
    ``.et.gz``), one file per rank from 0, found relative to the scenario file. Rank r runs on
    host ``ranks[r]`` (default: host r). docs/importers.md gives the mapping."""

    prefix: str = Field(min_length=1, max_length=4096)
    ranks: Optional[list[Annotated[int, Field(ge=0)]]] = None
    #: compute nodes that give FLOPs (num_ops) but no duration run at this rate
    device_tflops: Optional[float] = Field(None, gt=0, le=1e6)
    #: the algorithm of each collective kind (default: ring; direct for all_to_all)
    algorithms: dict[CollectiveKind, CollectiveAlgorithm] = {}

    @field_validator("prefix")
    @classmethod
    def _beside_scenario(cls, prefix, info: ValidationInfo):
        return input_path(prefix, info)


class Workload(Strict):
    flows: list[Flow] = []
    patterns: list[Pattern] = []
    collectives: list[CollectiveSpec] = []
    compute: list[ComputeSpec] = []
    training: Optional[Training] = None
    chakra: Optional[Chakra] = None
    iterations: int = Field(1, ge=1, le=10_000)

    @model_validator(mode="after")
    def _one_iteration_source(self):
        if self.chakra is not None:
            for key in ("collectives", "compute", "training"):
                if getattr(self, key):
                    raise ValueError(
                        f"{AT}chakra the trace is the iteration: give chakra or {key}, not both "
                        f"(flows and patterns may run beside it)"
                    )
        return self


# ---- faults in the modelled network -------------------------------------------------------
FAULT_KINDS = ("link_down", "slow_link", "lossy_port")
#: the keys each kind needs, beside kind, at_ns and until_ns
FAULT_NEEDS = {"link_down": ("link",), "slow_link": ("link", "rate_gbps"), "lossy_port": ("port", "loss")}
NodeName = Annotated[str, Field(min_length=1, max_length=100)]


class Fault(Strict):
    """A fault from at_ns until until_ns (for the rest of the run without it).

    link_down: the link [a, b] carries nothing (the switches reroute after
    network.routing.convergence_ns). slow_link: the link [a, b] runs at rate_gbps both ways.
    lossy_port: node a's port towards b ("port: [a, b]") loses each packet it sends with
    probability loss (data, ACK, NACK and CNP; PFC frames are spared). Nodes are named as
    ``roce-emu topo`` lists them (h0, h1, ... for hosts)."""

    kind: Literal["link_down", "slow_link", "lossy_port"]
    link: Optional[list[NodeName]] = Field(None, min_length=2, max_length=2)
    port: Optional[list[NodeName]] = Field(None, min_length=2, max_length=2)
    at_ns: float = Field(0.0, ge=0, le=1e15)
    until_ns: Optional[float] = Field(None, gt=0, le=1e15)
    rate_gbps: Optional[float] = Field(None, gt=0, le=1e5)
    loss: Optional[float] = Field(None, gt=0, le=1)

    @model_validator(mode="after")
    def _keys_of_kind(self):
        needs = FAULT_NEEDS[self.kind]
        for key in ("link", "port", "rate_gbps", "loss"):
            given = getattr(self, key) is not None
            if key in needs and not given:
                raise ValueError(f"{AT}{key} is required by kind '{self.kind}' (it needs: {', '.join(needs)})")
            if key not in needs and given:
                raise ValueError(f"{AT}{key} is not used by kind '{self.kind}' (it needs: {', '.join(needs)})")
        if self.until_ns is not None and self.until_ns <= self.at_ns:
            raise ValueError(f"{AT}until_ns {self.until_ns:g} is not allowed: it must be after at_ns ({self.at_ns:g})")
        return self

    @property
    def nodes(self) -> list[str]:
        nodes = self.link if self.link is not None else self.port
        assert nodes is not None, "every kind needs link or port (_keys_of_kind)"
        return nodes


# ---- run control and output -----------------------------------------------------------------
class Sim(Strict):
    max_time_ns: float = Field(1e9, gt=0, le=1e15)  # simulated time
    max_events: int = Field(10**10, ge=1, le=10**15)  # about an hour at 3 M events/s
    max_wall_s: float = Field(86_400.0, gt=0, le=1e7)  # wall-clock seconds
    stall_timeout_ns: float = Field(20e6, gt=0, le=1e15)
    slice_events: int = Field(1 << 20, ge=1, le=1 << 40)
    #: off: every packet simulated; exact: skip whole periods in which the network repeats itself,
    #: results identical to off to the picosecond; on: a flow that is steady and alone on its path
    #: sends its packets in trains, within the tolerance docs/fast_forward.md states and tests
    fast_forward: Literal["off", "exact", "on"] = "off"
    #: the longest train (packets) with fast_forward: on
    train_max_packets: int = Field(1024, ge=2, le=4096)


TRACE_KINDS = ("rate", "queue", "pfc")


class Output(Strict):
    dir: Optional[str] = None
    #: sampled time series (rate, queue) and the PFC event log (pfc) written to the run directory
    traces: list[Literal["rate", "queue", "pfc"]] = []
    trace_interval_ns: float = Field(1000.0, ge=1, le=1e12)
    #: rows of the collectives' own flows in flows.csv and tasks.csv (collectives.csv has them all)
    collective_flows: StrictBool = False
    format: Literal["csv", "parquet"] = "csv"  # parquet needs pyarrow
    #: other simulators' output files written beside the tables: ns3 = fct.txt and pfc.txt
    formats: list[Literal["ns3"]] = []

    @property
    def logs_pfc(self) -> bool:
        return "pfc" in self.traces or "ns3" in self.formats


class Scenario(Strict):
    name: str = Field("scenario", pattern=r"^[A-Za-z0-9_.-]+$", max_length=100)
    seed: int = Field(1, ge=0, le=2**63 - 1)
    topology: Topology = SingleSwitch()
    network: Network = Network()
    workload: Workload = Workload()
    sim: Sim = Sim()
    output: Output = Output()
    faults: list[Fault] = Field([], max_length=10_000)

    @field_validator("topology", mode="before")
    @classmethod
    def _file_topology(cls, section, info: ValidationInfo):
        return expand_file_topology(section, info)

    @model_validator(mode="after")
    def _pfc_log_sees_every_frame(self):
        if self.output.logs_pfc and self.sim.fast_forward == "exact":
            raise ValueError(
                f"{AT}sim.fast_forward 'exact' is not allowed with the PFC log: it jumps over repeated PFC frames, "
                "which the log (output.traces: [pfc], output.formats: [ns3]) records one by one: use off or on"
            )
        return self

    @model_validator(mode="after")
    def _stall_after_rto(self):
        if self.sim.stall_timeout_ns <= self.network.nic.rto_ns:
            raise ValueError(
                f"{AT}sim.stall_timeout_ns {self.sim.stall_timeout_ns:g} is not allowed: it must exceed "
                f"network.nic.rto_ns ({self.network.nic.rto_ns:g})"
            )
        return self
