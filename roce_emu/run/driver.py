"""Run the engine in slices: progress bar, pool growth, stall and time limits, Ctrl-C."""

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from tqdm import tqdm

from ..core import CACHE_DIR
from ..core import kinds as K
from ..core.fastforward import advance_ff
from ..core import memo as mm_kernel
from ..core.loop import advance
from ..core.state import World
from .inputs import MemoSettings
from .invariants import InvariantError, check_world
from .world import grow, grow_fast_forward, grow_qps, new_fast_forward


@dataclass
class RunOutcome:
    world: World
    status: str  # finished | incomplete | stalled
    reason: str
    wall_s: float
    load_s: float = 0.0  # compiling or loading the engine before the run
    # every trace row of the run (kinds.TR_*), in time order
    trace: np.ndarray = field(default_factory=lambda: np.zeros((0, K.TR_COLS), np.int64))
    memo: dict | None = None  # sim.fast_forward: memo: what the memo did (memo_report)


def memo_report(mm, table) -> dict:
    """summary.json's ``memo`` block (``table``: memo.new_memo's)."""
    m = mm.meta
    sampled = int(m[mm_kernel.MM_ERR_FLOWS])
    index, _, _, volatile = table
    return {
        "components": int(m[mm_kernel.MM_VIRTUAL]),
        "distinct_keys": len(index) + len(volatile),
        "hits": int(m[mm_kernel.MM_HITS]),
        "misses": int(m[mm_kernel.MM_MISSES]),
        "volatile": int(m[mm_kernel.MM_VOLATILE]),
        "materialised": int(m[mm_kernel.MM_MATERIALISED]),
        "flows_replayed_or_recorded": int(m[mm_kernel.MM_MEMO_FLOWS]),
        "flows_in_engine": int(m[mm_kernel.MM_EXACT_FLOWS]),
        "events_skipped": int(m[mm_kernel.MM_SKIPPED_EVENTS]),
        "sampled_components": int(m[mm_kernel.MM_SAMPLED]),
        "sampled_flows": sampled,
        "sample_max_error": float(m[mm_kernel.MM_ERR_MAX_PPM]) / 1e6,
        "sample_mean_error": float(m[mm_kernel.MM_ERR_SUM_PPM]) / 1e6 / sampled if sampled else 0.0,
    }


#: the sampled replays' largest difference of a flow's finish from the exact engine's, relative to
#: its duration, above which a run warns (memo_warning)
MEMO_SAMPLE_WARN = 0.01


def memo_warning(report: dict | None) -> str:
    """What a run warns of when the memo's sampled replays differ from the exact engine by more than
    MEMO_SAMPLE_WARN ('' otherwise, and without the memo)."""
    if report is None or report["sample_max_error"] <= MEMO_SAMPLE_WARN:
        return ""
    return (
        f"the memo's sampled replays differ from the exact engine by up to {100 * report['sample_max_error']:.2f} % "
        f"of a flow's duration ({report['sampled_components']} components run again; mean "
        f"{100 * report['sample_mean_error']:.2f} %): a component's key misses what decides its outcome, so "
        "check the result with sim.fast_forward: off"
    )


def flush_trace(world: World, chunks: list) -> None:
    """Move the trace rows the engine wrote since the last flush into chunks."""
    n = int(world.meta[K.M_TRACE_ROWS])
    if n:
        chunks.append(world.trace[:n].copy())
        world.meta[K.M_TRACE_ROWS] = 0


@dataclass(frozen=True)
class Limits:
    """When a run stops if its work is not done: simulated time, events, and wall-clock time.

    The first two are deterministic (the event budget of every slice is cut to what is left);
    the wall-clock limit is checked between slices, so where it stops depends on the machine."""

    max_time_ps: int
    max_events: int = 10**10
    max_wall_s: float = 86_400.0


#: about how long each kernel's cold compile takes on one core (2026-12-08; the event handlers are
#: inlined into ``advance``, which the fast-forward kernels call), for the notice before it compiles
COMPILE_S = {"advance": 70, "advance_ff": 45, "advance_memo": 95}


def _cached(kernel) -> bool:
    """Whether the kernel's machine code is in the cache (or nothing compiles: NUMBA_DISABLE_JIT=1
    runs the kernels as plain Python)."""
    if not hasattr(kernel, "py_func"):
        return True
    module = kernel.py_func.__module__.rsplit(".", 1)[-1]
    return CACHE_DIR.is_dir() and any(CACHE_DIR.rglob(f"{module}.{kernel.py_func.__name__}-*.nbi"))


def compile_notice(kernel) -> str:
    """What to tell the user before a kernel compiles ('' if its machine code is cached)."""
    needed = [k for k in dict.fromkeys((advance, kernel)) if not _cached(k)]
    if not needed:
        return ""
    what = "the fast-forward kernel" if kernel is not advance else "the engine"
    seconds = sum(COMPILE_S[k.py_func.__name__] for k in needed)
    return f"compiling {what} for this version (about {seconds} s, once; cached in {CACHE_DIR})"


