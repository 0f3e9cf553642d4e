"""The scenario file format (the public contract): pydantic models with documented defaults.

Units are in the key names. Defaults follow docs/model.md: real RoCEv2 framing (§6.3),
the HPCC ns-3 shared-buffer MMU and PFC (§5.1), its 100G ECN map (§6.1), 1000 B payload.
Checks that need the built topology (host ids in range, buffer vs. headroom) live in
``roce_emu.scenario_checks``.
"""

import warnings
from importlib.util import find_spec
from pathlib import Path
from typing import Annotated, ClassVar, Literal, Optional, Union, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictBool,
    Tag,
    ValidationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from .cc_params import check_params
from ..core.cc.registry import BY_NAME, NAMES
from .profiles import PROFILES, with_defaults
from ..errors import AT

MIB = 1024 * 1024
#: switch buffers, thresholds and reserves: 1 TiB, far beyond any switch, and safe in int64 sums
MAX_BUFFER_BYTES = 1 << 40
#: the slowest rate of a link, in Gb/s: 1 Mb/s. The engine counts bits per second as integers, so
#: a rate under 0.5 b/s would round to 0 and divide by zero; nothing slower than this carries RoCE.
MIN_RATE_GBPS = 1e-3


def kmin_bytes_msg(kmin: int, kmax: int) -> str:
    return f"kmin_bytes ({kmin}) must not exceed kmax_bytes ({kmax})"


class Strict(BaseModel):
    """A section of the scenario: unknown keys are errors; each field's docstring is its description,
    which the scenario reference prints (config/field_docs.py reads it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


# ---- topology ---------------------------------------------------------------------------
class Link(Strict):
    """Rate and one-way propagation delay of a link (both directions)."""

    rate_gbps: float = Field(100.0, ge=MIN_RATE_GBPS, le=1e5)
    """Line rate of the link, each direction."""
    delay_ns: float = Field(1000.0, ge=0, le=1e9)
    """One-way propagation delay."""


class LinkOverride(Strict):
    """Per-tier override of ``topology.link``; an omitted field keeps the default."""

    rate_gbps: Optional[float] = Field(None, ge=MIN_RATE_GBPS, le=1e5)
    """Line rate of this tier's links; null keeps `topology.link.rate_gbps`."""
    delay_ns: Optional[float] = Field(None, ge=0, le=1e9)
    """One-way propagation delay of this tier's links; null keeps `topology.link.delay_ns`."""


class _TopologyBase(Strict):
    link: Link = Link()
    """Rate and delay of every link, unless a tier overrides them."""
    tiers: dict[str, LinkOverride] = {}
    """Per-tier overrides of `link`, by tier name; each kind has its own tiers."""
    TIERS: ClassVar[tuple[str, ...]] = ()
    #: the keys a kind takes its rates from, where ``link`` and ``tiers`` set delays only ("": none)
    RATES_BY_NAME: ClassVar[str] = ""

    @field_validator("tiers")
    @classmethod
    def _known_tiers(cls, tiers):
        allowed = cls.TIERS
        for name in tiers:
            if name not in allowed:
                raise ValueError(f"unknown tier '{name}' (allowed: {', '.join(allowed)})")
        return tiers

    @model_validator(mode="after")
    def _delays_only(self):
        """Refuse a rate in ``link`` or ``tiers`` for a kind whose rates come from keys of its own
        (RATES_BY_NAME)."""
        if not self.RATES_BY_NAME:
            return self
        rated = [("link", self.link)] + [(f"tiers.{tier}", link) for tier, link in self.tiers.items()]
        for where, link in rated:
            if "rate_gbps" in link.model_fields_set:
                raise ValueError(
                    f"{AT}{where}.rate_gbps {link.rate_gbps:g} is not allowed: {self.kind}'s rates are "
                    f"{self.RATES_BY_NAME} (link and tiers set delays only)"
                )
        return self

    @model_serializer(mode="wrap")
    def _without_unused_rates(self, handler: SerializerFunctionWrapHandler):
        """A kind whose rates come from keys of its own is written without ``link`` and ``tiers``
        rates, which it does not use and would refuse when read back (the normalized scenario)."""
        data = handler(self)
        if self.RATES_BY_NAME and isinstance(data, dict):
            for link in [data.get("link"), *(data.get("tiers") or {}).values()]:
                if isinstance(link, dict):
                    link.pop("rate_gbps", None)
        return data

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
    """All hosts on one switch."""
    hosts: int = Field(2, ge=2, le=4096)
    """Number of hosts."""
    TIERS: ClassVar[tuple[str, ...]] = ("host",)


class FatTree(_TopologyBase):
    """k-ary fat-tree: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 cores."""

    kind: Literal["fat_tree"] = "fat_tree"
    """k-ary fat-tree with ECMP over all shortest paths."""
    k: int = Field(4, ge=2, le=64)
    """Switch radix: k pods of k/2 edge and k/2 aggregation switches, (k/2)^2 core switches; even."""
    oversubscription: int = Field(1, ge=1, le=16)
    """Hosts per edge switch = k/2 x oversubscription."""
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
    """Two-tier Clos with ECMP over all shortest paths."""
    leaves: int = Field(2, ge=1, le=1024)
    """Leaf switches."""
    spines: int = Field(2, ge=1, le=1024)
    """Spine switches; each leaf links to each spine once."""
    hosts_per_leaf: int = Field(4, ge=1, le=1024)
    """Hosts under each leaf."""
    TIERS: ClassVar[tuple[str, ...]] = ("host", "leaf_spine")


class WaferLink(Link):
    """A link on a wafer: millimetres of wire, so 100 ns by default."""

    delay_ns: float = Field(100.0, ge=0, le=1e9)
    """One-way propagation delay."""


class Fred(_TopologyBase):
    """FRED's wafer-scale fabric (ISCA 2025): ``npus`` in groups of ``group_size`` under L1
    switches, the L1 switches under one L2 switch. NPU-L1 links run at ``npu_rate_gbps``
    (3 TB/s in the paper), L1-L2 links at ``uplink_rate_gbps`` (Fred-A: 1/8 of an NPU's rate;
    Fred-C: a whole group's), I/O controllers' at ``io_rate_gbps``. Delays come from ``link``
    (100 ns by default: on-wafer links are short, and a 3 TB/s port's PFC headroom, three
    times rate x delay, fits a switch's 32 MiB buffer four times over only at such delays) and
    the tiers ``host``, ``uplink`` and ``io``; those set no rate."""

    kind: Literal["fred"] = "fred"
    """FRED's wafer-scale fabric."""
    link: WaferLink = WaferLink()
    """Link delays (100 ns by default); FRED's rates come from the keys below."""
    npus: int = Field(20, ge=2, le=4096)
    """NPUs (hosts); a multiple of `group_size`."""
    group_size: int = Field(4, ge=1, le=4096)
    """NPUs under each L1 switch."""
    npu_rate_gbps: float = Field(24000.0, ge=MIN_RATE_GBPS, le=1e5)
    """Rate of the NPU-L1 links (FRED's 3 TB/s NPU ports)."""
    uplink_rate_gbps: float = Field(3000.0, ge=MIN_RATE_GBPS, le=1e5)
    """Rate of the L1-L2 links (Fred-A: 1/8 of an NPU's rate)."""
    io_controllers: int = Field(0, ge=0, le=4096)
    """I/O controllers io0, io1, ...; controller i hangs off L1 switch i mod groups."""
    io_rate_gbps: float = Field(1024.0, ge=MIN_RATE_GBPS, le=1e5)
    """Rate of an I/O controller's link (128 GB/s)."""
    TIERS: ClassVar[tuple[str, ...]] = ("host", "uplink", "io")
    RATES_BY_NAME: ClassVar[str] = "npu_rate_gbps, uplink_rate_gbps and io_rate_gbps"

    @model_validator(mode="after")
    def _whole_groups(self):
        if self.npus % self.group_size:
            raise ValueError(f"{AT}group_size {self.group_size} does not divide npus ({self.npus})")
        return self


class Torus(_TopologyBase):
    """N-D torus of routers (wrap-around in every dimension), hosts_per_node hosts each."""

    kind: Literal["torus"] = "torus"
    """N-dimensional torus of routers with wrap-around links; dimension-order routing, the shorter way round."""
    dims: list[Annotated[int, Field(ge=2, le=1024)]] = Field([4, 4], min_length=1, max_length=6)
    """Routers per dimension, up to 6 dimensions."""
    hosts_per_node: int = Field(1, ge=1, le=64)
    """Hosts on each router."""
    TIERS: ClassVar[tuple[str, ...]] = ("host", "fabric")


class Mesh(_TopologyBase):
    """Wafer-scale 2-D mesh of routers, no wrap-around, hosts_per_node hosts each."""

    kind: Literal["mesh"] = "mesh"
    """Wafer-scale 2-D mesh of routers, no wrap-around; dimension-order routing."""
    dims: list[Annotated[int, Field(ge=1, le=1024)]] = Field([4, 4], min_length=2, max_length=2)
    """Routers per dimension: exactly two dimensions, at least 2 routers in all."""
    hosts_per_node: int = Field(1, ge=1, le=64)
    """Hosts on each router."""
    io_controllers: int = Field(0, ge=0, le=4096)
    """I/O controllers io0, io1, ..., spread evenly over the edge routers clockwise from r0_0."""
    io_rate_gbps: float = Field(1024.0, ge=MIN_RATE_GBPS, le=1e5)
    """Rate of an I/O controller's link (FRED's 128 GB/s)."""
    TIERS: ClassVar[tuple[str, ...]] = ("host", "fabric", "io")

    @field_validator("dims")
    @classmethod
    def _two_routers(cls, dims):
        if dims[0] * dims[1] < 2:
            raise ValueError("needs at least 2 routers")
        return dims


#: how a hierarchical collective runs inside one dimension of a multi_dim fabric (workload/dim_algorithms.py)
DimAlgorithm = Literal["ring", "ring_bidir", "direct"]
#: each dimension kind's algorithm by default: what ASTRA-sim's system files choose there (a ring both ways round on a
#: ring, direct on a fully connected dimension), so that a collective uses all of an NPU's links in the dimension, as
#: LIBRA's model assumes
DIM_ALGORITHM_DEFAULT = {"ring": "ring_bidir", "fully_connected": "direct", "switch": "ring"}
#: the dimension kinds each algorithm runs on (direct on a ring would cross NPUs on the way)
DIM_ALGORITHM_KINDS = {
    "ring": ("ring", "fully_connected", "switch"),
    "ring_bidir": ("ring", "fully_connected", "switch"),
    "direct": ("fully_connected", "switch"),
}


