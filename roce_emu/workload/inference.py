"""Distributed inference (``workload.inference``): a trained model split over workers, serving a
Poisson stream of requests, as RePurpose studies it: what the network sees is the volume and
pattern of the activations the workers exchange per layer.

The model is its layers' widths (neurons), input first. Every worker holds a slice of each
layer's neurons, a contiguous one (worker w of W holds neurons [w·n/W, (w+1)·n/W) of a layer of
n, rounded down). A request runs the layers in order: before layer i + 1 is computed, each
worker sends the other workers the activations of its slice of layer i they read, as one flow
per pair of workers, ``values × batch × bytes_per_value`` bytes. How many values go from w to v:

- ``contiguous``: the layers are dense, so every worker needs every other worker's slice: w sends
  all of its slice to each other worker, and each worker receives (W - 1)/W of the layer (an
  all-gather of the activations);
- ``repurpose``: the neurons are rearranged so that only ``cross_fraction`` f of the edges between
  workers remain; w sends f of its slice to each other worker (rounded to whole values; a pair
  with none left sends no flow);
- ``exchange``: the matrices give the values directly.

A worker computes its slice of layer i + 1 once it holds its slice of layer i and everything
sent to it. With ``device_tflops`` it takes 2 × batch × its neurons × the inputs each reads
FLOPs, the inputs being its own slice of layer i and the values it received (a pruned edge
costs no multiply-add); with ``compute_ns`` the given time per layer; otherwise none. A worker's
device computes one layer at a time, the oldest request's first (a dispatch queue per host,
core/tasks.py). The request is done when every worker has computed the last layer.

Requests arrive as a Poisson process (background.poisson_times) from a stream of their own.
Tasks are named ``inference.layerI`` (the flows carrying layer I's activations, the compute of
layer I) and ``inference.request`` (a request's arrival and its end); their ``iteration`` is
the request's number.
"""

from dataclasses import dataclass, field

import numpy as np

from ..config.schema import Inference
from ..errors import ScenarioError
from ..units import ns_to_ps
from .. import streams
from .background import poisson_times
from .dag import DagBuilder

KEY = "workload.inference"
REQUEST = "inference.request"


@dataclass
class Requests:
    """The requests a workload serves: each one's first task (a join whose earliest start is its
    arrival) and last (a join after every worker's last layer), as task ids."""

    first: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.first)

    def renumbered(self, new_id: np.ndarray) -> "Requests":
        return Requests(new_id[self.first], new_id[self.end])

    @classmethod
    def joined(cls, parts: "list[Requests]") -> "Requests":
        return cls(
            *(np.concatenate([getattr(p, k) for p in parts] or [np.zeros(0, np.int64)]) for k in ("first", "end"))
        )

    def picked(self, mask: np.ndarray) -> "Requests":
        """The requests whose ``mask`` entry is true (one per request)."""
        return Requests(self.first[mask], self.end[mask])


def slices(width: int, workers: int) -> np.ndarray:
    """Each worker's neurons of a layer of ``width``: contiguous slices, as even as they go."""
    bounds = np.arange(workers + 1, dtype=np.int64) * width // workers
    return np.diff(bounds)


def exchange_values(spec: Inference) -> list[np.ndarray]:
    """Per layer but the last, the workers x workers matrix of the activation values worker w
    sends worker v before the next layer (per input of the batch)."""
    if spec.exchange is not None:
        return [np.array(m, np.int64) for m in spec.exchange]
    W = spec.workers
    off_diagonal = ~np.eye(W, dtype=bool)
    out = []
    for width in spec.layers[:-1]:
        held = slices(width, W)
        values = held if spec.partition == "contiguous" else np.floor(held * spec.cross_fraction + 0.5)
        out.append(np.where(off_diagonal, values.astype(np.int64)[:, None], 0))
    return out


