"""Per-dimension algorithms of hierarchical collectives on a multi_dim fabric
(``topology.dim_algorithms``, workload/dim_algorithms.py): the defaults per dimension kind, the
links each algorithm keeps busy (wire bytes on every direction of every dimension link), the
time against the alpha-beta closed forms, and bad input."""

import numpy as np
import pytest
import yaml

from conftest import cli, scenario, simulate
from roce_emu.config.schema import MultiDim
from roce_emu.core.paths import ser_ps
from roce_emu.results.links import port_bytes
from roce_emu.workload import dim_algorithms
from test_collectives import ACK, DATA, MTU, tau_ps

RING4 = {"size": 4, "kind": "ring", "rate_gbps": 100, "delay_ns": 500}
FC4 = {"size": 4, "kind": "fully_connected", "rate_gbps": 100, "delay_ns": 500}
SWITCH4 = {"size": 4, "kind": "switch", "rate_gbps": 100, "delay_ns": 500}


def all_reduce(dims, nbytes, **topology):
    return scenario(
        topology={"kind": "multi_dim", "dims": dims, **topology},
        workload={"collectives": [{"name": "ar", "kind": "all_reduce", "algorithm": "hierarchical", "bytes": nbytes}]},
    )


@pytest.mark.quick
def test_defaults_follow_the_dimension_kind_and_one_name_sets_all():
    topo = MultiDim(dims=[RING4, FC4, SWITCH4])
    assert topo.algorithms() == ("ring_bidir", "direct", "ring")
    assert MultiDim(dims=[RING4, FC4, SWITCH4], dim_algorithms="ring").algorithms() == ("ring",) * 3
    listed = MultiDim(dims=[RING4, FC4, SWITCH4], dim_algorithms=["ring", "ring_bidir", "direct"])
    assert listed.algorithms() == ("ring", "ring_bidir", "direct")


@pytest.mark.quick
def test_links_used_closed_forms():
    """u: ring one link, ring_bidir two (one on a ring of 2 and through a switch), direct p - 1
    on a fully connected dimension and one through a switch."""
    assert dim_algorithms.links_used("ring", 8, 7) == 1
    assert dim_algorithms.links_used("ring_bidir", 16, 2) == 2
    assert dim_algorithms.links_used("ring_bidir", 2, 1) == 1
    assert dim_algorithms.links_used("ring_bidir", 32, 1) == 1
    assert dim_algorithms.links_used("direct", 8, 7) == 7
    assert dim_algorithms.links_used("direct", 32, 1) == 1
    assert [dim_algorithms.steps(a, 8) for a in ("ring", "ring_bidir", "direct")] == [7, 7, 1]


def dimension_link_bytes(res, k: int) -> np.ndarray:
    """Wire bytes sent by every direction of dimension k's links (router to router)."""
    fabric = res.prepared.fabric
    ports = [p for p, tier in enumerate(fabric.port_tier) if tier == f"dim{k}"]
    return port_bytes(res.outcome.world).sum(axis=1)[ports]


def test_every_link_of_a_dimension_carries_its_share():
    """4 MB on ring 4 x fully connected 4 (16 NPUs). ring_bidir: each direction of each ring link
    carries half the data, (p - 1) / p x 4 MB, with the other direction's ACKs; direct: each
    direction of each of the 6 full-mesh links of a group carries 2 x 1 MB / 4 (the 1 MB left
    after the ring's reduce-scatter). One-way rings (dim_algorithms: ring) leave one direction of
    each ring link and 2 of the 3 links of every NPU in the full mesh with ACKs only."""
    n = 4_000_000
    default = simulate(all_reduce([RING4, FC4], n))
    wire = (DATA + ACK) / MTU  # data one way, the reverse direction's ACKs
    ring_dir = dimension_link_bytes(default, 0)
    mesh_dir = dimension_link_bytes(default, 1)
    assert len(ring_dir) == 2 * 16 and len(mesh_dir) == 2 * 6 * 4
    assert ring_dir == pytest.approx(np.full(len(ring_dir), 3 / 4 * n * wire), rel=0.01)
    assert mesh_dir == pytest.approx(np.full(len(mesh_dir), 2 * n / 4 / 4 * wire), rel=0.01)

    old = simulate(all_reduce([RING4, FC4], n, dim_algorithms="ring"))
    ring_dir, mesh_dir = dimension_link_bytes(old, 0), dimension_link_bytes(old, 1)
    acks_only = ACK / DATA * 2  # well below a direction that carries data
    heavy = [int((d > acks_only * d.max()).sum()) for d in (ring_dir, mesh_dir)]
    assert heavy == [16, 16]  # one direction of each ring link; in the mesh, each NPU to its next only
    assert ring_dir.max() == pytest.approx(2 * 3 / 4 * n * DATA / MTU, rel=0.01)


def step_ps(payload: float, rate_gbps: float, host_gbps: float, delay_ns: float, with_acks: bool) -> float:
    """One step between neighbours in a dimension: NPU host link (no delay) -> dimension link ->
    host link, as tests/test_collectives.py's ring steps."""
    rate, host = int(rate_gbps * 1e9), int(host_gbps * 1e9)
    alpha = 2 * ser_ps(DATA, host) + delay_ns * 1000
    return alpha + payload * tau_ps(rate, with_acks=with_acks)


@pytest.mark.parametrize(
    "dim, algorithm, predicted",
    [
        # one-way ring: 2 (p - 1) steps of N / p; the reverse direction carries the ACKs only
        (RING4, "ring", lambda n: 6 * step_ps(n / 4, 100, 200, 500, with_acks=False)),
        # both ways round: 2 (p - 1) steps of N / 2p on each direction, with the other way's ACKs
        (RING4, "ring_bidir", lambda n: 6 * step_ps(n / 8, 100, 200, 500, with_acks=True)),
        # direct on the full mesh: a reduce-scatter and an all-gather step of N / p on every link
        (FC4, "direct", lambda n: 2 * step_ps(n / 4, 100, 300, 500, with_acks=True)),
    ],
)
def test_one_dimension_time_matches_the_closed_form(dim, algorithm, predicted):
    n = 8_000_000
    res = simulate(all_reduce([dim], n, dim_algorithms=algorithm))
    measured = res.summary["iteration_ns"][0] * 1000
    print(f"{dim['kind']} {algorithm}: {measured / 1e6:.1f} us, alpha-beta {predicted(n) / 1e6:.1f} us")
    assert measured == pytest.approx(predicted(n), rel=0.03)


@pytest.mark.parametrize(
    "value, message",
    [
        ("[ring, direct]", "topology.dim_algorithms: has 2 entries for 3 dimensions"),
        ("spiral", "topology.dim_algorithms"),
        (
            "direct",
            "topology.dim_algorithms: 'direct' cannot run on dimension 0 (a ring; allowed there: ring, ring_bidir)",
        ),
    ],
)
def test_bad_dim_algorithms_is_one_line_exit_2(tmp_path, value, message):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(all_reduce([RING4, FC4, SWITCH4], 1000).model_dump(mode="json")))
    p = cli("validate", path, "--set", f"topology.dim_algorithms={value}", timeout=300)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert str(path) in p.stderr and message in p.stderr
