"""How a hierarchical collective runs inside one dimension of a ``multi_dim`` fabric
(``topology.dim_algorithms``), and what each way costs on the alpha-beta model.

A reduce-scatter stage on a dimension of p NPUs starts with s bytes per NPU and leaves s / p;
an all-gather stage does the reverse. Either way each NPU sends (p - 1) / p x s bytes:

    ring        p - 1 steps, one flow of s / p per step to the next NPU: one link busy;
                time (p - 1) / p x s / B + (p - 1) alpha
    ring_bidir  the same ring both ways round on half the data each: p - 1 steps, two flows of
                s / (2 p) per step, one to each neighbour: two links busy;
                time (p - 1) / p x s / (2 B) + (p - 1) alpha
    direct      one step, p - 1 flows of s / p, one to every other NPU at once: p - 1 links busy
                on a fully connected dimension; time s / (p B) + alpha

B is a link's rate, alpha a step's latency. An NPU has no more links busy than it has in the
dimension (``Dimension.links``): through a switch every algorithm keeps its one link busy, on a
ring of two NPUs the one link. So the bandwidth term is (p - 1) / p x s / (u B), u =
``links_used``, and the whole dimension's bandwidth l B is used when u equals its links l.
"""

#: the flows each algorithm has on the way at once from one NPU, in a dimension of p NPUs
PARALLEL_FLOWS = {"ring": lambda p: 1, "ring_bidir": lambda p: 2, "direct": lambda p: p - 1}


def links_used(algorithm: str, size: int, links: int) -> int:
    """u: the links of an NPU that ``algorithm`` keeps busy at once in a dimension of ``size`` NPUs in which an NPU
    has ``links`` links."""
    return max(1, min(PARALLEL_FLOWS[algorithm](size), links))


def steps(algorithm: str, size: int) -> int:
    """The steps of one reduce-scatter or all-gather stage (each waits for the one before)."""
    return 1 if algorithm == "direct" else size - 1


def of_fabric(fabric) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(algorithm, links used) per dimension of a fabric: its ``dim_algorithms``, or ring where it has none (torus,
    mesh, rail_optimized)."""
    algorithms = fabric.dim_algorithms or ("ring",) * len(fabric.dims)
    links = fabric.dim_links or (1,) * len(fabric.dims)
    return algorithms, tuple(links_used(a, p, n) for a, p, n in zip(algorithms, fabric.dims, links))