class Dimension(Strict):
    """One dimension of a multi-dimensional fabric: how the NPUs that differ only in this
    coordinate are connected, and that link's rate and one-way delay."""

    size: int = Field(ge=2, le=1024)
    """NPUs along this dimension."""
    kind: Literal["ring", "fully_connected", "switch"] = "ring"
    """How the NPUs along this dimension are joined: a ring (a ring of 2 is one link), all to all, or through one
    switch per group."""
    rate_gbps: float = Field(100.0, ge=MIN_RATE_GBPS, le=1e5)
    """Rate of this dimension's links."""
    delay_ns: float = Field(500.0, ge=0, le=1e9)
    """One-way propagation delay of this dimension's links."""

    def links(self) -> int:
        """An NPU's links in this dimension: a ring has two (one if two NPUs), a full mesh size - 1, a switch one."""
        if self.kind == "switch":
            return 1
        if self.kind == "fully_connected":
            return self.size - 1
        return 1 if self.size == 2 else 2


class MultiDim(_TopologyBase):
    """NPUs on a grid of dimensions (ASTRA-sim / LIBRA style), dimension 0 varying fastest.

    Each NPU is a host behind its own router, which forwards what crosses the NPU. The link
    into the NPU (tier ``host``) defaults to the NPU's total injection bandwidth over all
    dimensions and zero delay. ``nic`` says how the NPU sends: ``per_link`` (default), a NIC
    port for each of its dimension links, at that link's rate, passed onto it cut-through;
    ``shared``, one NIC port on the host link, whose round robin serves the flows of every
    dimension."""

    kind: Literal["multi_dim"] = "multi_dim"
    """NPUs on a grid of dimensions (ASTRA-sim / LIBRA style), dimension 0 varying fastest; ECMP over shortest
    paths."""
    dims: list[Dimension] = Field(
        default_factory=lambda: [Dimension(size=4), Dimension(size=4, kind="switch")], min_length=1, max_length=6
    )
    """The dimensions, dimension 0 first."""
    nic: Literal["per_link", "shared"] = "per_link"
    """per_link: a NIC port per dimension link, at that link's rate; shared: one NIC port on the host link, served
    round-robin by the flows of every dimension."""
    dim_algorithms: Union[DimAlgorithm, list[DimAlgorithm], None] = None
    """How hierarchical collectives run inside each dimension: ring (one way round), ring_bidir (half of the data each
    way round), direct (every NPU sends every other its share at once; fully_connected and switch dimensions). One name
    for every dimension or a list with one per dimension; null: ring_bidir on ring, direct on fully_connected, ring on
    switch dimensions (ASTRA-sim's choices, every link of the dimension busy)."""
    TIERS: ClassVar[tuple[str, ...]] = ("host",)

    @model_validator(mode="after")
    def _algorithms_fit(self):
        given = self.dim_algorithms
        if isinstance(given, list) and len(given) != len(self.dims):
            raise ValueError(
                f"{AT}dim_algorithms has {len(given)} entries for {len(self.dims)} dimensions: give one name for all "
                f"or one per dimension (allowed: {', '.join(get_args(DimAlgorithm))})"
            )
        for k, (dim, algorithm) in enumerate(zip(self.dims, self.algorithms())):
            if dim.kind not in DIM_ALGORITHM_KINDS[algorithm]:
                allowed = [a for a, kinds in DIM_ALGORITHM_KINDS.items() if dim.kind in kinds]
                raise ValueError(
                    f"{AT}dim_algorithms '{algorithm}' cannot run on dimension {k} (a {dim.kind}; allowed there: "
                    f"{', '.join(allowed)})"
                )
        return self

    def algorithms(self) -> tuple[str, ...]:
        """The algorithm of each dimension, the defaults filled in."""
        given = self.dim_algorithms
        if given is None:
            return tuple(DIM_ALGORITHM_DEFAULT[d.kind] for d in self.dims)
        if isinstance(given, str):
            return (given,) * len(self.dims)
        return tuple(given)


class RailOptimized(_TopologyBase):
    """A rail-optimised GPU cluster: ``nodes`` servers of ``gpus_per_node`` GPUs. GPU g of every
    node has its own NIC to a leaf of rail g, and an NVLink port into its node's NVSwitch.
    Hosts are GPUs, numbered ``node * gpus_per_node + gpu``. Each GPU is a host behind its own
    router (as a multi_dim NPU with ``nic: per_link``): a NIC port on its NVLink and one on its
    rail link, and one link in, by which both arrive. Same-node traffic goes over the NVSwitch,
    same-rail traffic over the rail's leaves (and the spines between them), cross-rail traffic
    over the spines, or with ``pxn`` over NVLink to the source node's GPU of the destination's
    rail and from there over that rail. ``link`` and the tiers ``rail`` and ``leaf_spine`` set
    delays only; the rates come from the keys below."""

    kind: Literal["rail_optimized"] = "rail_optimized"
    """GPU servers whose GPU g hangs off the leaves of rail g, joined inside a server by an NVSwitch; rail-aware
    routing."""
    nodes: int = Field(4, ge=1, le=1024)
    """Servers."""
    gpus_per_node: int = Field(8, ge=2, le=72)
    """GPUs per server, and the number of rails."""
    nvlink_rate_gbps: float = Field(3600.0, ge=MIN_RATE_GBPS, le=1e5)
    """Each GPU's bandwidth into its server's NVSwitch, each direction (3600: 450 GB/s)."""
    nvlink_delay_ns: float = Field(200.0, ge=0, le=1e9)
    """One-way delay between a GPU and its NVSwitch."""
    nic_rate_gbps: float = Field(400.0, ge=MIN_RATE_GBPS, le=1e5)
    """Rate of each GPU's own NIC, linked to a leaf of its rail."""
    nodes_per_leaf: Optional[int] = Field(None, ge=1, le=1024)
    """Servers whose GPUs of one rail share a leaf; it divides nodes, and a rail spans nodes / nodes_per_leaf
    leaves. Null: all nodes, one leaf per rail."""
    spines: int = Field(8, ge=1, le=1024)
    """Spine switches; every leaf links to every spine once."""
    oversubscription: float = Field(1.0, ge=1, le=64)
    """A leaf's downlink bandwidth (nodes_per_leaf x nic_rate_gbps) over its uplink bandwidth: each of its spines
    links runs at nodes_per_leaf x nic_rate_gbps / (oversubscription x spines). 1: non-blocking; 2 halves the
    uplinks."""
    pxn: StrictBool = False
    """NCCL's PXN: cross-rail traffic moves over NVLink to the source server's GPU of the destination's rail
    first, then over that one rail (no spine when the rail has one leaf)."""
    TIERS: ClassVar[tuple[str, ...]] = ("rail", "leaf_spine")
    RATES_BY_NAME: ClassVar[str] = "nvlink_rate_gbps, nic_rate_gbps and oversubscription"

    @model_validator(mode="after")
    def _whole_leaves(self):
        if self.nodes % self.leaf_size:
            raise ValueError(
                f"{AT}nodes_per_leaf {self.leaf_size} is not allowed: it must divide nodes ({self.nodes}), "
                f"so that every leaf of a rail holds as many servers"
            )
        return self

    @property
    def leaf_size(self) -> int:
        """Servers under each leaf of a rail."""
        return self.nodes if self.nodes_per_leaf is None else self.nodes_per_leaf

    @property
    def leaves_per_rail(self) -> int:
        return self.nodes // self.leaf_size

    @property
    def uplink_rate_gbps(self) -> float:
        """Rate of each leaf-spine link: the leaf's downlinks over oversubscription, shared by the spines."""
        return self.leaf_size * self.nic_rate_gbps / (self.oversubscription * self.spines)


CustomLink = tuple[
    Annotated[int, Field(ge=0)],
    Annotated[int, Field(ge=0)],
    Annotated[float, Field(ge=MIN_RATE_GBPS, le=1e5)],
    Annotated[float, Field(ge=0, le=1e9)],
]


class Custom(_TopologyBase):
    """Any graph of hosts and switches: nodes 0..N-1, the ``switches`` among them, and
    ``links`` as [a, b, rate_gbps, delay_ns]. Hosts are the other nodes; host ids (what
    flows and collectives name) number them in ascending node order. Each host has one link,
    to a switch. Routing is ECMP over shortest paths through switches (HPCC ns-3 style)."""

    kind: Literal["custom"] = "custom"
    """Any graph of hosts and switches."""
    switches: list[Annotated[int, Field(ge=0)]] = Field(min_length=1)
    """The node ids that are switches; the other nodes are hosts, numbered in ascending node order."""
    links: list[CustomLink] = Field(min_length=1, max_length=1_000_000)
    """Links as [a, b, rate_gbps, delay_ns]; each host has exactly one, to a switch."""
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
    Union[SingleSwitch, FatTree, LeafSpine, Fred, Torus, Mesh, MultiDim, RailOptimized, Custom],
    Field(discriminator="kind"),
]
TOPOLOGY_KINDS = (
    "single_switch",
    "fat_tree",
    "leaf_spine",
    "fred",
    "torus",
    "mesh",
    "multi_dim",
    "rail_optimized",
    "custom",
)
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
    """Header bytes of a data frame, on top of its payload (Ethernet 14 + IP 20 + UDP 8 + BTH 12 + ICRC 4 + FCS 4)."""
    ack_bytes: int = Field(66, ge=1, le=4096)
    """Bytes of an ACK or NACK frame."""
    cnp_bytes: int = Field(78, ge=1, le=4096)
    """Bytes of a CNP frame."""
    pfc_bytes: int = Field(64, ge=1, le=4096)
    """Bytes of a PFC PAUSE or RESUME frame."""
    preamble_ifg_bytes: int = Field(20, ge=0, le=4096)
    """Preamble and inter-frame gap: on the wire for every frame, not in buffers."""


class Pfc(Strict):
    """Priority flow control on the switches' ingress queues (HPCC ns-3 MMU, docs/model.md §5.1)."""

    enabled: StrictBool = True
    """Pause upstream senders when a switch's buffer share fills; false: drop what does not fit."""
    reserve_bytes: int = Field(4096, ge=0, le=MAX_BUFFER_BYTES)
    """Buffer reserved for each ingress (port, priority) before it uses the shared pool."""
    headroom_bytes: Optional[int] = Field(None, ge=0, le=MAX_BUFFER_BYTES)
    """Headroom per ingress port for what arrives after XOFF; null: three one-way link BDPs plus three maximum
    frames."""
    alpha_shift: int = Field(3, ge=0, le=20)
    """Dynamic threshold (free shared buffer) >> shift for ports at the hosts' rate, one less per doubling of rate."""
    resume_offset_bytes: int = Field(3072, ge=0, le=MAX_BUFFER_BYTES)
    """XON once the headroom is empty and the share is this far below the threshold."""


