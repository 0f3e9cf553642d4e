"""The named steps an iteration is made of, before they become tasks (the package, __init__.py, expands them)."""

from dataclasses import dataclass, field


@dataclass
class Item:
    """One named step of an iteration: compute on hosts, a collective over one or more
    disjoint groups, or point-to-point sends; ``after`` names the items it waits for."""

    key: str  # where it came from, for error messages
    name: str
    kind: str  # "compute" | "collective" | "send"
    after: list
    hosts: list = field(default_factory=list)  # compute
    duration_ps: int = 0
    groups: list = field(default_factory=list)  # collective: lists of ranks
    collective: str = ""
    algorithm: str = "ring"
    scheduler: str = "baseline"  # hierarchical: baseline, themis_fifo, themis_scf (themis.py)
    nbytes: int = 0
    chunks: int = 1
    channels: int = 1  # NCCL's channels: shares of nbytes, each its own ring or tree (collectives.py)
    pairs: list = field(default_factory=list)  # send: (src, dst)
    #: all_to_all with per-pair bytes (all_to_allv): [i][j] from a group's i-th rank to its j-th; None: nbytes evenly
    pair_bytes: list | None = None
    #: the key the user wrote for an attribute (algorithm, scheduler, bytes, hosts) where it is
    #: not ``<key>.<attribute>``: a training's all-reduce takes its algorithm from dp_algorithm
    keys: dict = field(default_factory=dict)
    #: False where roce-emu made the name up (a collective without one, a training step)
    named: bool = True
    #: a send of the model from parameter servers to the ranks (parameter_server.py): each flow waits
    #: for its receiver's previous iteration, and for its sender to have every push of the iteration
    #: ``staleness`` before the previous one (0: the previous one, a barrier; None: no bound)
    pull: bool = False
    staleness: int | None = 0
    #: a send of updates to parameter servers scheduled as MLFabric does (parameter_server.py): each flow
    #: waits for its receiver's port, which takes one flow at a time, the shortest (in time) first
    scheduled: bool = False
    #: a scheduled send's deadline (ps after its flow is ready; -1 none): a flow that would end later is dropped
    deadline_ps: int = -1
    #: a send's flows that are also other ranks' part of it: src -> those ranks (an aggregated update is
    #: each of its ranks' push)
    counts_for: dict = field(default_factory=dict)

    def at(self, attribute: str) -> str:
        """The key an error about ``attribute`` names: the one the user wrote."""
        return self.keys.get(attribute, f"{self.key}.{attribute}")