@contextmanager
def compiling(kernel):
    """Hold a lock on the cache while this process compiles or loads ``kernel``, so that the
    processes sharing a cache (a sweep's local jobs, dask workers on one machine, test workers)
    compile each kernel once: the others wait, then load it. A no-op where it is cached, and
    without ``fcntl`` (Windows)."""
    if _cached(kernel):
        yield
        return
    try:
        import fcntl
    except ImportError:
        yield
        return
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with open(CACHE_DIR / f"compiling-{kernel.py_func.__name__}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def simulate(
    world: World,
    limits: Limits,
    slice_events: int,
    progress: bool | None = None,
    label: str = "",
    check: bool = False,
    exact_jumps: bool = False,
    memo: MemoSettings | None = None,
) -> RunOutcome:
    """Advance the world until every event is processed, a limit, a stall or a broken invariant;
    with ``check``, also run the expensive invariant checks after every slice; with
    ``exact_jumps`` (sim.fast_forward: exact), run the fast-forward kernel, which jumps over the
    periods in which the network repeats itself, exactly. Packet trains need nothing here: the
    world's configuration turns them on (world.train_limit)."""
    n_flows = int(world.cfg[K.CFG_N_FLOWS])
    fast = new_fast_forward(world) if exact_jumps else None
    mm, table = None, ()
    if memo is not None:
        mm, table = mm_kernel.new_memo(world, memo.sample_per_mille, memo.seed, not memo.enabled)
        world.cfg[K.CFG_STOP_AT_START] = 1

    def step(budget: int) -> int:
        if mm is not None:
            return mm_kernel.advance_memo(world, mm, *table, limits.max_time_ps, budget)
        if fast is None:
            return advance(world, limits.max_time_ps, budget)
        return advance_ff(world, fast, limits.max_time_ps, budget)

    kernel = advance_ff if exact_jumps else mm_kernel.advance_memo if memo else advance
    notice = compile_notice(kernel)
    if notice and progress is not False:
        print(f"roce-emu: {notice}", file=sys.stderr, flush=True)
    loading = time.perf_counter()
    # compile or load the kernels (not part of the run's time): the engine first, which the
    # fast-forward kernels call (a zero budget processes nothing)
    with compiling(advance):
        advance(world, limits.max_time_ps, 0)
    with compiling(kernel):
        step(0)
    began = time.perf_counter()
    load_s = began - loading
    # progress None lets tqdm decide: a bar on a terminal, nothing otherwise
    disable = None if progress is None else not progress
    chunks: list[np.ndarray] = []
    bar = tqdm(total=n_flows, unit="flow", desc=label or "simulating", disable=disable, leave=False, dynamic_ncols=True)
    limit_reason = ""
    broken = ""
    status = K.ST_BUDGET  # stays so if a limit stops the run before its first slice
    try:
        while True:
            left = limits.max_events - int(world.stats[K.C_EVENTS])
            if left <= 0:
                limit_reason = f"sim.max_events ({limits.max_events}) reached"
                break
            if time.perf_counter() - began > limits.max_wall_s:
                limit_reason = f"sim.max_wall_s ({limits.max_wall_s:g} s) reached"
                break
            status = step(min(slice_events, left))
            if check:
                try:
                    check_world(world)
                except InvariantError as err:
                    broken = str(err)
                    break
            done = int(world.stats[K.C_FLOWS_DONE])
            bar.update(done - bar.n)
            bar.set_postfix_str(f"t={world.stats[K.C_NOW_PS] / 1e6:.1f} us", refresh=False)
            if status == K.ST_BUDGET:
                continue
            if status in (K.ST_POOL_LOW, K.ST_HEAP_LOW):
                world = grow(world)
            if status == K.ST_QP_LOW:
                world = grow_qps(world)
            if fast is not None and status in (K.ST_HEAP_LOW, K.ST_FF_GROW, K.ST_QP_LOW):
                fast = grow_fast_forward(fast, world)
            if status in (K.ST_POOL_LOW, K.ST_HEAP_LOW, K.ST_FF_GROW, K.ST_QP_LOW):
                continue
            if status == K.ST_TRACE_FULL:
                flush_trace(world, chunks)
                continue
            break
    finally:
        bar.close()
    flush_trace(world, chunks)
    trace = np.concatenate(chunks) if chunks else np.zeros((0, K.TR_COLS), np.int64)
    wall_s = time.perf_counter() - began
    done = int(world.stats[K.C_FLOWS_DONE])
    unfinished = f"with {n_flows - done} of {n_flows} flows unfinished"
    all_done = done == n_flows and world.stats[K.C_TASKS_DONE] == int(world.cfg[K.CFG_N_TASKS])
    if broken or status == K.ST_INVARIANT:  # the engine's own check leaves the reason to the caller
        state, reason = "invariant", broken
    elif all_done:  # a limit met after the work ended (waiting for a fault due later) cuts nothing short
        state, reason = "finished", ""
    elif limit_reason:
        state, reason = "incomplete", f"{limit_reason} {unfinished}"
    elif status == K.ST_STALLED:
        state, reason = "stalled", ""
    elif status == K.ST_T_LIMIT:
        state, reason = "incomplete", f"sim.max_time_ns reached {unfinished}"
    else:  # work left and no events: cannot happen
        state, reason = "stalled", "no events left"
    return RunOutcome(world, state, reason, wall_s, load_s, trace, memo_report(mm, table) if mm is not None else None)
