"""Build the workload's task DAG in Python: flows, compute tasks, zero-length joins, and edges.

Tasks get provisional ids in creation order; ``build`` renumbers them so that the flows
come first (task f is flow f, as the engine expects) and returns flat arrays. Rows are kept
as NumPy chunks: a collective adds its flows and their edges as whole arrays, so a flow costs
a few dozen bytes while the DAG is built, not Python objects. Labels (name, iteration, role)
ride along as small integer ids, for tasks.csv.
"""

from dataclasses import dataclass

import numpy as np

ROLE_FLOW = "flow"
ROLE_COMPUTE = "compute"
ROLE_JOIN = "join"
ROLES = (ROLE_FLOW, ROLE_COMPUTE, ROLE_JOIN)  #: TaskTable.role codes index this
ROLE_CODE = {role: i for i, role in enumerate(ROLES)}


@dataclass(frozen=True)
class FlowTable:
    src: np.ndarray  # int32
    dst: np.ndarray  # int32
    size_bytes: np.ndarray  # int64
    start_ps: np.ndarray  # int64: earliest start (the flow starts later if it waits for tasks)
    prio: np.ndarray  # int8
    conn: np.ndarray  # int32: the connection it is posted on (a collective's group and channel), -1 for none

    def __len__(self) -> int:
        return len(self.src)


@dataclass(frozen=True)
class QueueTable:
    """The runtime queues (core/tasks.py) and the tasks that take part in them, one row each."""

    ordered: np.ndarray  # int8 per queue: 1 ordered, 0 dispatch
    task: np.ndarray  # int32 per row: the task (final id)
    queue: np.ndarray  # int32: the queue it waits for, -1 for none
    key: np.ndarray  # int64: dispatch: its rank in the queue
    gate: np.ndarray  # int32: ordered: the task whose ticket it follows (final id), -1
    frees: np.ndarray  # int32: the dispatch queue it frees when it finishes, -1
    deadline: np.ndarray  # int64: dispatch: dropped if, granted, it would end this long after ready; -1 never


@dataclass(frozen=True)
class GateTable:
    """Streaming in-switch reduction (core/stream.py): flow ``flow[i]`` may send no further than
    flow ``source[i]`` has delivered, scaled by their sizes in packets, plus ``window[i]`` packets
    (0: a data edge, the flow forwards what the source brings; > 0: a credit edge, a member's
    window of aggregation slots, opened by the results the source brings back)."""

    flow: np.ndarray  # int64 flow ids (final)
    source: np.ndarray  # int64 flow ids (final)
    window: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.flow)


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
    name_id: np.ndarray  # int32: the collective, compute or flow group each task belongs to, in names
    names: list
    iteration: np.ndarray  # int32
    role: np.ndarray  # int8: index into ROLES
    queues: "QueueTable"  # the runtime queues (core/tasks.py)

    def __len__(self) -> int:
        return len(self.is_flow)

    def name(self, k: int) -> str:
        return self.names[self.name_id[k]]


class _Rows:
    """Integer rows of one width, added one at a time or as whole columns, kept column by column
    in NumPy chunks (single rows wait in a short list first). ``columns()`` joins each column."""

    PENDING = 1 << 14

    def __init__(self, width: int):
        self.width = width
        self._chunks: list[list] = [[] for _ in range(width)]  # per column, its chunks
        self._pending: list[tuple] = []
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def add(self, row: tuple) -> None:
        self._pending.append(row)
        self._n += 1
        if len(self._pending) >= self.PENDING:
            self._flush()

    def extend(self, *columns) -> None:
        """Add rows column by column: arrays of one length, or scalars repeated."""
        self._flush()
        n = max(np.size(column) for column in columns)
        for chunks, column in zip(self._chunks, columns):
            chunks.append(np.full(n, column, np.int64) if np.ndim(column) == 0 else np.array(column, np.int64))
        self._n += n

    def _flush(self) -> None:
        if self._pending:
            block = np.array(self._pending, np.int64).reshape(-1, self.width)
            for j, chunks in enumerate(self._chunks):
                chunks.append(block[:, j].copy())
            self._pending = []

    def columns(self) -> list[np.ndarray]:
        """Each column, all rows (int64)."""
        self._flush()
        for j, chunks in enumerate(self._chunks):
            if len(chunks) != 1:
                self._chunks[j] = [np.concatenate(chunks) if chunks else np.zeros(0, np.int64)]
        return [chunks[0] for chunks in self._chunks]


