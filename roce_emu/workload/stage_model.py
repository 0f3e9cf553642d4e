"""How long a hierarchical all-reduce takes when its stages run as the packet-level run
dispatches them: a fluid model that Themis's plan asks whether to give way to the baseline.

The bandwidth model of themis.py balances bytes. It knows neither the dimensions' queues of the
run (collectives.py, core/tasks.py) nor how a NIC shares a link between the ring steps in
flight, and with many small chunks or a small collective those decide the time. This model
follows the run's rules, in one group of ranks per dimension (all groups of a dimension run
alike):

- **Flows.** A stage of s bytes on a dimension of p ranks is p - 1 ring steps, each a flow of
  s / p bytes (wire bytes: headers added) on the rank's link of that dimension. A flow's data is
  through one ``step_s`` (the links' delays, a frame's serialisation at each hop) after its last
  byte was sent. A dimension whose algorithm keeps u links busy (dim_algorithms.py) is one link
  u times as fast: ring_bidir's two flows per step are one flow of s / p, direct's single step
  one flow of (p - 1) / p x s.
- **Sharing a link.** Themis's flows that are on a link at once share it equally (a NIC
  serves its queue pairs round-robin): a stage starts on every rank of its group together
  (its gate waits for the whole group, and its queue is freed once the first step is through
  on all of them), so its flows start and end in step with those they share links with. The
  baseline's chunks chain rank by rank (a chunk's step waits for the previous chunk's on the
  same rank only); its ranks drift apart around each ring and its links serve one flow after
  another, so the model serves its flows in the order they started. With
  ``network.nic.queue_pair: connection`` every scheduler's flows on a link go in that order (a
  ring's steps to one neighbour are one connection). Where all dimensions leave by one NIC
  port (``topology.nic: shared``, torus, mesh), the flows of every dimension also share that
  port, max-min fairly.
- **Queues.** A dimension's reduce-scatter and all-gather stages each have a dispatch queue:
  a stage is ready when the chunk's previous stage is through, waits for the queue, and frees
  it once its first ring step is through; among the stages waiting, the first ready
  (``themis_fifo``) or the smallest, then the first ready (``themis_scf``), ties in the plan's
  order. The baseline's chunks take each queue in chunk order. Each later ring step of a
  queue's stages runs in the order they were dispatched, each after the one before it.

``run_time_s`` returns when the last stage is through. Against the packet-level runs of
``benchmarks/themis.py`` and tests/test_themis.py it is within a few per cent in most cases and
ranks Themis and the baseline as the runs do (docs/themis.md, "When Themis gives way").
"""

import heapq
from dataclasses import dataclass


@dataclass(frozen=True)
class DimTiming:
    """A fabric's dimensions as the schedulers' models see them."""

    rates_bps: tuple[float, ...]  # each dimension's link rate
    step_s: tuple[float, ...]  # a ring step's latency on it
    wire: float = 1.0  # wire bytes per payload byte (frame / MTU)
    in_order: bool = False  # network.nic.queue_pair: connection
    nic_bps: float = 0.0  # > 0: one NIC port of that rate for all dimensions
    links: tuple[int, ...] = ()  # each dimension's links an NPU keeps busy at once (dim_algorithms.py); (): one
    direct: tuple[bool, ...] = ()  # each dimension's stages run in one step (direct); (): p - 1 ring steps

    def rate_bps(self, d: int) -> float:
        """What a stage on dimension d sends at: its link rate times the links it keeps busy."""
        return self.rates_bps[d] * (self.links[d] if self.links else 1)

    def steps(self, d: int, size: int) -> int:
        """The steps of a stage on dimension d of ``size`` NPUs."""
        return 1 if self.direct and self.direct[d] else size - 1


def run_time_s(sizes, paths, tie_rank: dict, scheduler: str, timing: DimTiming) -> float:
    """When the last stage of ``paths`` (per chunk: its stages' (dimension, all-gather?, bytes
    before the stage splits them), in order) is through, on the model. ``tie_rank[(chunk,
    index)]`` orders stages that tie in a queue."""
    return _Run(sizes, paths, tie_rank, scheduler, timing).go()


