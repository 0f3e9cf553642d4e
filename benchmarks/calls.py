"""Which kernels the event loop calls rather than inlines, from the machine code of ``advance``.

    python benchmarks/calls.py            # compiles advance afresh (about 90 s), lists its calls

A call from one kernel to another passes the world by value, about 212 machine words pushed on
the stack (core/jit.py). A kernel called once per event or per packet should therefore be
inlined (``@njit(inline="always")``); this lists the roce_emu kernels that ``advance`` still
calls, with the number of call sites in its assembly, so that one on the hot path shows up.
Numba shows no assembly for cached code, so this compiles into a temporary cache directory.
"""

import argparse
import os
import re
import sys
import tempfile
from collections import Counter


def demangle(symbol):
    """The dotted name in an Itanium-mangled nested name: _ZN8roce_emu4core4heap9heap_pushB2v9...
    gives roce_emu.core.heap.heap_push (each part is its length, then its characters)."""
    i, parts = 3, []
    while i < len(symbol) and symbol[i].isdigit():
        m = re.match(r"\d+", symbol[i:])
        i += len(m.group())
        parts.append(symbol[i : i + int(m.group())])
        i += int(m.group())
    return ".".join(parts)


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    os.environ["ROCE_EMU_CACHE_DIR"] = tempfile.mkdtemp(prefix="roce_emu_calls_")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from scale import case_resnet

    from roce_emu.api import prepare_scenario
    from roce_emu.config.schema import Scenario
    from roce_emu.core.loop import advance

    doc = {"name": "calls", "seed": 1, **case_resnet(16, 1.0)}
    world = prepare_scenario(Scenario.model_validate(doc)).world
    advance(world, 0, 0)
    asm = advance.inspect_asm(advance.signatures[0])
    loaded = {}  # register -> the symbol last loaded into it (calls go through a register)
    calls = Counter()
    for line in asm.splitlines():
        m = re.search(r"movabsq\s+\$([^,]+),\s*(%\w+)", line)
        if m:
            loaded[m.group(2)] = m.group(1)
        m = re.search(r"\bcallq?\s+\*?(%\w+|[\w.$]+)", line)
        if m:
            calls[loaded.get(m.group(1), m.group(1))] += 1
    print(f"advance: {asm.count(chr(10)):,} lines of assembly; roce_emu kernels it calls (call sites):")
    for symbol, n in calls.most_common():
        if symbol.startswith("_ZN8roce_emu"):
            print(f"{n:4d}  {demangle(symbol)}")
