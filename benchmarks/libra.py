"""LIBRA's bandwidth split on LIBRA's own inputs, against `roce-emu design`'s.

LIBRA (Won et al., ISPASS 2024; github.com/astra-sim/libra) splits an NPU's bandwidth across
the dimensions of a multi-dimensional network. Its inputs for the 3-D case:

- ``inputs/network/3d_network.yml``: Ring 16 x FullyConnected 8 x Switch 32 (4,096 NPUs);
- ``inputs/workload/ResNet_50.txt``: one weight-gradient All-Reduce of 51,005,824 bytes per NPU;
- ``inputs/communicator/ResNet_50_3d.yml``: that All-Reduce over all three dimensions (DP 4096);
- ``inputs/constraints/total_bw_500gbps.py``: the NPU's bandwidths sum to 500 GB/s.

Its model (``src/model/model.py``): the All-Reduce moves m_d = 2 (p_d - 1) / p_d x S /
(p_0 ... p_{d-1}) bytes per NPU on dimension d at the dimension's whole bandwidth b_d, and with
the dimensions overlapped the collective takes max_d m_d / b_d. Its solver (Gurobi) needs a
licence, but with every All-Reduce over every dimension the optimum is closed-form: every
dimension takes as long, b_d = 500 x m_d / sum_j m_j.

roce-emu's design (roce_emu/design.py) gets the same split when each dimension's algorithm
keeps all of an NPU's links in it busy (the defaults, ``topology.dim_algorithms``); with one-way
rings everywhere (``dim_algorithms: ring``) it uses one link of a ring or a full mesh, and
splits differently. The design needs no packet-level run, so this builds no fabric (4,096 NPUs
take minutes to build): it calls ``design.design`` on the scenario with the All-Reduce as the
workload builds it.

    python benchmarks/libra.py
"""

from types import SimpleNamespace

import numpy as np

from roce_emu import design
from roce_emu.config.schema import Scenario
from roce_emu.workload.collectives import Collective

#: LIBRA's inputs (see the module docstring)
DIMS = [("ring", 16), ("fully_connected", 8), ("switch", 32)]
ALL_REDUCE_BYTES = 51_005_824
BUDGET_GBYTES = 500.0
#: what LIBRA's model gives for them, as the issue quotes it (GB/s per NPU per dimension)
LIBRA_QUOTED = (469.0, 27.0, 3.8)


def libra_split(sizes, nbytes: float, budget: float) -> np.ndarray:
    """LIBRA's optimum with the dimensions overlapped: b_d proportional to m_d."""
    m, held = [], float(nbytes)
    for p in sizes:
        m.append(2 * (p - 1) / p * held)
        held /= p
    return budget * np.array(m) / sum(m)


def scenario(dim_algorithms=None) -> Scenario:
    topology = {"kind": "multi_dim", "dims": [{"size": p, "kind": k} for k, p in DIMS]}
    if dim_algorithms is not None:
        topology["dim_algorithms"] = dim_algorithms
    return Scenario.model_validate(
        {
            "name": "libra_resnet50_3d",
            "topology": topology,
            "workload": {
                "collectives": [{"kind": "all_reduce", "algorithm": "hierarchical", "bytes": ALL_REDUCE_BYTES}]
            },
        }
    )


def roce_emu_split(dim_algorithms=None) -> np.ndarray:
    """`roce-emu design --budget-gbps 4000` (500 GB/s): each dimension's links x designed rate, in GB/s."""
    sc = scenario(dim_algorithms)
    npus = int(np.prod([p for _, p in DIMS]))
    ar = Collective("ar", "all_reduce", "hierarchical", list(range(npus)), ALL_REDUCE_BYTES, 1, 0)
    best, _ = design.design(sc, SimpleNamespace(collectives=[ar]), "libra", BUDGET_GBYTES * 8, "max")
    return best.weights * best.rates_gbps / 8


def main() -> None:
    libra = libra_split([p for _, p in DIMS], ALL_REDUCE_BYTES, BUDGET_GBYTES)
    rows = [
        ("LIBRA's model, closed form", libra),
        ("roce-emu design, default dim_algorithms (ring_bidir, direct, ring)", roce_emu_split()),
        ("roce-emu design, dim_algorithms: ring", roce_emu_split("ring")),
    ]
    print("| split of 500 GB/s per NPU | Ring 16 | FullyConnected 8 | Switch 32 |")
    print("|---|---|---|---|")
    print(f"| LIBRA, as quoted | {' | '.join(f'{x:g}' for x in LIBRA_QUOTED)} |")
    for label, gbytes in rows:
        print(f"| {label} | {' | '.join(f'{x:.2f}' for x in gbytes)} |")


if __name__ == "__main__":
    main()