def compute_ps(spec: Inference, values: list[np.ndarray]) -> np.ndarray:
    """[i][v]: worker v's compute time of layer i + 1, in ps."""
    W, n = spec.workers, len(spec.layers) - 1
    if spec.compute_ns is not None:
        return np.repeat(np.array([ns_to_ps(t) for t in spec.compute_ns], np.int64)[:, None], W, axis=1)
    if spec.device_tflops is None:
        return np.zeros((n, W), np.int64)
    out = np.zeros((n, W), np.int64)
    for i in range(n):
        inputs = slices(spec.layers[i], W) + values[i].sum(axis=0)  # its own slice and what it receives
        flops = 2 * spec.batch * slices(spec.layers[i + 1], W) * inputs
        out[i] = np.round(flops / spec.device_tflops)  # 1 TFLOP/s is one FLOP per ps
    return out


def arrivals_ns(spec: Inference, seed: int) -> np.ndarray:
    """The requests' arrival times (ns), from the scenario's seed."""
    rng = streams.rng(seed, streams.ARRIVALS)
    return poisson_times(rng, spec.requests_per_s, spec.start_ns, spec.duration_ns)


def inference_hosts(spec: Inference, n_hosts: int, source: str) -> list[int]:
    """The worker hosts, checked: on the fabric, each once, enough of them."""
    if spec.hosts is None:
        if spec.workers > n_hosts:
            raise ScenarioError(
                source, f"{KEY}.workers", f"{spec.workers} is not allowed: the topology has {n_hosts} hosts"
            )
        return list(range(spec.workers))
    for j, h in enumerate(spec.hosts):
        if not 0 <= h < n_hosts:
            raise ScenarioError(
                source, f"{KEY}.hosts.{j}", f"{h} is not allowed: host ids run from 0 to {n_hosts - 1} on this topology"
            )
    if len(set(spec.hosts)) != len(spec.hosts):
        raise ScenarioError(source, f"{KEY}.hosts", "each host once: a worker per host")
    return list(spec.hosts)


def add_inference(b: DagBuilder, spec: Inference, hosts: list[int], prio: int, seed: int) -> Requests:
    """Every request's tasks: its arrival, per layer the activation flows and each worker's
    compute, its end (provisional ids)."""
    values = exchange_values(spec)
    durations = compute_ps(spec, values)
    nbytes = [v * spec.batch * spec.bytes_per_value for v in values]
    W = spec.workers
    # each worker's device: one layer at a time, the oldest request's first
    device = b.queue_ids([("inference device", h) for h in hosts], ordered=False) if durations.any() else None
    first, end = [], []
    for r, arrival in enumerate(arrivals_ns(spec, seed).tolist()):
        arrival_ps = ns_to_ps(arrival)
        start = b.join(REQUEST, r, earliest_ps=arrival_ps)
        done = [start] * W  # per worker: the task after which it holds its slice of the current layer
        for i, sizes in enumerate(nbytes):
            received: list[list[int]] = [[] for _ in range(W)]
            for w, v in zip(*np.nonzero(sizes)):
                k = b.flow(hosts[w], hosts[v], int(sizes[w, v]), prio, f"inference.layer{i}", r, after=[done[w]])
                received[v].append(k)
            name = f"inference.layer{i + 1}"
            for v in range(W):
                after = [done[v], *received[v]]
                if durations[i, v] == 0:
                    done[v] = b.join(name, r, after=after)
                    continue
                done[v] = b.compute(hosts[v], int(durations[i, v]), name, r, after=after)
                assert device is not None
                b.dispatched([done[v]], device[v : v + 1], [arrival_ps], [done[v]])
        first.append(start)
        end.append(b.join(REQUEST, r, after=done))
    return Requests(np.array(first, np.int64), np.array(end, np.int64))


def inference_size(spec: Inference, seed: int) -> tuple[int, int, int]:
    """(flows, tasks, edges) add_inference makes, counted without making them."""
    values = exchange_values(spec)
    durations = compute_ps(spec, values)
    per_flows = sum(int(np.count_nonzero(v)) for v in values)
    per_tasks = per_flows + durations.size + 2
    # a flow's two edges, each layer's wait for the worker's layer before, the end's waits
    per_edges = 2 * per_flows + durations.size + spec.workers
    n = len(arrivals_ns(spec, seed))
    return n * per_flows, n * per_tasks, n * per_edges
