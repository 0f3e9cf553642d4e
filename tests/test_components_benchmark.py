"""benchmarks/components.py on hand-made flows: which flows form a component, and which
components share a memo key."""

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("components_benchmark", ROOT / "benchmarks" / "components.py")
assert _spec is not None and _spec.loader is not None
C = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(C)

Q = 1000  # ps: a packet's serialisation time in these flows


def flows(spec) -> "C.Flows":
    """spec: per flow (bytes, start, end, data ports, ACK ports); every hop 100 Gb/s, 1 us, and a
    flow occupies each of its ports over [start, end)."""
    data = [tuple(s[3]) for s in spec]
    ack = [tuple(s[4]) for s in spec]
    ports = {p for path in data + ack for p in path}
    return C.Flows(
        name="hand-made",
        bytes=np.array([s[0] for s in spec], np.int64),
        start=np.array([s[1] for s in spec], np.int64),
        delivered=np.array([s[2] for s in spec], np.int64),
        finish=np.array([s[2] for s in spec], np.int64),
        data=data,
        ack=ack,
        hop={p: (100.0, 1000.0) for p in ports},
        data_iv=[[(s[1], s[2])] * len(s[3]) for s in spec],
        ack_iv=[[(s[1], s[2])] * len(s[4]) for s in spec],
        quantum=np.full(len(spec), Q, np.int64),
        ack_every=1,
        iterations=1,
        wall_s=0.0,
    )


def groups(fl, variant="data") -> list[list[int]]:
    occupancy = C.port_occupancy(fl)
    data = C.overlaps(occupancy, lambda a, b: not a and not b)
    mixed = C.overlaps(occupancy, lambda a, b: a != b)
    return C.components(len(fl.bytes), data + mixed if variant == "data+ack" else data)


def test_flows_sharing_a_port_at_once_form_one_component():
    fl = flows(
        [
            (100, 0, 50_000, [1, 2], [5, 6]),
            (100, 10_000, 60_000, [3, 2], [7, 8]),  # meets flow 0 at port 2
            (100, 60_000, 90_000, [4, 2], [9, 10]),  # port 2 again, after both ended
            (100, 0, 50_000, [11, 12], [1, 13]),  # its ACKs cross flow 0's first port
        ]
    )
    assert groups(fl) == [[0, 1], [2], [3]]
    assert groups(fl, "data+ack") == [[0, 1, 3], [2]]


def test_isomorphic_components_share_a_key_and_offsets_are_quantised():
    def pair(ports, bytes_b=200, offset_b=0):
        return [(100, 0, 50_000, [ports[0], ports[1]], []), (bytes_b, offset_b, 60_000, [ports[2], ports[1]], [])]

    base = flows(pair([1, 2, 3]))

    def key(spec, q=1):
        fl = flows(spec)
        return C.component_key(fl, [0, 1], "data", q, {})

    reference = C.component_key(base, [0, 1], "data", 1, {})
    assert key(pair([7, 9, 8])) == reference  # other port names
    assert key(pair([7, 9, 8], offset_b=Q - 1)) == reference  # within one packet
    assert key(pair([7, 9, 8], bytes_b=300)) != reference
    assert key(pair([7, 9, 8], offset_b=5 * Q)) != reference
    assert key(pair([7, 9, 8], offset_b=5 * Q), q=10) == C.component_key(base, [0, 1], "data", 10, {})
    # the two flows listed the other way round: the same component
    swapped = pair([1, 2, 3])[::-1]
    assert key(swapped) == reference


def test_foreign_acks_are_part_of_the_key_not_of_the_component():
    fl = flows([(100, 0, 50_000, [1, 2], []), (100, 0, 50_000, [3, 4], [1, 5])])
    comps = groups(fl)
    assert comps == [[0], [1]]
    comp_of = np.array([0, 1])
    mixed = C.overlaps(C.port_occupancy(fl), lambda a, b: a != b)
    foreign = C.foreign_acks(fl, comp_of, mixed)
    assert foreign == {0: [(0, 1)]}
    with_acks = C.component_key(fl, [0], "data, ack as key", 1, foreign)
    assert with_acks != C.component_key(fl, [0], "data, ack as key", 1, {})