class Ecn(Strict):
    """RED marking on the egress queue at dequeue: 0 below Kmin, Pmax at Kmax, 1 above.

    An omitted threshold takes the congestion-control algorithm's default (core/cc/registry.py)."""

    enabled: StrictBool = True
    """Mark packets with ECN."""
    kmin_bytes: Optional[int] = Field(None, ge=0, le=MAX_BUFFER_BYTES)
    """Egress queue below which nothing is marked; null: the algorithm's default."""
    kmax_bytes: Optional[int] = Field(None, ge=0, le=MAX_BUFFER_BYTES)
    """Egress queue from which the marking probability is pmax (always marked above); null: the algorithm's
    default."""
    pmax: Optional[float] = Field(None, ge=0, le=1)
    """Marking probability at kmax_bytes; null: the algorithm's default."""
    scale_with_rate: StrictBool = True
    """Scale the thresholds by port rate / reference_rate_gbps (the HPCC ns-3 ECN map)."""
    reference_rate_gbps: float = Field(100.0, ge=MIN_RATE_GBPS)
    """The port rate at which the thresholds apply as written."""

    def resolved(self, algorithm: str) -> tuple[int, int, float]:
        """(kmin_bytes, kmax_bytes, pmax) at the reference rate, defaults filled in."""
        kmin, kmax, pmax = BY_NAME[algorithm].ecn
        return (
            kmin if self.kmin_bytes is None else self.kmin_bytes,
            kmax if self.kmax_bytes is None else self.kmax_bytes,
            pmax if self.pmax is None else self.pmax,
        )


def _marking(ecn: tuple) -> str:
    kmin, kmax, pmax = ecn
    return f"kmin {kmin} B, kmax {kmax} B, pmax {pmax:g}"


class Switch(Strict):
    """Every switch: its shared buffer, PFC, ECN marking, where ACKs queue, and in-network reduction."""

    buffer_bytes: int = Field(32 * MIB, ge=1, le=MAX_BUFFER_BYTES)
    """Shared buffer per switch (32 MiB)."""
    pfc: Pfc = Pfc()
    """Priority flow control."""
    ecn: Ecn = Ecn()
    """ECN marking."""
    ack_queue: Literal["control", "data"] = "control"
    """Where switches queue ACKs and NACKs: the strict-priority control queue, or with their flow's data (buffered,
    paused by PFC, as the HPCC ns-3 simulator's switches do)."""
    reduction: Literal["streaming", "store_and_forward"] = "streaming"
    """How a switch reduces (in_network, nvls, nvls_tree): streaming, packet by packet as they arrive, each reduced
    packet sent on once every branch's has arrived (SHARP, SwitchML, NVLS); store_and_forward, a whole chunk
    received from every branch before its result is sent on (docs/in_network.md)."""
    reduction_slots: Optional[int] = Field(None, ge=1, le=1 << 20)
    """The switch's aggregation slots. streaming: packets of a reduction a member may send ahead of the results it
    got back (its window; at least one result packet's worth); store_and_forward: chunks a switch's reduction holds
    at once, a chunk beyond them waiting at its senders until the oldest one has been sent down. null: 256 packets
    streaming (a 400 Gb/s link's worth over a 5 us round trip through a two-level tree, 1000-byte packets), 16
    chunks store_and_forward."""

    #: reduction_slots when null, per reduction
    DEFAULT_SLOTS: ClassVar[dict[str, int]] = {"streaming": 256, "store_and_forward": 16}

    @property
    def slots(self) -> int:
        """reduction_slots, or its default for the reduction."""
        return self.reduction_slots or self.DEFAULT_SLOTS[self.reduction]


class Nic(Strict):
    """The RDMA NIC. ``ack_every_packets``: the receiver acknowledges every this many in-order
    packets, and always a flow's last packet and a packet whose congestion mark it echoes; 1
    (every packet) is the HPCC ns-3 simulator's default. More coalesces ACKs as hardware does.

    ``queue_pair``: how flows map onto queue pairs, which the NIC port serves round-robin. ``channel``
    (default): a collective's flows from one rank to one peer on one channel go in order on one
    queue pair, as NCCL posts a channel's steps and chunks on its connection to that peer (one
    connection per communicator, channel and peer); a flow joins the round robin once the one
    before it has sent its last packet. Every other flow (background traffic, point-to-point
    sends, parameter-server pushes, imported ns-3 flows) has a queue pair of its own. ``flow``:
    every flow has a queue pair of its own (HPCC ns-3's model): a ring's next step shares the NIC
    with the previous one when its rank runs late. ``connection``: all flows from one NIC port to
    one destination at one priority go in order, whatever their collective or channel."""

    rto_ns: float = Field(1_000_000.0, gt=0, le=1e12)
    """Retransmission timeout: with no ACK progress for this long, the sender goes back to its last acknowledged
    packet."""
    nack_interval_ns: float = Field(500_000.0, ge=0, le=1e12)
    """At most one NACK per gap per this interval."""
    data_priority: int = Field(3, ge=1, le=7)
    """Priority (PFC class) of data packets unless a flow sets its own; 0 is the control priority."""
    ack_every_packets: int = Field(1, ge=1, le=1_000_000)
    """One ACK per this many in-order packets, and always one for a flow's last packet and for a packet whose
    congestion mark the algorithm echoes."""
    queue_pair: Literal["channel", "flow", "connection"] = "channel"
    """channel: a collective's flows from one rank to one peer on one channel go in order on one queue pair (NCCL's
    connection); other flows have their own. flow: a queue pair per flow. connection: all flows from one NIC port
    to one destination at one priority go in order. The NIC port serves its queue pairs round-robin."""


class Cc(Strict):
    """The congestion-control algorithm of every sender, and overrides of its parameters by name."""

    algorithm: Literal[NAMES] = "none"  # type: ignore[valid-type]  # the registry's names
    """Congestion control of every sender (`roce-emu cc` lists them)."""
    params: dict[str, Union[bool, int, float, str]] = {}
    """Overrides of the algorithm's parameters by name, in the units of the name (`roce-emu cc ALGORITHM` lists
    them)."""

    @model_validator(mode="after")
    def _known_params(self):
        check_params(self.algorithm, self.params)
        return self


class Routing(Strict):
    """How the switches react to a link failure or repair: the new tables take effect
    convergence_ns after the change (fast hardware repair is well under a millisecond;
    BGP with BFD takes tens to hundreds)."""

    convergence_ns: float = Field(100_000.0, ge=0, le=1e15)
    """Time from a link failure or repair until the switches install new tables."""


class Irn(Strict):
    """IRN's loss recovery (network.transport: irn; Mittal et al., SIGCOMM'18, "Revisiting Network
    Support for RDMA", §3): its timeouts and its BDP cap. Defaults: the paper's values, chosen
    there for 40 Gb/s links and kept at higher rates (docs/model.md, "Transport")."""

    rto_low_ns: float = Field(100_000.0, gt=0, le=1e12)
    """Timeout with at most rto_low_packets packets in flight (the paper's RTO_low)."""
    rto_high_ns: float = Field(320_000.0, gt=0, le=1e12)
    """Timeout with more packets in flight (the paper's RTO_high)."""
    rto_low_packets: int = Field(3, ge=0, le=1 << 20)
    """Packets in flight up to which rto_low_ns applies (the paper's N)."""
    bdp_cap_packets: Optional[int] = Field(None, ge=1, le=1 << 16)
    """Packets a flow may have in flight (BDP-FC); null: the bandwidth-delay product of the fabric's longest path
    (its base RTT at the NICs' rate) in MTU-sized packets."""

    @model_validator(mode="after")
    def _low_below_high(self):
        if self.rto_low_ns > self.rto_high_ns:
            raise ValueError(
                f"{AT}rto_low_ns {self.rto_low_ns:g} is not allowed: it must not exceed rto_high_ns "
                f"({self.rto_high_ns:g})"
            )
        return self


#: network.transport's names, the default first (core/kinds.py TRANSPORT_NAMES)
Transport = Literal["go_back_n", "irn"]
#: the mean hold of each jitter source when its mean_ns is left out, and the standard deviation of a normal one as
#: a share of its mean (docs/model.md, "Jitter", gives the sources)
JITTER_DEFAULT_MEAN_NS = {"nic": 100.0, "switch": 50.0}
JITTER_DEFAULT_SD_SHARE = 0.5


class JitterSource(Strict):
    """The extra time one kind of device holds every packet, drawn afresh per packet (network.jitter.seed):
    ``uniform`` on [0, 2 mean], ``exponential`` of that mean, or ``normal`` of that mean and standard deviation
    (a negative draw holds nothing). ``none`` (default) holds nothing and draws nothing."""

    distribution: Literal["none", "uniform", "exponential", "normal"] = "none"
    """The distribution of the hold."""
    mean_ns: Optional[float] = Field(None, ge=0, le=1e9)
    """The mean hold (ns); left out, the literature default of the device (nic 100, switch 50: docs/model.md)."""
    sd_ns: Optional[float] = Field(None, ge=0, le=1e9)
    """normal only: the standard deviation (ns); left out, half the mean."""

    @model_validator(mode="after")
    def _parameters_fit(self):
        if self.distribution != "normal" and self.sd_ns is not None:
            raise ValueError(
                f"{AT}sd_ns {self.sd_ns:g} is not allowed with distribution {self.distribution}: only normal has one"
            )
        if self.distribution == "none" and self.mean_ns is not None:
            raise ValueError(
                f"{AT}mean_ns {self.mean_ns:g} is not allowed without a distribution: set distribution to uniform, "
                "exponential or normal"
            )
        return self

    def resolved(self, device: str) -> tuple[str, float, float]:
        """(distribution, mean ns, standard deviation ns) with the defaults filled in; none if the mean is 0."""
        mean = JITTER_DEFAULT_MEAN_NS[device] if self.mean_ns is None else self.mean_ns
        if self.distribution == "none" or mean == 0:
            return "none", 0.0, 0.0
        sd = mean * JITTER_DEFAULT_SD_SHARE if self.sd_ns is None else self.sd_ns
        return self.distribution, mean, sd if self.distribution == "normal" else 0.0