class _Run:
    def __init__(self, sizes, paths, tie_rank, scheduler, timing: DimTiming):
        self.sizes, self.paths, self.tie, self.scheduler = sizes, paths, tie_rank, scheduler
        self.timing = timing
        self.now = 0.0
        self.events: list = []  # (time, seq, stage, step): step -1 ready, else that step's flow through
        self.seq = 0
        self.flows: list[list] = []  # [remaining bits, dimension, stage, step, seq], in start order
        self.waiting: dict = {}  # (dim, gather) -> heap of (key, stage)
        self.busy: set = set()  # dispatch queues taken
        self.next_chunk: dict = {}  # baseline: the chunk each queue serves next
        self.ticket: dict = {}  # stage -> its place in its queue's service order
        self.tickets: dict = {}  # (dim, gather) -> tickets handed out
        self.turn: dict = {}  # (dim, gather, step) -> the ticket whose step runs next
        self.parked: dict = {}  # (dim, gather, step, ticket) -> stage waiting for its turn
        self.end = 0.0
        self.in_order = timing.in_order or scheduler == "baseline"  # else flows share a link equally

    def go(self) -> float:
        for c, path in enumerate(self.paths):
            if path:
                self._push(0.0, (c, 0), -1)
        while True:
            rates = self._rates()
            done_at, which = min(
                ((self.now + f[0] / r, i) for i, (f, r) in enumerate(zip(self.flows, rates)) if r > 0),
                default=(None, -1),
            )
            if done_at is None and not self.events:
                return self.end
            if done_at is not None and (not self.events or done_at < self.events[0][0]):
                self._advance(done_at, rates)
                bits, d, stage, step, _ = self.flows.pop(which)
                self._push(done_at + self.timing.step_s[d], stage, step)
                continue
            t, _, stage, step = heapq.heappop(self.events)
            self._advance(t, rates)
            if step < 0:
                self._ready(stage)
            else:
                self._through(stage, step)

    def _push(self, t, stage, step):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, stage, step))

    def _advance(self, t, rates):
        for f, r in zip(self.flows, rates):
            f[0] = max(0.0, f[0] - r * (t - self.now))
        self.now = t

    def _rates(self) -> list[float]:
        """Each flow's rate now: an equal share of its link, or all of it for the first started
        when a link serves its flows in order; capped max-min fairly by a shared NIC port."""
        on_link: dict = {}
        for i, f in enumerate(self.flows):
            on_link.setdefault(f[1], []).append(i)
        rates = [0.0] * len(self.flows)
        for d, mine in on_link.items():
            sending = mine[:1] if self.in_order else mine
            for i in sending:
                rates[i] = self.timing.rate_bps(d) / len(sending)
        if self.timing.nic_bps > 0:
            left, capped = self.timing.nic_bps, sorted((r, i) for i, r in enumerate(rates) if r > 0)
            for n, (r, i) in enumerate(capped):
                rates[i] = min(r, left / (len(capped) - n))
                left -= rates[i]
        return rates

    def _start(self, stage, step):
        c, i = stage
        d, _, nbytes = self.paths[c][i]
        p = self.sizes[d]
        self.seq += 1
        bits = nbytes / p * ((p - 1) // self.timing.steps(d, p)) * 8 * self.timing.wire  # direct: p - 1 shares
        self.flows.append([bits, d, stage, step, self.seq])

    def _ready(self, stage):
        c, i = stage
        d, gather, nbytes = self.paths[c][i]
        q = (d, gather)
        if self.scheduler == "themis_scf":
            key = (int(nbytes), self.now, self.tie[stage])
        elif self.scheduler == "themis_fifo":
            key = (self.now, self.tie[stage])
        else:
            key = (c,)
        heapq.heappush(self.waiting.setdefault(q, []), (key, stage))
        self._dispatch(q)

    def _dispatch(self, q):
        heap = self.waiting.get(q)
        if q in self.busy or not heap:
            return
        if self.scheduler == "baseline" and heap[0][1][0] != self.next_chunk.get(q, heap[0][1][0]):
            return  # the baseline's chunks take the queue in order
        _, stage = heapq.heappop(heap)
        self.busy.add(q)
        self.next_chunk[q] = stage[0] + 1
        self.ticket[stage] = self.tickets.get(q, 0)
        self.tickets[q] = self.ticket[stage] + 1
        self._start(stage, 0)

    def _through(self, stage, step):
        c, i = stage
        d, gather, _ = self.paths[c][i]
        if step == 0:
            self.busy.discard((d, gather))
            self._dispatch((d, gather))
        else:  # the next ticket's step may run
            key = (d, gather, step)
            self.turn[key] = self.turn.get(key, 0) + 1
            parked = self.parked.pop(key + (self.turn[key],), None)
            if parked is not None:
                self._start(parked, step)
        if step + 1 < self.timing.steps(d, self.sizes[d]):
            key = (d, gather, step + 1)
            if self.ticket[stage] == self.turn.get(key, 0):
                self._start(stage, step + 1)
            else:
                self.parked[key + (self.ticket[stage],)] = stage
        else:
            self.end = max(self.end, self.now)
            if i + 1 < len(self.paths[c]):
                self._push(self.now, (c, i + 1), -1)
