"""ASTRA-sim network and system files, read as roce-emu scenario sections.

The analytical backend's network YAML lists one entry per dimension, innermost first::

    topology: [ Ring, FullyConnected, Switch ]
    npus_count: [ 2, 8, 4 ]
    bandwidth: [ 200.0, 100.0, 50.0 ]   # GB/s, per link and direction
    latency: [ 50.0, 500.0, 2000.0 ]    # ns

It maps one to one onto ``topology.kind: multi_dim``: a dimension's building block becomes its
``kind`` (ring, fully_connected, switch), ``npus_count`` its ``size``, ``bandwidth`` (GB/s) times
8 its ``rate_gbps`` and ``latency`` its ``delay_ns``. docs/importers.md gives the mapping and
what roce-emu models that the analytical backend does not.

The system JSON picks each collective's algorithm per dimension; ``read_system`` maps it onto
roce-emu's collective algorithms where one exists, and ``scenario`` the All-Reduce's per-dimension
choices onto ``topology.dim_algorithms`` (``dimension_algorithms``).
"""

import json
from pathlib import Path

from ..config.load import load_yaml
from ..config.schema import ALGORITHMS, DIM_ALGORITHM_DEFAULT, DIM_ALGORITHM_KINDS
from ..errors import ScenarioError

#: ASTRA-sim's building blocks and roce-emu's dimension kinds
BLOCKS = {"ring": "ring", "fullyconnected": "fully_connected", "switch": "switch"}
#: network keys and what they become; any other key is named as unsupported
NETWORK_KEYS = ("topology", "npus_count", "bandwidth", "latency")
#: per-dimension collective implementations of the system JSON and roce-emu's algorithms
IMPLEMENTATIONS = {"ring": "ring", "direct": "direct", "halvingdoubling": "halving_doubling"}
GBYTES_TO_GBITS = 8


def read_text(path: Path) -> str:
    """A file's text, or one ScenarioError line naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(str(path), "", "no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError(str(path), "", f"cannot read: {err}") from None


def read_yaml_mapping(path: Path) -> dict:
    source = str(path)
    text = read_text(path)
    doc = load_yaml(text, source)
    if not isinstance(doc, dict):
        raise ScenarioError(source, "", "expected a mapping with topology, npus_count, bandwidth and latency")
    return doc


def network_dims(path: Path | str) -> list[dict]:
    """The ``dims`` of a ``multi_dim`` topology equivalent to the ASTRA-sim network file."""
    path = Path(path)
    source = str(path)
    doc = read_yaml_mapping(path)
    unknown = [k for k in doc if k not in NETWORK_KEYS]
    if unknown:
        raise ScenarioError(source, unknown[0], f"not supported (supported keys: {', '.join(NETWORK_KEYS)})")
    lists = {}
    for key in NETWORK_KEYS:
        value = doc.get(key)
        if value is None:
            raise ScenarioError(source, key, "required key is missing")
        lists[key] = value if isinstance(value, list) else [value]
    n = len(lists["topology"])
    if not 1 <= n <= 6:
        raise ScenarioError(source, "topology", f"{n} dimensions; roce-emu's multi_dim takes 1 to 6")
    dims = []
    for key in NETWORK_KEYS[1:]:
        if len(lists[key]) != n:
            raise ScenarioError(source, key, f"{len(lists[key])} entries for {n} dimensions (one per dimension)")
    for i in range(n):
        block = str(lists["topology"][i])
        kind = BLOCKS.get(block.lower())
        if kind is None:
            raise ScenarioError(
                source, f"topology.{i}", f"'{block}' is not a building block (allowed: Ring, FullyConnected, Switch)"
            )
        size = _number(source, f"npus_count.{i}", lists["npus_count"][i], whole=True, least=2)
        gbytes = _number(source, f"bandwidth.{i}", lists["bandwidth"][i], least=1e-9)
        latency = _number(source, f"latency.{i}", lists["latency"][i], least=0)
        dims.append(
            {"size": int(size), "kind": kind, "rate_gbps": float(gbytes * GBYTES_TO_GBITS), "delay_ns": float(latency)}
        )
    return dims


def _number(source: str, key: str, value, whole: bool = False, least: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(source, key, f"{value!r} is not a number")
    if whole and value != int(value):
        raise ScenarioError(source, key, f"{value!r} is not a whole number")
    if value < least:
        raise ScenarioError(source, key, f"{value!r} is below {least:g}")
    return value


def topology_section(path: Path | str, extra: dict | None = None) -> dict:
    """The ``topology`` mapping (kind multi_dim) for the network file; ``extra`` holds the
    other keys of the scenario's astra_sim section (``tiers``, ``link``)."""
    return {"kind": "multi_dim", "dims": network_dims(path), **(extra or {})}