class Jitter(Strict):
    """Per-packet latency jitter where a fabric has it (core/jitter.py): the NIC's processing and PCIe latency, at
    the NIC that sends a packet and again at the NIC that receives it, and the pipeline latency of every switch a
    packet crosses. The holds of one link keep its packets in order and take nothing from its rate; PFC frames hold
    nothing. Both none (default) is the exact model. Run several seeds (``roce-emu run --seeds N``) for the spread."""

    nic: JitterSource = JitterSource()
    """NIC processing and PCIe: per packet, at the sending and at the receiving NIC."""
    switch: JitterSource = JitterSource()
    """Switch pipeline: per packet, at every switch it crosses."""
    seed: Optional[int] = Field(None, ge=0, le=2**63 - 1)
    """The seed of the engine's per-packet draws (these holds, ECN marks, losses); left out, the scenario's seed,
    which also draws the ECMP hashes and the workload's random choices. Set it to vary the draws alone."""

    @property
    def enabled(self) -> bool:
        return self.nic.resolved("nic")[0] != "none" or self.switch.resolved("switch")[0] != "none"


class Network(Strict):
    """The network's model: frame sizes, switches, NICs, congestion control and rerouting."""

    profile: Literal[PROFILES] = "roce_v2"  # type: ignore[valid-type]  # profiles.py's names
    """A set of model choices for the keys the scenario leaves out: roce_v2, or hpcc_ns3 to match the HPCC ns-3
    simulator (config/profiles.py)."""
    mtu_bytes: int = Field(1000, ge=64, le=65536)
    """Payload per data packet."""
    wire: Wire = Wire()
    """Frame sizes."""
    switch: Switch = Switch()
    """Switch buffer, PFC and ECN."""
    nic: Nic = Nic()
    """The RDMA NIC."""
    cc: Cc = Cc()
    """Congestion control."""
    routing: Routing = Routing()
    """Rerouting after faults."""
    transport: Transport = "go_back_n"
    """Loss recovery of every sender: go_back_n (RoCE: the receiver drops packets out of order, the sender goes
    back to the gap), or irn (selective repeat, a BDP cap on packets in flight and two timeouts; it runs without
    PFC, so switch.pfc.enabled defaults to false with it)."""
    irn: Irn = Irn()
    """IRN's timeouts and BDP cap (transport: irn)."""
    jitter: Jitter = Jitter()
    """Per-packet latency jitter of NICs and switches (none by default)."""

    @property
    def frame_bytes(self) -> int:
        """A full data frame on the wire: MTU, header, preamble and gap."""
        return self.mtu_bytes + self.wire.data_header_bytes + self.wire.preamble_ifg_bytes

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data):
        return with_defaults(data) if isinstance(data, dict) else data

    @model_validator(mode="before")
    @classmethod
    def _irn_without_pfc(cls, data):
        """IRN is meant to run without PFC: with transport irn, switch.pfc.enabled defaults to
        false, and true is an error."""
        if not isinstance(data, dict) or data.get("transport") != "irn":
            return data
        switch = data.get("switch", {})
        pfc = switch.get("pfc", {}) if isinstance(switch, dict) else None
        if not isinstance(pfc, dict):
            return data  # the schema rejects it
        if pfc.get("enabled") is True:
            raise ValueError(
                f"{AT}switch.pfc.enabled true is not allowed with transport 'irn': IRN runs without PFC "
                "(leave it out or set it false)"
            )
        if "enabled" in pfc:
            return data  # false, or what the schema rejects
        return {**data, "switch": {**switch, "pfc": {**pfc, "enabled": False}}}

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
#: every collective algorithm; which kinds each one runs is ALGORITHMS
CollectiveAlgorithm = Literal[
    "ring",
    "halving_doubling",
    "direct",
    "hierarchical",
    "hierarchical_bidir",
    "in_network",
    "tree",
    "nvls",
    "nvls_tree",
]
#: the algorithms each collective kind runs by (workload/collectives.py builds them)
ALGORITHMS = {
    "all_reduce": get_args(CollectiveAlgorithm),  # every algorithm runs All-Reduce
    "reduce_scatter": ("ring", "direct", "in_network", "nvls"),
    "all_gather": ("ring", "direct", "in_network", "nvls"),
    "all_to_all": ("direct", "ring"),
}
#: the flow-size distributions shipped with roce-emu, by name (workload/traffic_cdf/NAME.csv)
SHIPPED_CDFS = tuple(sorted(p.stem for p in (Path(__file__).parents[1] / "workload" / "traffic_cdf").glob("*.csv")))


class Flow(Strict):
    """One flow from host ``src`` to host ``dst``."""

    src: int = Field(ge=0)
    """Sending host id."""
    dst: int = Field(ge=0)
    """Receiving host id."""
    bytes: int = Field(ge=1, le=MAX_FLOW_BYTES)
    """Bytes to send."""
    start_ns: float = Field(0.0, ge=0, le=1e15)
    """Start time."""
    priority: Optional[int] = Field(None, ge=1, le=7)
    """Data priority; null: `network.nic.data_priority`."""


PATTERN_KINDS = ("all_to_all", "permutation", "incast", "neighbours", "weight_streaming")


class Pattern(Strict):
    """A traffic pattern expanded into flows over ``hosts`` (default: all hosts). ``poisson``
    is background traffic: flows arrive at ``load`` of each host's link on average during
    ``duration_ns``, with sizes drawn from ``cdf`` (a shipped distribution or a file,
    workload/background.py); the other kinds send ``bytes`` per flow. ``weight_streaming``
    sends them from every I/O controller to each of its NPUs (those of ``hosts`` nearest to it)
    at once."""

    kind: Literal["all_to_all", "permutation", "incast", "neighbours", "poisson", "weight_streaming"]
    """all_to_all: every ordered pair; permutation: a random derangement from the seed; incast: every host to dst;
    neighbours: each host to the next router along every dimension; weight_streaming: every I/O controller to
    each of its hosts; poisson: background traffic."""
    bytes: Optional[int] = Field(None, ge=1, le=MAX_FLOW_BYTES)
    """Bytes per flow (every kind but poisson)."""
    start_ns: float = Field(0.0, ge=0, le=1e15)
    """Start time of the flows (of the arrivals, for poisson)."""
    hosts: Optional[list[Annotated[int, Field(ge=0)]]] = None
    """The hosts taking part; null: all."""
    dst: Optional[int] = Field(None, ge=0)
    """incast: the receiver; null: the first of hosts."""
    load: Optional[float] = Field(None, gt=0, le=1)
    """poisson: offered load, a fraction of each host's link on average."""
    cdf: Optional[str] = Field(None, min_length=1, max_length=4096)
    """poisson: flow-size distribution, websearch, fb_hadoop, ali_storage, google_rpc, or a file of `size_bytes
    cumulative_percent` rows relative to the scenario."""
    duration_ns: Optional[float] = Field(None, gt=0, le=1e15)
    """poisson: how long flows keep arriving."""

    @field_validator("cdf")
    @classmethod
    def _beside_scenario(cls, cdf, info: ValidationInfo):
        return cdf if cdf is None or cdf in SHIPPED_CDFS else input_path(cdf, info)

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
    """Name other items' `after` refer to; null: kind + index."""
    kind: CollectiveKind
    """The collective."""
    algorithm: CollectiveAlgorithm = "ring"
    """How it runs; halving_doubling needs 2^k ranks, hierarchical and hierarchical_bidir a multi_dim,
    rail_optimized, torus or mesh fabric, in_network a switched fabric; tree (NCCL's double binary tree) runs
    All-Reduce; nvls (NCCL's NVLink SHARP) reduces in the NVSwitch of one rail_optimized node, nvls_tree
    (All-Reduce) adds the double binary tree per rail across nodes."""
    bytes: int = Field(ge=1, le=MAX_FLOW_BYTES)
    """Per-rank buffer: the All-Reduce and Reduce-Scatter input, the All-Gather output, the All-To-All send buffer."""
    hosts: Union[Literal["all"], list[Annotated[int, Field(ge=0)]]] = "all"
    """The ranks: all hosts, or a list of host ids."""
    chunks: int = Field(1, ge=1, le=4096)
    """The buffer is cut into this many chunks that pipeline through the steps."""
    channels: int = Field(1, ge=1, le=64)
    """NCCL's channels: the buffer is split into this many shares, each run at once as its own ring or tree on its
    own flows (queue pairs); odd channels take the ranks in reverse order."""
    after: list[str] = []
    """Names of collectives or compute this one waits for (each rank for its own part)."""
    scheduler: Literal["baseline", "themis_fifo", "themis_scf"] = "baseline"
    """hierarchical All-Reduce: the order of dimensions per chunk; themis_* balance the dimensions' loads
    (docs/themis.md)."""


class ComputeSpec(Strict):
    """A compute task of ``duration_ns`` on each of ``hosts`` (or on the one ``host``), after the
    named tasks."""

    name: str = Field(pattern=NAME_PATTERN, max_length=100)
    """Name other items' `after` refer to."""
    host: Optional[int] = Field(None, ge=0)
    """The one host it runs on (instead of hosts)."""
    hosts: Union[Literal["all"], list[Annotated[int, Field(ge=0)]]] = "all"
    """The hosts it runs on: all, or a list of host ids."""
    duration_ns: float = Field(ge=0, le=1e15)
    """Compute time on each host."""
    after: list[str] = []
    """Names of collectives or compute this one waits for."""

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
    """The collective."""
    bytes: int = Field(ge=1, le=MAX_FLOW_BYTES)
    """Per-rank buffer."""
    group: Literal["tp", "dp"] = "tp"
    """Over the tensor-parallel or the data-parallel group."""
    algorithm: CollectiveAlgorithm = "ring"
    """Collective algorithm."""


class Layer(Strict):
    """One layer of an explicit training model: its compute, gradients, collectives and memory."""

    name: str = Field(pattern=NAME_PATTERN, max_length=100)
    """Layer name (tasks are named after it)."""
    forward_ns: float = Field(0.0, ge=0, le=1e12)
    """Forward compute time."""
    backward_ns: float = Field(0.0, ge=0, le=1e12)
    """Backward compute time (input and weight gradients)."""
    weight_grad_bytes: int = Field(0, ge=0, le=MAX_FLOW_BYTES)
    """Weight gradients, all-reduced over the data-parallel group."""
    forward_comm: Optional[LayerComm] = None
    """A collective after the forward compute, on the critical path."""
    backward_comm: Optional[LayerComm] = None
    """A collective after the backward compute, on the critical path."""
    params: int = Field(0, ge=0, le=MAX_FLOW_BYTES)
    """Memory for `roce-emu design --parallel`: the layer's parameters on one rank."""
    activation_bytes: int = Field(0, ge=0, le=MAX_FLOW_BYTES)
    """Memory for `roce-emu design --parallel`: the bytes kept for the backward pass over the rank's whole batch."""