class DagBuilder:
    def __init__(self):
        self._flows = _Rows(6)  # src, dst, bytes, earliest start, priority, connection (-1: none)
        self._computes = _Rows(3)  # host (-1 for a join), duration, earliest start
        self._nodes = _Rows(3)  # is flow, index into its rows, label
        self._edges = _Rows(2)  # before, after
        self._waits = _Rows(5)  # task, runtime queue, key, gate task (-1), deadline (-1)
        self._frees = _Rows(2)  # task, dispatch queue
        self._gates = _Rows(3)  # gated flow, source flow, window (GateTable)
        self._queues: dict = {}  # a caller's queue name -> (queue id, ordered)
        self._connections: dict = {}  # a caller's connection name -> its id
        self._labels: dict[tuple, int] = {}  # (name, iteration, role) -> label id

    def __len__(self) -> int:
        return len(self._nodes)

    def _label(self, name: str, iteration: int, role: str) -> int:
        return self._labels.setdefault((name, iteration, role), len(self._labels))

    def flow(
        self,
        src: int,
        dst: int,
        nbytes: int,
        prio: int,
        name: str,
        iteration: int = 0,
        earliest_ps: int = 0,
        after=(),
        conn: int = -1,
    ) -> int:
        """A flow; ``conn`` >= 0 names the connection it is posted on (``connection``)."""
        self._flows.add((src, dst, nbytes, earliest_ps, prio, conn))
        return self._add(True, len(self._flows) - 1, self._label(name, iteration, ROLE_FLOW), after)

    def flows(self, src, dst, nbytes, prio: int, name: str, iteration: int = 0, conn=-1) -> np.ndarray:
        """Add many flows at once (arrays of equal length, no predecessors yet): their ids."""
        n = len(src)
        first_flow, first_node = len(self._flows), len(self._nodes)
        self._flows.extend(src, dst, nbytes, 0, prio, conn)
        self._nodes.extend(1, np.arange(first_flow, first_flow + n), self._label(name, iteration, ROLE_FLOW))
        return np.arange(first_node, first_node + n)

    def connection(self, name) -> int:
        """The id of a connection by any hashable name (a collective's group and channel), new
        ones numbered as they come. Flows posted on one connection from one sender to one receiver
        go in order (network.nic.queue_pair: channel)."""
        return self._connections.setdefault(name, len(self._connections))

    def edges(self, before, after) -> None:
        """Add the edges before[i] -> after[i] (arrays of task ids)."""
        if len(before):
            self._edges.extend(before, after)

    def queue_ids(self, names, ordered: bool) -> np.ndarray:
        """Ids of runtime queues (core/tasks.py) by any hashable names, new ones numbered as
        they come: dispatch queues, or ordered ones."""
        ids = []
        for name in names:
            qid, kind = self._queues.setdefault(name, (len(self._queues), ordered))
            assert kind == ordered, name
            ids.append(qid)
        return np.array(ids, np.int64)

    def dispatched(self, tasks, queues, keys, frees_after, deadlines=-1) -> None:
        """Each of ``tasks`` waits to be granted dispatch queue ``queues[i]``, ranked by
        ``keys[i]``; task ``frees_after[i]`` frees it again when it finishes. ``deadlines[i]`` >= 0:
        a flow that, granted at t, would end past its ready time plus this (its key taken as its
        length) is dropped instead: it never sends, is done at t, and frees nothing."""
        if len(tasks):
            self._waits.extend(tasks, queues, keys, -1, deadlines)
            self._frees.extend(frees_after, queues)

    def ordered(self, tasks, queues, gates) -> None:
        """Each of ``tasks`` starts in ordered queue ``queues[i]`` in the order of the tickets
        its gate ``gates[i]`` (a dispatched task) was granted."""
        if len(tasks):
            self._waits.extend(tasks, queues, 0, gates, -1)

    def compute(self, host: int, duration_ps: int, name: str, iteration: int = 0, after=()) -> int:
        self._computes.add((host, duration_ps, 0))
        return self._add(False, len(self._computes) - 1, self._label(name, iteration, ROLE_COMPUTE), after)

    def join(self, name: str, iteration: int = 0, after=(), earliest_ps: int = 0) -> int:
        """A zero-length task that finishes when everything in ``after`` has, not before ``earliest_ps``."""
        self._computes.add((-1, 0, earliest_ps))
        return self._add(False, len(self._computes) - 1, self._label(name, iteration, ROLE_JOIN), after)

    def gate(self, flow: int, sources, window: int = 0) -> None:
        """Flow ``flow`` sends packet by packet no further than each of ``sources`` (flow tasks)
        has delivered, plus ``window`` packets (GateTable)."""
        for source in sources:
            self._gates.add((flow, source, window))

    def gate_table(self, new_id: np.ndarray) -> GateTable:
        """The gates with final flow ids (``new_id``: build's renumbering)."""
        flow, source, window = self._gates.columns()
        return GateTable(new_id[flow], new_id[source], window)

    def edge(self, before: int, after: int) -> None:
        self._edges.add((before, after))

    def _add(self, is_flow: bool, index: int, label: int, after) -> int:
        node = len(self._nodes)
        self._nodes.add((int(is_flow), index, label))
        if isinstance(after, np.ndarray):
            self.edges(after, np.full(len(after), node))
        else:
            for before in after:
                self._edges.add((before, node))
        return node

    def build(self) -> tuple[FlowTable, TaskTable, np.ndarray]:
        """(flows, tasks, new id of every provisional id)."""
        flow_src, flow_dst, size_bytes, start_ps, prio, conn = self._flows.columns()
        n_flows = len(flow_src)
        node_is_flow, node_index, node_label = self._nodes.columns()
        new_id = np.where(node_is_flow == 1, node_index, n_flows + node_index)
        table = FlowTable(
            src=flow_src.astype(np.int32),
            dst=flow_dst.astype(np.int32),
            size_bytes=size_bytes,
            start_ps=start_ps,
            prio=prio.astype(np.int8),
            conn=conn.astype(np.int32),
        )
        n = len(node_is_flow)
        compute_host, compute_duration, compute_earliest = self._computes.columns()
        host = np.full(n, -1, np.int32)
        host[n_flows:] = compute_host
        duration = np.zeros(n, np.int64)
        duration[n_flows:] = compute_duration
        earliest = np.zeros(n, np.int64)
        earliest[:n_flows] = start_ps
        earliest[n_flows:] = compute_earliest
        before, after = self._edges.columns()
        # the successors in (task, successor) order, as one key per edge: a stable sort (timsort)
        # is quick on keys that come nearly in order, as a workload's edges do
        key = new_id[before] * n + new_id[after]
        key.sort(kind="stable")
        src = key // n
        dst = key - src * n
        succ_off = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=succ_off[1:])
        labels = list(self._labels)  # in label-id order
        names = sorted({name for name, _, _ in labels})
        name_code = {name: i for i, name in enumerate(names)}
        label_name = np.array([name_code[name] for name, _, _ in labels], np.int32)
        label_iteration = np.array([it for _, it, _ in labels], np.int32)
        label_role = np.array([ROLE_CODE[role] for _, _, role in labels], np.int8)
        label = np.empty(n, np.int64)
        label[new_id] = node_label
        tasks = TaskTable(
            is_flow=np.arange(n) < n_flows,
            duration_ps=duration,
            earliest_ps=earliest,
            host=host,
            n_deps=np.bincount(dst, minlength=n).astype(np.int32),
            succ_off=succ_off,
            succ=dst.astype(np.int32),
            name_id=label_name[label],
            names=names,
            iteration=label_iteration[label],
            role=label_role[label],
            queues=self._queue_table(new_id),
        )
        return table, tasks, new_id

    def in_creation_order(self) -> bool:
        """Whether every edge runs from a task to one created after it, so that no cycle can
        exist (collectives and iterations are built so; an imported trace need not be)."""
        before, after = self._edges.columns()
        return bool((before < after).all())

    def _queue_table(self, new_id: np.ndarray) -> QueueTable:
        waiter, wait_queue, wait_key, wait_gate, wait_deadline = self._waits.columns()
        freer, freed_queue = self._frees.columns()
        ordered = np.zeros(len(self._queues), np.int8)
        for qid, kind in self._queues.values():
            ordered[qid] = kind
        task = np.unique(np.concatenate([waiter, freer]))
        queue, gate, freed = (np.full(len(task), -1, np.int32) for _ in range(3))
        key = np.zeros(len(task), np.int64)
        deadline = np.full(len(task), -1, np.int64)
        at = np.searchsorted(task, waiter)
        assert len(np.unique(at)) == len(at), "a task waits for one runtime queue at most"
        queue[at], key[at], deadline[at] = wait_queue, wait_key, wait_deadline
        gate[at] = np.where(wait_gate >= 0, new_id[wait_gate], -1)
        at = np.searchsorted(task, freer)
        assert len(np.unique(at)) == len(at), "a task frees one runtime queue at most"
        freed[at] = freed_queue
        return QueueTable(
            ordered=ordered,
            task=new_id[task].astype(np.int32),
            queue=queue,
            key=key,
            gate=gate,
            frees=freed,
            deadline=deadline,
        )


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