def read_system(path: Path | str) -> tuple[dict, int | None, list[str], dict]:
    """From an ASTRA-sim system JSON: roce-emu's algorithm for each collective kind it names
    (``{"all_reduce": "hierarchical", ...}``), the chunks a collective is cut into
    (``preferred-dataset-splits``), one note per key or choice roce-emu does not model, and each
    kind's implementations per dimension (``{"all_reduce": ["ring", "direct"]}``, roce-emu's
    names). Several dimensions become ``hierarchical``, which runs each dimension's algorithm
    (``dimension_algorithms``); one dimension keeps its algorithm."""
    path = Path(path)
    source = str(path)
    text = read_text(path)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise ScenarioError(source, "", f"invalid JSON: line {err.lineno}: {err.msg}") from None
    if not isinstance(doc, dict):
        raise ScenarioError(source, "", "expected a JSON object")
    algorithms, chunks, notes, per_dim = {}, None, [], {}
    for key, value in doc.items():
        if key == "preferred-dataset-splits":
            chunks = int(_number(source, key, value, whole=True, least=1))
            continue
        kind = key.removesuffix("-implementation").replace("-", "_")
        if not key.endswith("-implementation") or kind not in ALGORITHMS:
            notes.append(f"{key}: not modelled by roce-emu")
            continue
        names = value if isinstance(value, list) else [value]
        choices = [IMPLEMENTATIONS.get(str(v).lower()) for v in names]
        if None in choices:
            bad = names[choices.index(None)]
            raise ScenarioError(
                source, key, f"'{bad}' is not an implementation roce-emu has (allowed: ring, direct, halvingDoubling)"
            )
        chosen = choices[0] if len(choices) == 1 else "hierarchical"
        if chosen not in ALGORITHMS[kind]:
            chosen = ALGORITHMS[kind][0]
            notes.append(f"{key}: {names} has no roce-emu equivalent for {kind}; using {chosen}")
        elif chosen == "hierarchical" and "halving_doubling" in choices:
            notes.append(f"{key}: {names} per dimension; halvingDoubling runs as the dimension's default algorithm")
        algorithms[kind] = chosen
        per_dim[kind] = choices
    return algorithms, chunks, notes, per_dim


def dimension_algorithms(choices: list[str], dims: list[dict]) -> list[str]:
    """``topology.dim_algorithms`` for the All-Reduce's implementations per dimension: a ring
    runs both ways round on a ring dimension (all its links busy, as ASTRA-sim's rings on a Ring),
    one way elsewhere; direct where the dimension allows it; anything else (halvingDoubling,
    direct on a ring) the dimension's default."""
    out = []
    for choice, dim in zip(choices, dims):
        if choice == "ring":
            out.append("ring_bidir" if dim["kind"] == "ring" else "ring")
        elif choice in DIM_ALGORITHM_KINDS and dim["kind"] in DIM_ALGORITHM_KINDS[choice]:
            out.append(choice)
        else:
            out.append(DIM_ALGORITHM_DEFAULT[dim["kind"]])
    return out


def scenario(
    network: Path | str, system: Path | str | None = None, nbytes: int = 64 << 20, name: str | None = None
) -> tuple[dict, list[str], list[str]]:
    """A scenario document for the network file (its fabric written out as multi_dim) with one
    all-reduce of ``nbytes`` per NPU, run the way the system file says; the notes of what was
    not carried over; and the files read (as importers/ns3.py's scenario)."""
    network = Path(network)
    algorithms, chunks, notes, per_dim = read_system(system) if system is not None else ({}, None, [], {})
    dims = network_dims(network)
    default = "hierarchical" if len(dims) > 1 else "ring"
    collective = {"kind": "all_reduce", "algorithm": algorithms.get("all_reduce", default), "bytes": int(nbytes)}
    if chunks is not None:
        collective["chunks"] = chunks
    stem = name or network.stem.replace(" ", "_")
    topology: dict = {"kind": "multi_dim", "dims": dims}
    choices = per_dim.get("all_reduce", [])
    if collective["algorithm"] == "hierarchical" and len(choices) == len(dims):
        topology["dim_algorithms"] = dimension_algorithms(choices, dims)
    doc = {"name": stem, "topology": topology, "workload": {"collectives": [collective]}}
    return doc, notes, [str(network)] + ([str(system)] if system is not None else [])