class Model(Strict):
    """A built-in model whose layers, sizes and compute times roce_emu derives (roce_emu.models)."""

    name: Literal["resnet50", "transformer", "dlrm"]
    """The built-in model (roce_emu/workload/models.py)."""
    batch_per_rank: int = Field(32, ge=1, le=1 << 20)
    """Samples per rank per iteration."""
    device_tflops: float = Field(100.0, gt=0, le=1e6)
    """Sustained compute throughput per rank; compute time = FLOPs x batch / this."""
    layers: Optional[int] = Field(None, ge=1, le=1024)
    """transformer: blocks; null: the model's default."""
    hidden: int = Field(1024, ge=8, le=1 << 20)
    """transformer: hidden size."""
    sequence: int = Field(512, ge=1, le=1 << 20)
    """transformer: sequence length."""


#: published dimensions of ``model: {preset: ...}`` (docs/model.md §8.5): GPT-3 175B, Brown et al. 2020, Table 2.1;
#: Llama 3 70B, Dubey et al. 2024, Table 3
GPT_PRESETS: dict[str, dict] = {
    "gpt3-175b": {"architecture": "gpt", "layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048, "vocab": 50257},
    "llama3-70b": {
        "architecture": "llama",
        "layers": 80,
        "hidden": 8192,
        "heads": 64,
        "kv_heads": 8,
        "ffn_hidden": 28672,
        "seq_len": 8192,
        "vocab": 128256,
    },
}


class Optimizer(Strict):
    """Mixed-precision Adam and how its state is sharded over the data-parallel group."""

    zero: Literal[0, 1] = 0
    """0: every data-parallel rank keeps the whole optimizer state and all-reduces the gradients; 1 (ZeRO-1, Megatron's
    distributed optimizer): the state is sharded over the data-parallel group, gradients are reduce-scattered and the
    updated parameters all-gathered."""


class GptModel(Strict):
    """A Megatron-style decoder-only transformer (workload/gpt.py, docs/model.md §8.5): tensor-parallel collectives per
    layer and micro-batch, pipeline sends, data-parallel gradient reductions in buckets, compute from 6 x parameters x
    tokens. ``preset`` fills in a published model's dimensions; any key given beside it wins."""

    kind: Literal["gpt"] = "gpt"
    """The model kind (implied by preset)."""
    preset: Optional[Literal["gpt3-175b", "llama3-70b"]] = None
    """A published model's dimensions: gpt3-175b (Brown et al. 2020) or llama3-70b (Dubey et al. 2024)."""
    architecture: Literal["gpt", "llama"] = "gpt"
    """gpt: learned position embeddings, LayerNorm, biases, GELU MLP (2 matrices), input and output embeddings tied;
    llama: rotary positions (no parameters), RMSNorm, no biases, SwiGLU MLP (3 matrices), untied embeddings."""
    layers: int = Field(4, ge=1, le=1024)
    """Transformer layers."""
    hidden: int = Field(1024, ge=8, le=1 << 20)
    """Hidden size h."""
    heads: int = Field(16, ge=1, le=4096)
    """Attention heads (h must be a multiple; tensor parallelism must divide them)."""
    kv_heads: Optional[int] = Field(None, ge=1, le=4096)
    """Key-value heads (grouped-query attention); null: as many as heads."""
    ffn_hidden: Optional[int] = Field(None, ge=1, le=1 << 22)
    """MLP hidden size; null: 4 x hidden."""
    seq_len: int = Field(1024, ge=1, le=1 << 20)
    """Sequence length s in tokens."""
    vocab: int = Field(50257, ge=1, le=1 << 24)
    """Vocabulary size; padded to a multiple of 128 x tp, as Megatron does."""
    micro_batch: int = Field(1, ge=1, le=1 << 16)
    """Sequences per micro-batch b on each data-parallel replica."""
    global_batch: Optional[int] = Field(None, ge=1, le=1 << 24)
    """Sequences per iteration over all replicas; micro-batches = global_batch / (micro_batch x dp); null: one
    micro-batch (micro_batch x dp)."""
    sequence_parallel: StrictBool = False
    """Tensor parallelism's All-Reduces become Reduce-Scatter and All-Gather pairs (Korthikanti et al. 2023)."""
    optimizer: Optimizer = Optimizer()
    """The optimizer's state sharding."""
    device_tflops: float = Field(312.0, gt=0, le=1e6)
    """Peak compute throughput per GPU (312: A100 bf16 dense)."""
    mfu: float = Field(0.5, gt=0, le=1)
    """Model FLOPs utilisation: compute time = FLOPs / (device_tflops x mfu)."""
    device_memory_gb: Optional[float] = Field(None, gt=0, le=1e6)
    """GPU memory; if given, a split whose weights, gradients, optimizer state and activations do not fit is
    refused."""

    PRESETS: ClassVar[dict[str, dict]] = GPT_PRESETS  #: the dimensions ``preset`` names

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data):
        """Fill in the preset's dimensions; an unknown preset is refused naming every kind's presets."""
        if not isinstance(data, dict) or "preset" not in data or data["preset"] is None:
            return data
        known = {**GPT_PRESETS, **MOE_PRESETS}
        if not isinstance(data["preset"], str) or data["preset"] not in known:
            raise ValueError(f"{AT}preset {data['preset']!r} is not allowed (allowed: {', '.join(known)})")
        if data["preset"] in cls.PRESETS:
            return {**cls.PRESETS[data["preset"]], **data}
        return data


#: published dimensions of ``model: {preset: ...}`` for kind moe (docs/model.md §8.6): Mixtral 8x7B, Jiang et al. 2024,
#: Table 1 (its context is 32768 tokens; the preset trains on sequences of 4096)
MOE_PRESETS: dict[str, dict] = {
    "mixtral-8x7b": {
        "architecture": "llama",
        "layers": 32,
        "hidden": 4096,
        "heads": 32,
        "kv_heads": 8,
        "ffn_hidden": 14336,
        "seq_len": 4096,
        "vocab": 32000,
        "experts": 8,
        "top_k": 2,
    },
}


class MoeModel(GptModel):
    """A GPT whose MLPs are mixtures of experts (workload/moe.py, docs/model.md §8.6): each layer's tokens go to their
    top_k of ``experts`` expert MLPs, sharded over ``ep`` ranks, by an all-to-all dispatch and an all-to-all combine,
    forward and backward. ``preset`` fills in a published model's dimensions; any key given beside it wins."""

    kind: Literal["moe"] = "moe"  # type: ignore[assignment]
    """The model kind (implied by preset)."""
    preset: Optional[Literal["mixtral-8x7b"]] = None  # type: ignore[assignment]
    """A published model's dimensions: mixtral-8x7b (Jiang et al. 2024; seq_len 4096)."""
    architecture: Literal["gpt", "llama"] = "llama"
    """The dense part and each expert's MLP: llama (SwiGLU experts, RMSNorm, no biases, as Mixtral) or gpt."""
    experts: int = Field(8, ge=1, le=4096)
    """Experts in each layer's MoE block."""
    top_k: int = Field(2, ge=1, le=4096)
    """Experts each token goes to."""
    ep: int = Field(1, ge=1, le=4096)
    """Expert-parallel size: each layer's experts are sharded over ep ranks of a stage (drawn from its tp x dp ranks,
    tp fastest), which exchange tokens by all-to-all; it must divide tp x dp, and experts must be a multiple."""
    capacity_factor: Optional[float] = Field(None, gt=0, le=1024)
    """Each expert takes at most capacity_factor x tokens x top_k / experts of a rank's tokens per micro-batch (GShard's
    capacity); the rest are dropped; null: no drops (dropless)."""
    imbalance: float = Field(0.0, ge=0, le=16)
    """Zipf exponent of the experts' popularity (0: every expert gets as many tokens); which experts are hot is drawn
    from the scenario's seed, per layer."""
    PRESETS: ClassVar[dict[str, dict]] = MOE_PRESETS


def _model_tag(value) -> str:
    """The union member a ``model`` mapping is: moe when its kind or preset is one, gpt when it gives kind or preset,
    else a built-in name."""
    if isinstance(value, dict):
        if value.get("kind") == "moe" or value.get("preset") in MOE_PRESETS:
            return "moe"
        return "gpt" if "kind" in value or "preset" in value else "builtin"
    if isinstance(value, MoeModel):
        return "moe"
    return "gpt" if isinstance(value, GptModel) else "builtin"


#: the model of workload.training: a built-in one by ``name``, or a model ``kind``
AnyModel = Annotated[
    Union[Annotated[Model, Tag("builtin")], Annotated[GptModel, Tag("gpt")], Annotated[MoeModel, Tag("moe")]],
    Discriminator(_model_tag),
]
MODEL_TAGS = ("builtin", "gpt", "moe")


DDP_FIRST_BUCKET_BYTES = MIB  #: PyTorch DDP's first bucket (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES)


class ParameterServerUpdates(Strict):
    """How the ranks' gradient updates reach the parameter servers (dp_algorithm parameter_server):
    MLFabric's scheduling, aggregation and replication (docs/howto/parameter_servers.md)."""

    scheduling: Literal["fifo", "mlfabric"] = "fifo"
    """fifo: every push starts once its gradients are ready, and the pushes to a server share its port as the
    congestion control lets them; mlfabric: each server takes one push at a time, the whole port reserved for it,
    the shortest pending one first (its bytes over the slower of its two hosts' links; ties in the order they
    became ready)."""
    aggregation: int = Field(1, ge=1, le=4096)
    """k > 1: the ranks in groups of k (by rank); each group's updates are summed at one of its ranks (the one
    computing fastest, by the scenario's stragglers) and reach a server as one: the servers receive 1/k of the
    bytes. 1: every rank pushes its own."""
    deadline_ns: Optional[float] = Field(None, gt=0, le=1e15)
    """scheduling mlfabric: an update that would reach its server later than this after its gradients were ready
    (when the server's port could take it, its bytes' time at the slower link runs past) is dropped: it is never
    sent and its worker goes on (summary.json's dropped_updates); null: none is dropped."""
    replicas: Optional[list[Annotated[int, Field(ge=0)]]] = Field(None, min_length=1)
    """A replica server per server (replicas[j] holds servers[j]'s shard), each a host that is neither a rank nor
    a server; null: none."""
    replication: Literal["direct", "chain"] = "direct"
    """With replicas: direct, each update goes from its rank (or aggregating rank) to the replica too, as to the
    server (MLFabric's); chain, the server forwards what it received to its replica (chain replication: the
    server's port sends every update's bytes once more)."""

    @model_validator(mode="after")
    def _replication_with_replicas(self):
        if self.replication != "direct" and self.replicas is None:
            raise ValueError(f"{AT}replication is for replicas only: give replicas")
        if self.deadline_ns is not None and self.scheduling != "mlfabric":
            raise ValueError(f"{AT}deadline_ns is for scheduling mlfabric only (the server's port drops late updates)")
        return self


