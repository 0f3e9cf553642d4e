"""Each engine module's docstring says which World arrays its own code reads and writes, and
says it truly: the line is recomputed here from the source (an assignment into ``w.ARRAY[...]``
or into a local name bound to it, a push or pop of the event heap, a draw from the generator)."""

import re
from pathlib import Path

import pytest

pytestmark = [pytest.mark.quick, pytest.mark.nojit]

CORE = Path(__file__).resolve().parent.parent / "roce_emu" / "core"
ARRAYS = (
    "cfg",
    "stats",
    "meta",
    "rng",
    "ev",
    "kick",
    "pkt",
    "pkt_free",
    "port",
    "pq",
    "node",
    "route_off",
    "route_ports",
    "flow",
    "qp",
    "qp_free",
    "ccp",
    "ccs",
    "timer",
    "int_rec",
    "int_prev",
    "trace",
    "task",
    "succ_off",
    "succ",
    "qtask",
    "queue",
    "link_plan",
    "gate_off",
    "gate_in",
    "gate_out",
    "gate_state",
    "irn_bits",
)
#: no World access of their own (constants, the registry, the JIT switch, the generator's kernels),
#: the World's definition, the heap (handed its arrays) and the fast-forward kernels (every array: their docstrings)
NOT_LISTED = {
    "__init__.py",
    "registry.py",
    "jit.py",
    "kinds.py",
    "rng.py",
    "state.py",
    "heap.py",
    "fastforward.py",
    "memo.py",
}


def world_arrays(src: str) -> str:
    lines = src.split("\n")
    used = [a for a in ARRAYS if re.search(rf"\bw\.{a}\b", src)]
    writes = set()
    for a in used:
        names = [rf"w\.{a}"] + [
            re.escape(m.group(1))
            for line in lines
            for m in [re.match(rf"^\s*(\w+)\s*=\s*w\.{a}\b(\[.*\])?\s*$", line)]
            if m
        ]
        if any(re.match(rf"^\s*{n}\[.*\]\s*[-+|&*]?=(?!=)", line) for n in names for line in lines):
            writes.add(a)
    if re.search(r"heap_(push|pop)\(w\.ev, w\.meta", src):
        writes |= {"ev", "meta"}
    if re.search(r"rand_unit\(w\.rng", src):
        writes.add("rng")
    reads = [a for a in used if a not in writes]
    return (
        f"World arrays: reads {', '.join(reads) or 'none'}; "
        f"writes {', '.join(a for a in ARRAYS if a in writes) or 'none'}."
    )


@pytest.mark.parametrize(
    "path", sorted(p for p in CORE.rglob("*.py") if p.name not in NOT_LISTED), ids=lambda p: str(p.relative_to(CORE))
)
def test_each_engine_module_names_the_world_arrays_it_touches(path):
    src = path.read_text()
    doc = " ".join(src.split('"""')[1].split())
    assert world_arrays(src) in doc, f"{path.name}: the docstring should say: {world_arrays(src)}"
