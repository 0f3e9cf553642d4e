"""Build the workload's task DAG in Python: flows, compute tasks, zero-length joins, and edges.

Tasks get provisional ids in creation order; ``build`` renumbers them so that the flows
come first (task f is flow f, as the engine expects) and returns flat arrays. Labels
(name, iteration, role) ride along for tasks.csv.
"""
from dataclasses import dataclass

import numpy as np

ROLE_FLOW = "flow"
ROLE_COMPUTE = "compute"
ROLE_JOIN = "join"


@dataclass(frozen=True)
class FlowTable:
    src: np.ndarray  # int32
    dst: np.ndarray  # int32
    size_bytes: np.ndarray  # int64
    start_ps: np.ndarray  # int64: earliest start (the flow starts later if it waits for tasks)
    prio: np.ndarray  # int8

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class TaskTable:
    """All tasks, flows first. ``succ_off``/``succ`` is the CSR of each task's successors."""

    is_flow: np.ndarray  # bool
    duration_ps: np.ndarray  # int64 (compute)
    earliest_ps: np.ndarray  # int64
    host: np.ndarray  # int32: compute host, -1 for joins and flows
    n_deps: np.ndarray  # int32
    succ_off: np.ndarray  # int64
    succ: np.ndarray  # int32
    name: list  # the collective, compute or flow group each task belongs to
    iteration: np.ndarray  # int32
    role: list  # ROLE_*

    def __len__(self) -> int:
        return len(self.is_flow)


class DagBuilder:
    def __init__(self):
        self._flows: list[tuple[int, int, int, int, int]] = []
        self._computes: list[tuple[int, int, int]] = []
        self._nodes: list[tuple[bool, int]] = []  # (is flow, index into its list)
        self._labels: list[tuple[str, int, str]] = []
        self._edges: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._nodes)

    def flow(self, src: int, dst: int, nbytes: int, prio: int, name: str, iteration: int = 0,
             earliest_ps: int = 0, after=()) -> int:
        self._flows.append((src, dst, nbytes, earliest_ps, prio))
        return self._add(True, len(self._flows) - 1, (name, iteration, ROLE_FLOW), after)

    def flows(self, src, dst, nbytes, prio: int, name: str, iteration: int = 0) -> np.ndarray:
        """Add many flows at once (arrays of equal length, no predecessors yet): their ids."""
        src, dst, nbytes = (np.asarray(a, np.int64).tolist() for a in (src, dst, nbytes))
        first_flow, first_node, n = len(self._flows), len(self._nodes), len(src)
        self._flows.extend(zip(src, dst, nbytes, [0] * n, [prio] * n))
        self._nodes.extend(zip([True] * n, range(first_flow, first_flow + n)))
        self._labels.extend([(name, iteration, ROLE_FLOW)] * n)
        return np.arange(first_node, first_node + n)

    def edges(self, before, after) -> None:
        """Add the edges before[i] -> after[i] (arrays of task ids)."""
        self._edges.extend(zip(np.asarray(before, np.int64).tolist(), np.asarray(after, np.int64).tolist()))

    def compute(self, host: int, duration_ps: int, name: str, iteration: int = 0, after=()) -> int:
        self._computes.append((host, duration_ps, 0))
        return self._add(False, len(self._computes) - 1, (name, iteration, ROLE_COMPUTE), after)

    def join(self, name: str, iteration: int = 0, after=()) -> int:
        """A zero-length task that finishes when everything in ``after`` has."""
        self._computes.append((-1, 0, 0))
        return self._add(False, len(self._computes) - 1, (name, iteration, ROLE_JOIN), after)

    def edge(self, before: int, after: int) -> None:
        self._edges.append((before, after))

    def _add(self, is_flow: bool, index: int, label, after) -> int:
        node = len(self._nodes)
        self._nodes.append((is_flow, index))
        self._labels.append(label)
        for before in after:
            self._edges.append((before, node))
        return node

    def build(self) -> tuple[FlowTable, TaskTable, np.ndarray]:
        """(flows, tasks, new id of every provisional id)."""
        n_flows = len(self._flows)
        new_id = np.array([index if is_flow else n_flows + index for is_flow, index in self._nodes], np.int64)
        flows = np.array(self._flows, np.int64).reshape(-1, 5)
        table = FlowTable(src=flows[:, 0].astype(np.int32), dst=flows[:, 1].astype(np.int32),
                          size_bytes=flows[:, 2], start_ps=flows[:, 3], prio=flows[:, 4].astype(np.int8))
        n = len(self._nodes)
        computes = np.array(self._computes, np.int64).reshape(-1, 3)
        host = np.full(n, -1, np.int32)
        host[n_flows:] = computes[:, 0]
        duration = np.zeros(n, np.int64)
        duration[n_flows:] = computes[:, 1]
        earliest = np.zeros(n, np.int64)
        earliest[:n_flows] = flows[:, 3]
        edges = np.array(self._edges, np.int64).reshape(-1, 2)
        src, dst = new_id[edges[:, 0]], new_id[edges[:, 1]]
        order = np.lexsort((dst, src))
        src, dst = src[order], dst[order]
        succ_off = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=succ_off[1:])
        names = [""] * n
        roles = [""] * n
        iteration = np.zeros(n, np.int32)
        label_names, label_iterations, label_roles = zip(*self._labels) if self._labels else ((), (), ())
        iteration[new_id] = label_iterations
        for k, name, role in zip(new_id.tolist(), label_names, label_roles):
            names[k], roles[k] = name, role
        tasks = TaskTable(is_flow=np.arange(n) < n_flows, duration_ps=duration, earliest_ps=earliest, host=host,
                          n_deps=np.bincount(dst, minlength=n).astype(np.int32), succ_off=succ_off,
                          succ=dst.astype(np.int32), name=names, iteration=iteration, role=roles)
        return table, tasks, new_id


def has_cycle(tasks: TaskTable) -> bool:
    """Kahn's algorithm, a whole frontier at a time: True if some task can never start."""
    left = tasks.n_deps.astype(np.int64).copy()
    off, succ = tasks.succ_off, tasks.succ.astype(np.int64)
    frontier = np.flatnonzero(left == 0)
    seen = 0
    while len(frontier):
        seen += len(frontier)
        starts, counts = off[frontier], off[frontier + 1] - off[frontier]
        total = int(counts.sum())
        if total == 0:
            break
        # the successors of the whole frontier: each task's slice of succ, concatenated
        first = np.repeat(starts - (np.cumsum(counts) - counts), counts)
        after = succ[first + np.arange(total)]
        np.subtract.at(left, after, 1)
        frontier = np.unique(after[left[after] == 0])
    return seen < len(left)