class Training(Strict):
    """Training iterations as compute and collectives: forward through the layers (and the
    pipeline stages), backward in reverse, each layer's weight gradients all-reduced over its
    data-parallel group while the backward pass goes on. Ranks are hosts: tensor-parallel
    index fastest, then pipeline stage, then data-parallel replica (Megatron's order; ``placement``). The
    ranks, tp x pp x dp, run on every host of the topology, or on the ones ``hosts`` lists."""

    model: Optional[AnyModel] = None
    """A model (give model or layers): a built-in one by ``name``, or a model ``kind`` (gpt, moe) or ``preset``."""
    layers: list[Layer] = []
    """Explicit layers, in forward order (give model or layers)."""
    tp: int = Field(1, ge=1, le=4096)
    """Tensor-parallel degree."""
    pp: int = Field(1, ge=1, le=4096)
    """Pipeline-parallel degree: the layers are split into pp contiguous stages."""
    dp: Optional[int] = Field(None, ge=1, le=1 << 20)
    """Data-parallel degree; null: hosts / (tp x pp)."""
    hosts: Optional[list[Annotated[int, Field(ge=0)]]] = Field(None, min_length=1)
    """The hosts the ranks run on, rank r on hosts[r]; null: every host, rank r on host r. tp x pp x dp must equal
    their number: list them to leave the other hosts out on purpose."""
    dp_algorithm: Union[CollectiveAlgorithm, Literal["parameter_server"]] = "ring"
    """Algorithm of the gradient All-Reduces; parameter_server: no All-Reduce, each rank pushes its gradients to the
    `servers` and pulls the model from them (docs/howto/parameter_servers.md)."""
    servers: Optional[list[Annotated[int, Field(ge=0)]]] = Field(None, min_length=1)
    """dp_algorithm parameter_server: the hosts that hold the model, in even shards; the ranks run on the other hosts
    (or on `hosts`)."""
    staleness_bound: Optional[int] = Field(0, ge=0, le=10_000)
    """dp_algorithm parameter_server: 0, synchronous (a server sends the next iteration's model once every rank's push
    has reached it); s > 0, a rank starts iteration k once every push of iteration k - 1 - s has reached the servers;
    null: asynchronous, no bound."""
    parameter_server: ParameterServerUpdates = ParameterServerUpdates()
    """dp_algorithm parameter_server: how the updates reach the servers (MLFabric's scheduling, aggregation and
    replication)."""
    scheduler: Literal["baseline", "themis_fifo", "themis_scf"] = "baseline"
    """hierarchical gradient All-Reduces: the order of dimensions per chunk (docs/themis.md)."""
    chunks: int = Field(1, ge=1, le=4096)
    """Chunks of each gradient All-Reduce."""
    channels: int = Field(1, ge=1, le=64)
    """Channels of each gradient All-Reduce (NCCL's channels: shares of its bytes run at once, each its own ring or
    tree)."""
    pipeline_bytes: int = Field(0, ge=0, le=MAX_FLOW_BYTES)
    """Activations sent between pipeline stages, each way, per iteration."""
    micro_batches: int = Field(1, ge=1, le=4096)
    """Each rank's batch is cut into this many micro-batches that pipeline through the stages (compute, activation
    collectives and pipeline sends scale down with them)."""
    schedule: Literal["1f1b", "gpipe"] = "1f1b"
    """Order of a stage's micro-batches: 1f1b (Megatron's one forward, one backward after a warm-up) or gpipe (all
    forwards, then all backwards)."""
    bucket_bytes: int = Field(25 * MIB, ge=0, le=MAX_FLOW_BYTES)
    """Gradients are all-reduced in buckets of at least this many bytes (PyTorch DDP's bucket_cap_mb, 25 MiB); 0:
    one All-Reduce per layer."""
    first_bucket_bytes: Optional[int] = Field(None, ge=0, le=MAX_FLOW_BYTES)
    """The first bucket to fill (the last layers' gradients) closes at this many bytes, so that their All-Reduce
    starts early; null: PyTorch DDP's 1 MiB (at most bucket_bytes) for a built-in model or explicit layers, and
    bucket_bytes for gpt and moe models (Megatron-LM's buckets are all of one size)."""
    placement: Literal["tp_pp_dp", "tp_dp_pp"] = "tp_pp_dp"
    """Rank order, fastest first: tp_pp_dp (Megatron's: tensor-parallel index, then pipeline stage, then replica) or
    tp_dp_pp (replicas of a stage next to each other)."""
    tp_across_nodes: StrictBool = False
    """rail_optimized topology: allow a tensor-parallel group to span servers (refused otherwise)."""
    concurrent_all_reduces: StrictBool = False
    """false: a stage's gradient All-Reduces run one at a time, in the order their buckets fill, as on one NCCL
    stream; true: each starts once its bucket is ready, and they share the network."""

    @model_validator(mode="after")
    def _one_source(self):
        if (self.model is None) == (not self.layers):
            raise ValueError("give either model or layers")
        return self

    @model_validator(mode="after")
    def _servers_with_parameter_server(self):
        if (self.servers is None) != (self.dp_algorithm != "parameter_server"):
            raise ValueError(
                f"{AT}servers is what dp_algorithm parameter_server needs, and only it: give both or neither"
            )
        if self.staleness_bound != 0 and self.dp_algorithm != "parameter_server":
            raise ValueError(f"{AT}staleness_bound is for dp_algorithm parameter_server only")
        if self.parameter_server != ParameterServerUpdates() and self.dp_algorithm != "parameter_server":
            raise ValueError(f"{AT}parameter_server is for dp_algorithm parameter_server only")
        replicas = self.parameter_server.replicas
        if replicas is not None and len(replicas) != len(self.servers or ()):
            raise ValueError(
                f"{AT}parameter_server.replicas has {len(replicas)} hosts for {len(self.servers or ())} servers: "
                f"give one replica per server"
            )
        return self

    def bucket_caps(self) -> tuple[int, int]:
        """The size at which the first gradient bucket closes, and every later one (``first_bucket_bytes``)."""
        if self.first_bucket_bytes is not None:
            return self.first_bucket_bytes, self.bucket_bytes
        if isinstance(self.model, GptModel):  # MoeModel too: Megatron-LM's buckets are of one size
            return self.bucket_bytes, self.bucket_bytes
        return min(DDP_FIRST_BUCKET_BYTES, self.bucket_bytes), self.bucket_bytes


class Chakra(Strict):
    """A Chakra execution trace (MLCommons) as the iteration: ``<prefix>.<rank>.et`` (or
    ``.et.gz``), one file per rank from 0, found relative to the scenario file. Rank r runs on
    host ``ranks[r]`` (default: host r). docs/importers.md gives the mapping."""

    prefix: str = Field(min_length=1, max_length=4096)
    """Trace files `<prefix>.<rank>.et` (or `.et.gz`), relative to the scenario file."""
    ranks: Optional[list[Annotated[int, Field(ge=0)]]] = None
    """Host of each rank; null: rank r on host r."""
    device_tflops: Optional[float] = Field(None, gt=0, le=1e6)
    """Compute nodes that give FLOPs (num_ops) but no duration run at this rate."""
    algorithms: dict[CollectiveKind, CollectiveAlgorithm] = {}
    """Algorithm of each collective kind (default: ring; direct for all_to_all)."""

    @field_validator("prefix")
    @classmethod
    def _beside_scenario(cls, prefix, info: ValidationInfo):
        return input_path(prefix, info)


class Inference(Strict):
    """Distributed inference of a trained model (docs/howto/inference.md): the model's layers,
    neurons split over ``workers`` hosts; requests arrive as a Poisson stream and run the layers
    in order. Before each layer is computed, every worker sends the previous layer's
    activations that other workers need (``partition``, or the ``exchange`` matrices)."""

    layers: list[Annotated[int, Field(ge=1, le=1 << 30)]] = Field(min_length=2, max_length=4096)
    """Neurons of each layer, input first: layer 0 is the request's input, held by the workers like every other
    layer; layers 1 on are computed."""
    workers: int = Field(ge=1, le=4096)
    """How many hosts the model is split over."""
    hosts: Optional[list[Annotated[int, Field(ge=0)]]] = None
    """The hosts the workers run on, worker w on hosts[w]; null: hosts 0 to workers - 1."""
    partition: Literal["contiguous", "repurpose"] = "contiguous"
    """contiguous: each worker holds a contiguous slice of every layer's neurons and, the layers being dense, sends its
    slice of each layer to every other worker; repurpose: neurons rearranged so that only `cross_fraction` of the
    cross-worker edges remain, and each worker sends that fraction of its slice to each other worker."""
    cross_fraction: Optional[float] = Field(None, gt=0, le=1)
    """partition repurpose: the fraction of the cross-worker edges (and of the activations sent) that remain."""
    exchange: Optional[list[list[list[Annotated[int, Field(ge=0)]]]]] = None
    """Instead of a partition: per layer but the last, a workers x workers matrix, [w][v] the activations worker w
    sends to worker v (the diagonal 0); each worker holds a contiguous slice of every layer."""
    batch: int = Field(1, ge=1, le=1 << 20)
    """Inputs per request: every activation is sent batch times."""
    bytes_per_value: int = Field(2, ge=1, le=64)
    """Bytes of one activation value (2: fp16)."""
    requests_per_s: float = Field(gt=0, le=1e12)
    """Mean arrival rate of the Poisson stream of requests."""
    duration_ns: float = Field(gt=0, le=1e15)
    """Requests arrive during this time."""
    start_ns: float = Field(0.0, ge=0, le=1e15)
    """The first request arrives after this time."""
    device_tflops: Optional[float] = Field(None, gt=0, le=1e6)
    """A worker's compute rate: a layer takes 2 x batch x its neurons there x the inputs each reads FLOPs (give this,
    compute_ns or neither: no compute time)."""
    compute_ns: Optional[list[Annotated[float, Field(ge=0, le=1e15)]]] = None
    """Compute time of each computed layer (layers 1 on) on each worker (give this, device_tflops or neither)."""

    @model_validator(mode="after")
    def _consistent(self):
        computed = len(self.layers) - 1
        if self.hosts is not None and len(self.hosts) != self.workers:
            raise ValueError(f"{AT}hosts lists {len(self.hosts)} hosts: give one per worker ({self.workers})")
        if self.partition == "repurpose" and self.cross_fraction is None:
            raise ValueError(
                f"{AT}cross_fraction is required by partition repurpose: the fraction of edges kept, in (0, 1]"
            )
        if self.partition != "repurpose" and self.cross_fraction is not None:
            raise ValueError(f"{AT}cross_fraction is used by partition repurpose only")
        if self.exchange is not None:
            if "partition" in self.model_fields_set:
                raise ValueError(f"{AT}exchange is not allowed beside partition: give one or the other")
            if len(self.exchange) != computed:
                raise ValueError(
                    f"{AT}exchange has {len(self.exchange)} matrices: give one per layer but the last ({computed})"
                )
            for i, matrix in enumerate(self.exchange):
                if len(matrix) != self.workers or any(len(row) != self.workers for row in matrix):
                    raise ValueError(f"{AT}exchange.{i} must be {self.workers} x {self.workers} (workers x workers)")
                if any(matrix[w][w] for w in range(self.workers)):
                    raise ValueError(f"{AT}exchange.{i} sends to the worker itself: its diagonal must be 0")
        if self.device_tflops is not None and self.compute_ns is not None:
            raise ValueError(f"{AT}compute_ns is not allowed beside device_tflops: give one or the other")
        if self.compute_ns is not None and len(self.compute_ns) != computed:
            raise ValueError(
                f"{AT}compute_ns has {len(self.compute_ns)} times: give one per computed layer ({computed})"
            )
        return self


class Workload(Strict):
    """What runs over the fabric. Everything becomes one task DAG: flows, compute tasks and the
    dependencies between them; a flow with predecessors starts when the last one finishes."""

    flows: list[Flow] = []
    """Explicit flows; hosts are numbered 0..H-1."""
    patterns: list[Pattern] = []
    """Traffic patterns, expanded into flows after the explicit ones."""
    collectives: list[CollectiveSpec] = []
    """Collectives."""
    compute: list[ComputeSpec] = []
    """Compute tasks."""
    training: Optional[Training] = None
    """Training iterations as compute and collectives."""
    chakra: Optional[Chakra] = None
    """A Chakra execution trace as the iteration, instead of collectives, compute and training."""
    inference: Optional[Inference] = None
    """Distributed inference: requests through a model split over workers (docs/howto/inference.md)."""
    iterations: int = Field(1, ge=1, le=10_000)
    """The collectives, compute, training or trace run this many times."""

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


JOB_PLACEMENTS = ("packed", "spread", "random")


class Job(Strict):
    """One job of a shared cluster: its own workload on its own hosts. Inside the job, host ids
    are the job's ranks: rank r is the job's r-th host, and ``all`` (or a null ``hosts``) means
    the job's hosts, so the workload reads as if the job ran alone on a fabric of its size."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", max_length=100)
    """Names the job in every table (the `job` column) and in jobs.csv."""
    workload: Workload
    """What the job runs, with host ids counted from 0 within the job (its ranks)."""
    hosts: Optional[list[Annotated[int, Field(ge=0)]]] = Field(None, min_length=1)
    """The fabric hosts the job runs on, rank r on hosts[r] (give hosts or placement)."""
    placement: Optional[Literal["packed", "spread", "random"]] = None
    """How the job's `ranks` hosts are chosen among those no other job uses: packed, the lowest-numbered free hosts
    (filling a leaf before the next); spread, one per leaf (edge switch) in turn; random, seeded by `seed`."""
    ranks: Optional[int] = Field(None, ge=1, le=1 << 20)
    """How many hosts `placement` picks (with hosts: their number, if given)."""
    start_ns: float = Field(0.0, ge=0, le=1e15)
    """Nothing of the job starts before this time; its flows' own start_ns count from it."""
    priority: Optional[int] = Field(None, ge=1, le=7)
    """Priority (PFC class) of the job's data packets, unless a flow sets its own; null: network.nic.data_priority."""
    share: StrictBool = False
    """Let other jobs that also say share: true run on the same hosts (refused otherwise)."""
    cc: Optional[Cc] = None
    """The congestion control of the job's senders, written as network.cc (algorithm and params); null: network.cc.
    The switches serve every job alike: one ECN marking for all traffic (switch.ecn), and INT records on every
    packet that carries the header (HPCC's), so jobs may mix algorithms; one that reacts to ECN marks (dcqcn,
    dctcp) needs the fabric's marking to be its default, or switch.ecn to set it (docs/howto/jobs.md)."""

    @model_validator(mode="after")
    def _hosts_or_placement(self):
        if (self.hosts is None) == (self.placement is None):
            raise ValueError("give either hosts or placement (with ranks)")
        if self.placement is not None and self.ranks is None:
            raise ValueError(f"{AT}ranks is required with placement: how many hosts to place the job on")
        if self.hosts is not None and self.ranks is not None and self.ranks != len(self.hosts):
            raise ValueError(f"{AT}ranks {self.ranks} is not allowed: hosts lists {len(self.hosts)} hosts")
        return self

    @property
    def size(self) -> int:
        """The number of hosts the job runs on."""
        return len(self.hosts) if self.hosts is not None else int(self.ranks or 0)


# ---- faults in the modelled network -------------------------------------------------------
#: the most a straggler may slow its ranks' compute down, or a slow link its rate (and the largest
#: compute jitter cv): beyond it the run models a rank or link that has stopped, which a fault or a
#: shorter hosts list says better
MAX_STRAGGLER_FACTOR = 1000.0
FAULT_KINDS = ("link_down", "slow_link", "lossy_port")
#: what each kind needs beside kind, at_ns and until_ns: one key of each group
FAULT_NEEDS = {
    "link_down": (("link",),),
    "slow_link": (("link", "fraction"), ("rate_gbps", "factor")),
    "lossy_port": (("port",), ("loss",)),
}
NodeName = Annotated[str, Field(min_length=1, max_length=100)]


class Fault(Strict):
    """A fault from at_ns until until_ns (for the rest of the run without it).

    link_down: the link [a, b] carries nothing (the switches reroute after
    network.routing.convergence_ns). slow_link: the link [a, b], or a seeded fraction of the fabric's links, runs at
    rate_gbps both ways, or at its own rate divided by factor.
    lossy_port: node a's port towards b ("port: [a, b]") loses each packet it sends with
    probability loss (data, ACK, NACK and CNP; PFC frames are spared). Nodes are named as
    ``roce-emu topo`` lists them (h0, h1, ... for hosts)."""

    kind: Literal["link_down", "slow_link", "lossy_port"]
    """link_down: the link carries nothing; slow_link: it runs at rate_gbps (or its rate over factor); lossy_port: a
    port loses packets with probability loss."""
    link: Optional[list[NodeName]] = Field(None, min_length=2, max_length=2)
    """link_down, slow_link: the link's two nodes, by name (`roce-emu topo --links`)."""
    fraction: Optional[float] = Field(None, gt=0, le=1, allow_inf_nan=False)
    """slow_link, instead of link: this share of the fabric's links (those `roce-emu topo --links` lists; rounded
    half up, at least one), chosen at random from the scenario's seed, each slowed alike."""
    port: Optional[list[NodeName]] = Field(None, min_length=2, max_length=2)
    """lossy_port: [node, neighbour]: the node's port towards the neighbour."""
    at_ns: float = Field(0.0, ge=0, le=1e15)
    """When the fault starts."""
    until_ns: Optional[float] = Field(None, gt=0, le=1e15)
    """When it ends; null: at the end of the run."""
    rate_gbps: Optional[float] = Field(None, ge=MIN_RATE_GBPS, le=1e5)
    """slow_link: the rate both ways."""
    factor: Optional[float] = Field(None, ge=1, le=MAX_STRAGGLER_FACTOR, allow_inf_nan=False)
    """slow_link, instead of rate_gbps: the link's own rate divided by this (2: half rate)."""
    loss: Optional[float] = Field(None, gt=0, le=1)
    """lossy_port: probability of losing each packet the port sends (PFC frames are spared)."""

    @model_validator(mode="after")
    def _keys_of_kind(self):
        groups = FAULT_NEEDS[self.kind]
        needs = ", ".join(" or ".join(group) for group in groups)
        for key in ("link", "fraction", "port", "rate_gbps", "factor", "loss"):
            if getattr(self, key) is not None and not any(key in group for group in groups):
                raise ValueError(f"{AT}{key} is not used by kind '{self.kind}' (it needs: {needs})")
        for group in groups:
            given = [key for key in group if getattr(self, key) is not None]
            if not given:
                raise ValueError(f"{AT}{group[0]} is required by kind '{self.kind}' (it needs: {needs})")
            if len(given) > 1:
                raise ValueError(f"{AT}{given[1]} is not allowed beside {given[0]}: give one (it needs: {needs})")
        if self.until_ns is not None and self.until_ns <= self.at_ns:
            raise ValueError(f"{AT}until_ns {self.until_ns:g} is not allowed: it must be after at_ns ({self.at_ns:g})")
        return self

    @property
    def nodes(self) -> list[str] | None:
        """The link's or the port's two nodes; None for a fraction of the links."""
        return self.link if self.link is not None else self.port


# ---- stragglers: slower compute on chosen ranks, and compute that varies ----------------------


class Straggler(Strict):
    """Ranks whose compute runs ``factor`` times slower: every compute task on the host of ``rank``, or of a seeded
    ``fraction`` of the ranks (give one of them). Ranks are the training's (rank r on ``workload.training.hosts[r]``,
    default host r), the Chakra trace's (host ``workload.chakra.ranks[r]``), or else host ids. Entries that pick the
    same rank multiply their factors. With ``jobs``, ranks are host ids. Slower links are ``faults`` of kind
    ``slow_link``."""

    rank: Optional[int] = Field(None, ge=0)
    """The rank that straggles."""
    fraction: Optional[float] = Field(None, gt=0, le=1, allow_inf_nan=False)
    """Instead of rank: this share of the ranks (rounded half up, at least one), chosen at random from the scenario's
    seed."""
    factor: float = Field(ge=1, le=MAX_STRAGGLER_FACTOR, allow_inf_nan=False)
    """How many times longer each of its compute tasks takes (1: as fast as the others)."""

    @model_validator(mode="after")
    def _rank_or_fraction(self):
        if (self.rank is None) == (self.fraction is None):
            raise ValueError("give rank or fraction, one of them")
        return self


class ComputeJitter(Strict):
    """Each compute task's duration times a random draw of mean 1 and coefficient of variation ``cv``, one draw per
    task (per rank, layer, micro-batch and iteration), from the scenario's seed. normal and uniform draws below 0
    are taken as 0 (a task takes no time), which raises the mean a little for cv above about 0.3 (normal) or 0.58
    (uniform)."""

    distribution: Literal["lognormal", "normal", "uniform"] = "lognormal"
    """lognormal: exp of a normal (never negative, skewed towards long tasks); normal; uniform: even on
    [1 - cv·√3, 1 + cv·√3]."""
    cv: float = Field(ge=0, le=MAX_STRAGGLER_FACTOR, allow_inf_nan=False)
    """Standard deviation of the draw over its mean; 0: no jitter."""


# ---- run control and output -----------------------------------------------------------------
#: sim.fast_forward's modes, the default first (docs/fast_forward.md)
FastForwardMode = Literal["off", "exact", "trains", "memo"]
FAST_FORWARD_MODES: tuple[str, ...] = get_args(FastForwardMode)
#: values renamed since, by dotted key: each former name is still read, as the value it names, with a warning
FORMER_NAMES: dict[str, dict[str, str]] = {"sim.fast_forward": {"on": "trains"}}


def read_former_name(value, key: str, info: ValidationInfo):
    """``value`` as its current name if it is a former name of the key's values (FORMER_NAMES).
    The warning that it is deprecated goes to the loader if it collects them (validate_document
    passes the ``source`` and a ``deprecated`` list in the context; the run prints and records
    them with its warnings), else to the Python caller as a DeprecationWarning."""
    former = FORMER_NAMES[key]
    if not isinstance(value, str) or value not in former:
        return value
    message = f"{key}: '{value}' is deprecated, the former name of '{former[value]}': write '{former[value]}'"
    context = info.context or {}
    if "deprecated" in context:
        context["deprecated"].append(f"{context['source']}: {message}")
    else:
        warnings.warn(message, DeprecationWarning, stacklevel=4)  # the caller of the pydantic model
    return former[value]


class Sim(Strict):
    """Run control: the bounds that end a run, deadlock detection and fast-forward."""

    max_time_ns: float = Field(1e9, gt=0, le=1e15)
    """Simulated-time bound; reaching it ends the run with status incomplete."""
    max_events: int = Field(10**10, ge=1, le=10**15)
    """Event bound (about an hour at 3 M events/s); status incomplete."""
    max_wall_s: float = Field(86_400.0, gt=0, le=1e7)
    """Wall-clock bound, checked between slices; status incomplete."""
    stall_timeout_ns: float = Field(20e6, gt=0, le=1e15)
    """No flow progress for this long stops the run as a PFC deadlock or stall; must exceed network.nic.rto_ns."""
    slice_events: int = Field(1 << 20, ge=1, le=1 << 40)
    """Events per engine call between progress updates and pool growth; results never depend on it."""
    fast_forward: FastForwardMode = "off"
    """off: every packet simulated; exact: skip whole periods in which the network repeats itself, identical to off
    to the picosecond; trains: steady flows send packet trains, approximate; memo: components of flows that repeat
    replay the exact engine's own outcome, approximate (docs/fast_forward.md). The former name of trains, on, is
    read with a warning."""
    memo_sample_per_mille: int = Field(10, ge=0, le=1000)
    """With fast_forward: memo, the share of replays (per mille, seeded) run exactly again and compared with the
    stored outcome; summary.json reports the differences."""
    memo_engine: Literal["exact", "trains"] = "exact"
    """With fast_forward: memo, how the flows the memo does not replay run: exact, packet by packet; trains, in
    packet trains where trains apply, as with fast_forward: trains (and with its warnings). The outcomes the memo
    stores and replays are the exact engine's either way (docs/fast_forward.md)."""
    train_max_packets: int = Field(1024, ge=2, le=4096)
    """The longest train with fast_forward: trains (or memo with memo_engine: trains)."""

    @field_validator("fast_forward", mode="before")
    @classmethod
    def _former_mode_name(cls, mode, info: ValidationInfo):
        return read_former_name(mode, "sim.fast_forward", info)

    @model_validator(mode="after")
    def _memo_engine_with_memo(self):
        if self.memo_engine != "exact" and self.fast_forward != "memo":
            raise ValueError(
                f"{AT}memo_engine {self.memo_engine} applies with fast_forward: memo only (fast_forward is "
                f"{self.fast_forward}): set fast_forward: memo, or leave memo_engine out"
            )
        return self


TRACE_KINDS = ("rate", "queue", "pfc")


class Output(Strict):
    """What the run writes besides flows.csv and summary.json, and where."""

    dir: Optional[str] = None
    """The run directory; null: runs/<name>. `--out` wins."""
    traces: list[Literal["rate", "queue", "pfc"]] = []
    """Sampled time series (rate, queue) and the PFC event log (pfc) written to the run directory."""
    trace_interval_ns: float = Field(1000.0, ge=1, le=1e12)
    """Sampling interval of the rate and queue traces."""
    collective_flows: StrictBool = False
    """Also write a row per flow of every collective in flows.csv and tasks.csv."""
    format: Literal["csv", "parquet"] = "csv"
    """Table format; parquet needs pandas and pyarrow (`pip install 'roce-emu[parquet]'`)."""
    formats: list[Literal["ns3"]] = []
    """Other simulators' files written beside the tables: ns3 writes fct.txt and pfc.txt in the HPCC ns-3 layout."""

    @property
    def logs_pfc(self) -> bool:
        return "pfc" in self.traces or "ns3" in self.formats


def parquet_missing() -> str:
    """Why output.format parquet cannot be written or read here ('' if it can)."""
    if find_spec("pandas") and find_spec("pyarrow"):
        return ""
    return "'parquet' needs pandas and pyarrow: pip install 'roce-emu[parquet]'"


class Scenario(Strict):
    """A scenario file."""

    name: str = Field("scenario", pattern=r"^[A-Za-z0-9_.-]+$", max_length=100)
    """Names the default run directory, runs/<name>."""
    seed: int = Field(1, ge=0, le=2**63 - 1)
    """Seeds ECN marking, ECMP hashing, random patterns and lossy ports."""
    topology: Topology = SingleSwitch()
    """The fabric; `kind` picks one of the sections below."""
    network: Network = Network()
    """NICs, switches, congestion control and routing."""
    workload: Workload = Workload()
    """What runs over the fabric, as one task DAG."""
    sim: Sim = Sim()
    """Run control."""
    output: Output = Output()
    """What the run writes."""
    faults: list[Fault] = Field([], max_length=10_000)
    """Faults in the modelled network, each for a time window."""
    jobs: list[Job] = Field([], max_length=1024)
    """Several jobs sharing the fabric, each with its own workload and hosts, instead of `workload`
    (docs/howto/jobs.md)."""
    stragglers: list[Straggler] = Field([], max_length=10_000)
    """Ranks whose compute is slower than the others' (slower links, chosen or a seeded fraction: faults of kind
    slow_link)."""
    compute_jitter: Optional[ComputeJitter] = None
    """Random variation of every compute task's duration; null: every task takes its given time."""
    _deprecated: tuple[str, ...] = PrivateAttr(())

    @property
    def deprecated_names(self) -> tuple[str, ...]:
        """One line per deprecated name the document used ("FILE: sim.fast_forward: 'on' is
        deprecated, ..."), when config.load.validate_document validated it."""
        return self._deprecated

    @model_validator(mode="after")
    def _collect_deprecated_names(self, info: ValidationInfo):
        self._deprecated = tuple((info.context or {}).get("deprecated", ()))
        return self

    @field_validator("topology", mode="before")
    @classmethod
    def _file_topology(cls, section, info: ValidationInfo):
        return expand_file_topology(section, info)

    @model_validator(mode="after")
    def _pfc_log_sees_every_frame(self):
        if self.output.logs_pfc and self.sim.fast_forward == "exact":
            raise ValueError(
                f"{AT}sim.fast_forward 'exact' is not allowed with the PFC log: it jumps over repeated PFC frames, "
                "which the log (output.traces: [pfc], output.formats: [ns3]) records one by one: use off or trains"
            )
        return self

    @model_validator(mode="after")
    def _jobs_or_workload(self):
        if self.jobs and self.workload != Workload():
            raise ValueError(
                f"{AT}workload is not allowed beside jobs: each job has its own workload (give jobs or workload)"
            )
        seen: dict[str, int] = {}
        for i, job in enumerate(self.jobs):
            if job.name in seen:
                raise ValueError(
                    f"{AT}jobs.{i}.name '{job.name}' is not allowed: jobs.{seen[job.name]} has that name already"
                )
            seen[job.name] = i
        return self

    @model_validator(mode="after")
    def _jobs_cc_served_by_the_fabric(self):
        """The switches mark ECN one way for all traffic (switch.ecn, its omitted values network.cc's
        algorithm's defaults): a job's own algorithm that reacts to the marks is refused unless that
        marking is its own defaults, or the scenario sets the marking itself."""
        ecn = self.network.switch.ecn
        fabric = ecn.resolved(self.network.cc.algorithm)
        for i, job in enumerate(self.jobs):
            if job.cc is None or not ecn.enabled or not BY_NAME[job.cc.algorithm].reacts_to_ecn:
                continue
            own = ecn.resolved(job.cc.algorithm)
            if own != fabric:
                name = job.cc.algorithm
                raise ValueError(
                    f"{AT}jobs.{i}.cc.algorithm '{name}' is not allowed with the fabric's ECN marking: the switches "
                    f"mark all traffic alike, {_marking(fabric)} (network.cc.algorithm "
                    f"'{self.network.cc.algorithm}'), not {name}'s {_marking(own)}: set network.switch.ecn's "
                    f"kmin_bytes, kmax_bytes and pmax, or network.cc.algorithm '{name}'"
                )
        return self

    @model_validator(mode="after")
    def _stall_after_rto(self):
        net = self.network
        irn = net.transport == "irn"
        key, rto = ("irn.rto_high_ns", net.irn.rto_high_ns) if irn else ("nic.rto_ns", net.nic.rto_ns)
        if self.sim.stall_timeout_ns <= rto:
            raise ValueError(
                f"{AT}sim.stall_timeout_ns {self.sim.stall_timeout_ns:g} is not allowed: it must exceed "
                f"network.{key} ({rto:g})"
            )
        return self

    @model_validator(mode="after")
    def _deadlines_unskipped(self):
        trainings = [w.training for w in [self.workload, *(job.workload for job in self.jobs)] if w.training]
        if self.sim.fast_forward != "off" and any(t.parameter_server.deadline_ns is not None for t in trainings):
            raise ValueError(
                f"{AT}sim.fast_forward '{self.sim.fast_forward}' is not allowed with parameter_server.deadline_ns: "
                "dropped updates are simulated with fast_forward off only"
            )
        return self

    @model_validator(mode="after")
    def _irn_exact(self):
        if self.network.transport == "irn" and self.sim.fast_forward == "exact":
            raise ValueError(
                f"{AT}sim.fast_forward 'exact' is not allowed with network.transport 'irn': its periods do not hold "
                "IRN's bitmaps: use off"
            )
        return self
