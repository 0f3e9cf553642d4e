"""Command line: ``roce-emu run | topo | validate | sweep | plot | compare | cc | examples | design | import | cache``.

Thin: parse, call the API, report."""

import signal
import sys
from pathlib import Path

import click

from . import __version__
from .core.cc.registry import NAMES as CC_NAMES
from .errors import OutputError, ScenarioError

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100, "show_default": True}
COUNT = click.IntRange(min=1)
FILE = click.Path(path_type=Path)


class Command(click.Command):
    """A command whose bad input (ScenarioError) ends as one line and exit code 2, and whose
    results that cannot be written where asked (OutputError) as one line and exit code 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (ScenarioError, OutputError) as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(2 if isinstance(err, ScenarioError) else 1)


class Group(click.Group):
    command_class = Command
    group_class = type  # sub-groups (import, cache) are Groups too


def _usage_error_one_line(self, file=None) -> None:
    """A bad option or argument is bad input like any other: one line naming it, exit code 2
    (click would print the usage, a hint and the error on three lines)."""
    where = f"{self.ctx.command_path}: " if self.ctx is not None else ""
    click.echo(f"error: {where}{self.format_message()}", err=True, file=file)


click.UsageError.show = _usage_error_one_line  # type: ignore[method-assign]

set_option = click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a scenario key by its dotted path (list items by index); repeatable.",
)


def out_option(help_text: str):
    """``--out``/``-o``: where a command writes; checked before anything is built
    (results/destination.py)."""
    return click.option("--out", "-o", type=FILE, help=help_text)


def progress_option(help_text: str):
    """``--progress/--no-progress``: a progress bar, by default only on a terminal."""
    return click.option("--progress/--no-progress", default=None, help=help_text)


overwrite_option = click.option(
    "--overwrite",
    is_flag=True,
    help="Replace the output if it exists and roce-emu wrote it (a file or folder of yours is never replaced).",
)


class Terminated(BaseException):
    """SIGTERM, raised where Python next runs (between engine slices), unwinding like Ctrl-C."""


def _raise_terminated(signum, frame):
    raise Terminated()


def _stop_on_sigterm() -> None:
    signal.signal(signal.SIGTERM, _raise_terminated)


def _echo_notes(notes, warnings=()) -> None:
    """What an imported input held that roce-emu has no equivalent for, and what the run should
    warn about (run.inputs.run_warnings; both also in summary.json)."""
    for note in notes:
        click.echo(f"note: {note}", err=True)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)


def _echo_written(path: Path) -> None:
    """Where a scenario was written, and how to run it."""
    click.echo(f"{path}  (run it: roce-emu run {path})", err=True)


def _write_imported(out: Path | None, overwrite: bool, read) -> None:
    """An import command: the scenario written (results/scenario_file.py), what was not
    carried over and where it went printed."""
    from .results.scenario_file import import_scenario

    dest, notes = import_scenario(read, out, overwrite)
    _echo_notes(notes)
    _echo_written(dest)


@click.group(cls=Group, context_settings=CONTEXT)
@click.version_option(__version__, prog_name="roce-emu")
def main():
    """Packet-level RoCE congestion-control network emulator.

    \b
    Examples:
      roce-emu run scenarios/incast.yaml
      roce-emu run scenarios/fat_tree_permutation.yaml --set topology.k=8 --out runs/k8
      roce-emu topo scenarios/torus_neighbours.yaml --draw torus.png
      roce-emu validate scenarios/incast.yaml --set network.switch.pfc.enabled=false
      roce-emu run scenarios/cc_hpcc.yaml --set network.cc.params.eta=0.9
      roce-emu run scenarios/training_resnet50.yaml --set network.cc.algorithm=none
      roce-emu cc dcqcn
    """


@main.command()
@click.argument("scenario")
@set_option
@out_option("Run directory to write (default: output.dir, else runs/<scenario name>).")
@progress_option("Progress bar on stderr (default: only on a terminal).")
@click.option(
    "--slice-events", type=COUNT, help="Events per engine slice between progress updates (results do not depend on it)."
)
@click.option(
    "--check", is_flag=True, help="Also run the expensive invariant checks (queues, packet pool) after every slice."
)
@click.option(
    "--seeds",
    "n_seeds",
    type=click.IntRange(min=1),
    default=1,
    help="Run with the scenario's seed, seed + 1, ..., this many: each seed in OUT/seed-<seed>, and seeds.csv and "
    "seeds.json with the mean, standard deviation and 95 % interval of the iteration time (else the last finish).",
)
@overwrite_option
def run(scenario, overrides, out, progress, slice_events, check, n_seeds, overwrite):
    """Simulate a scenario; write flows.csv and summary.json to the run directory.

    The directory is written atomically: it is complete or absent. An existing run
    directory is replaced only with --overwrite, and only if roce-emu wrote it (its marker
    file .roce-emu); any other folder, the current one and those holding it are refused
    before simulating, as is a path that cannot be written. Exit code 0 when the
    run finished (or stopped at sim.max_time_ns, status "incomplete"), 1 on a PFC deadlock
    or stall (the report names the paused ports and stuck flows; results are still
    written) or when the results cannot be written (the line says where they were kept),
    2 on bad input (one line naming the file and key; nothing written), 130 on Ctrl-C and
    143 on SIGTERM (nothing written).

    --seeds N runs seeds seed .. seed + N - 1 into OUT/seed-<seed>, with OUT/seeds.csv and seeds.json
    (mean, s.d. and 95 % Student t interval of the iteration time, else of the last finish).

    \b
    Examples:
      roce-emu run scenarios/incast.yaml --set workload.flows.0.bytes=5e5 --out runs/incast
      roce-emu run scenarios/training_resnet50.yaml --set network.jitter.nic.distribution=exponential --seeds 5
    """
    _stop_on_sigterm()  # first: a signal while the engine's modules load ends as cleanly as one later
    try:
        from . import api
        from .results.console import run_line

        if n_seeds > 1:
            _run_seeds(scenario, overrides, n_seeds, out, overwrite, progress, slice_events, check)
            return
        prepared, target = api.prepare_run(scenario, overrides, out, overwrite)
        _echo_notes(prepared.workload.notes, prepared.warnings)
        result = api.run(prepared, target, progress=progress, slice_events=slice_events, check=check)
    except (KeyboardInterrupt, Terminated) as err:
        click.echo(f"{'terminated' if isinstance(err, Terminated) else 'interrupted'}: nothing written", err=True)
        sys.exit(143 if isinstance(err, Terminated) else 130)
    s = result.summary
    if not result.ok:
        click.echo(f"error: {s['status']}: {s['reason']} (results in {result.out})", err=True)
        sys.exit(1)
    if s["status"] == "incomplete":
        click.echo(f"warning: incomplete: {s['reason']}", err=True)
    _echo_notes((), result.run_warnings)
    click.echo(run_line(s, result.out), err=True)


def _run_seeds(scenario, overrides, n_seeds, out, overwrite, progress, slice_events, check) -> None:
    """run --seeds: every seed's line as it ends, then the statistics; exit 1 if a seed failed."""
    from . import api
    from .results.console import run_line
    from .results.seeds import failed_seed_lines, seeds_line

    ended: list = []

    def each(result) -> None:
        if not ended:  # the notes and warnings are every seed's: once
            _echo_notes(result.prepared.workload.notes, result.prepared.warnings)
        ended.append(result)
        _echo_notes((), result.run_warnings)
        click.echo(run_line(result.summary, f"seed-{result.summary['seed']}"), err=True)

    done = api.run_seeds(scenario, tuple(overrides), n_seeds, out, overwrite, progress, slice_events, check, each)
    for line in [*failed_seed_lines(done.runs), seeds_line(done.info, done.out)]:
        click.echo(line, err=True)
    if not done.ok:
        sys.exit(1)


@main.command()
@click.argument("scenario")
@set_option
@click.option(
    "--draw",
    "draw_to",
    type=FILE,
    help="Also draw the fabric to this file (.png, .pdf or .svg; missing folders are created).",
)
@overwrite_option
@click.option(
    "--links",
    "list_links",
    is_flag=True,
    help="List every link instead (CSV: node_a,node_b,tier,rate_gbps,delay_ns), with the node names that faults: use.",
)
def topo(scenario, overrides, draw_to, overwrite, list_links):
    """Summarise a scenario's fabric: hosts, switches, links, diameter, bisection bandwidth.

    \b
    Examples:
      roce-emu topo scenarios/fat_tree_permutation.yaml --set topology.k=8 --draw ft8.pdf
      roce-emu topo scenarios/link_failure.yaml --links | grep core2
    """
    from .config import load_scenario
    from .fabric.topology import build_fabric
    from .fabric.summary import describe, draw, link_rows
    from .results.destination import check_image

    sc = load_scenario(scenario, list(overrides))
    if draw_to is not None:
        check_image(draw_to, "--draw", overwrite)
    fabric = build_fabric(sc.topology)
    if list_links:
        click.echo("\n".join(link_rows(fabric)))
        return
    for key, value in describe(fabric).items():
        click.echo(f"{key:>24}: {value}")
    if draw_to is not None:
        draw(fabric, draw_to)
        click.echo(f"{'drawing':>24}: {draw_to}")


@main.command()
@click.argument("scenario")
@set_option
@click.option("--print-normalized", is_flag=True, help="Print the scenario with every default filled in.")
def validate(scenario, overrides, print_normalized):
    """Check a scenario (schema, host ids, buffers, faults, memory) without simulating it. It
    does not load the engine, except with --print-normalized, which computes the parameters a
    run would use (the fabric's base RTT among them).

    \b
    Example:
      roce-emu validate scenarios/incast.yaml --print-normalized
    """
    if print_normalized:
        import yaml

        from . import api

        prepared = api.prepare(scenario, list(overrides))
        click.echo(yaml.safe_dump(api.normalized_document(prepared), sort_keys=False))
        return
    from .run.inputs import load_inputs, run_warnings

    inputs = load_inputs(scenario, list(overrides))
    _echo_notes(inputs.workload.notes, run_warnings(inputs.scenario, inputs.fabric, inputs.workload))
    w = inputs.workload
    click.echo(f"{scenario}: ok ({len(w.flows)} flows, {len(w.tasks)} tasks, {inputs.fabric.n_hosts} hosts)")


@main.command()
@click.argument("sweep_or_scenario")
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="KEY=V1,V2,...",
    help="A swept key and its values; repeatable (the points are the product).",
)
@set_option
@click.option("--repeat", type=COUNT, help="Seeds per point: the scenario's seed, seed + 1, ... (default 1).")
@click.option("--jobs", "-j", type=COUNT, default=1, help="Local worker processes.")
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Run the points on this dask.distributed scheduler (tcp://host:port) instead.",
)
@out_option("Sweep directory: new, empty or an earlier sweep's (default: sweeps/<scenario name>).")
@progress_option("Progress bar (default: only on a terminal).")
def sweep(sweep_or_scenario, grid, overrides, repeat, jobs, scheduler, out, progress):
    """Run a scenario over a grid of overrides and seeds; resumable; results.csv for pandas.

    SWEEP_OR_SCENARIO is a scenario file with --grid options, or a sweep file (YAML:
    scenario, grid, repeat, set). Each point runs in its own process and writes
    OUT/points/<hash>/ atomically; running the same sweep again skips finished points. A
    point that fails is recorded with its status and reason. OUT/results.csv has one row
    per point: the swept keys, then the summary fields. Ctrl-C (exit 130) or SIGTERM
    (143) stops the workers and keeps the finished points; no new point starts.

    \b
    Examples:
      roce-emu sweep scenarios/cc_none.yaml --grid network.cc.algorithm=none,dcqcn,hpcc,timely,dctcp
      roce-emu sweep scenarios/fat_tree_permutation.yaml --grid topology.k=4,8 --repeat 3 -j 2
      roce-emu sweep benchmarks/cc_ablation.yaml --scheduler tcp://10.0.0.5:8786 --out sweeps/ablation
    """
    from .sweep import default_out_dir, run_sweep, sweep_spec

    try:
        spec = sweep_spec(sweep_or_scenario, grid, overrides, repeat)
        _stop_on_sigterm()
        target = out or default_out_dir(sweep_or_scenario)
        ran, total, results = run_sweep(spec, target, jobs=jobs, scheduler=scheduler, progress=progress)
    except (KeyboardInterrupt, Terminated) as err:
        click.echo("interrupted: finished points are kept; run the same command to resume", err=True)
        sys.exit(143 if isinstance(err, Terminated) else 130)
    click.echo(f"sweep: {ran} points run, {total - ran} already done -> {results}", err=True)


@main.command()
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@out_option("Folder for the figures: new, empty or an earlier plot's (default: DIRECTORY/plots).")
@click.option(
    "--baseline",
    multiple=True,
    metavar="alone|RUN",
    help="A run with jobs: each job's slowdown against running alone. 'alone' runs each job alone now, on the "
    "hosts it had; else run directories (or folders of them) of the jobs alone. Repeatable.",
)
def plot(directory, out, baseline):
    """Make the standard figures of a run or sweep directory, each as PDF and PNG.

    A sweep (results.csv): time per congestion-control policy per topology normalised to
    PFC only, the iteration breakdown, PFC pauses and ECN marks per policy. A run
    (summary.json): FCT slowdown CDF and percentiles by flow size, the busiest links'
    utilization, and, with traces, queue occupancy and per-flow rate over time. A run with
    jobs and --baseline: each job's slowdown against running alone (jobs_slowdown, also as
    jobs_slowdown.csv and a table on stdout).

    \b
    Examples:
      roce-emu plot runs/cc_hpcc
      roce-emu plot sweeps/cc_none --out figures/
      roce-emu plot runs/two_jobs --baseline alone
    """
    from .api import plot_directory

    target = out or directory / "plots"
    names, slowdown = plot_directory(directory, target, list(baseline))
    if slowdown is not None:
        from .results.jobs import slowdown_markdown

        click.echo(slowdown_markdown(slowdown))
    click.echo(f"{len(names)} figures ({', '.join(names) or 'none'}) -> {target}", err=True)


@main.command()
@click.argument("runs", nargs=-1, required=True, type=FILE)
@click.option("--differing", is_flag=True, help="Only the summary keys whose values are not the same in all runs.")
@out_option("Also draw the iteration time (else the last finish) per run to DIR/compare.pdf and .png.")
def compare(runs, differing, out):
    """Compare run directories side by side (Markdown tables on stdout): every summary.json
    key, the iteration times and each collective's mean time (collectives.csv), where the runs
    have them. The first run is the reference: the others' numbers carry their ratio to it
    (1.250x: 25 % more). Runs written as CSV or Parquet both work.

    \b
    Examples:
      roce-emu compare runs/resnet_dcqcn runs/resnet_hpcc runs/resnet_none
      roce-emu compare runs/a runs/b --differing --out figures/
    """
    from .results.compare import compare as compare_runs, load_runs
    from .results.destination import check_directory

    if out is not None:  # a figure folder like plot's: new, empty, or roce-emu's
        check_directory(out, "--out", "plots")
    loaded = load_runs(runs)
    click.echo(compare_runs(loaded, differing))
    if out is not None:
        from .results.figures import save_compare_figure

        paths = save_compare_figure(loaded, out)
        click.echo(f"figure -> {paths[0]}, {paths[1].name}", err=True)


@main.command("cc")
@click.argument("algorithm", required=False, type=click.Choice(CC_NAMES), metavar="[ALGORITHM]")
def cc_command(algorithm):
    """List the congestion-control algorithms, or one algorithm's parameters with their units,
    defaults and sources (set them under network.cc.params in a scenario, or with --set).

    \b
    Examples:
      roce-emu cc dcqcn
      roce-emu run scenarios/cc_dcqcn.yaml --set network.cc.params.variant=paper
    """
    from .config.cc_params import markdown_table

    for name in [algorithm] if algorithm else CC_NAMES:
        click.echo(f"{name}:\n{markdown_table(name)}\n")


@main.command()
@click.argument("name", required=False)
@click.option("--to", "dest", type=click.Path(), help="File or folder (existing, or ending in /) to copy it to.")
@overwrite_option
def examples(name, dest, overwrite):
    """List the shipped example scenarios, or copy one out to edit and run.

    They come with every installation, a plain `pip install roce-emu` included.

    \b
    Examples:
      roce-emu examples
      roce-emu examples incast && roce-emu run incast.yaml
      roce-emu examples training_resnet50 --to my_study/
    """
    from .examples import listing
    from .results.destination import copy_example

    if name is None:
        click.echo("\n".join(listing()))
    else:
        _echo_written(copy_example(name, dest, overwrite))


@main.command("design")
@click.argument("scenario")
@set_option
@click.option(
    "--budget-gbps", type=float, help="Per-NPU bandwidth to split: sum over dimensions of links x rate (Gb/s)."
)
@click.option(
    "--overlap",
    type=click.Choice(["max", "sum"]),
    default="max",
    help="max: dimensions busy at once (Themis-like); sum: one after the other (baseline order).",
)
@click.option("--cost", "costs", metavar="C0,C1,...", help="Cost per Gb/s of each dimension's links.")
@click.option("--cost-budget", type=float, help="With --cost: the total cost per NPU to spend.")
@out_option("Scenario file to write with the designed rates (default: ./NAME_design.yaml).")
@overwrite_option
@click.option(
    "--verify",
    is_flag=True,
    help="Also run the scenario at packet level with the designed and with equally split rates "
    "(--parallel: the best --verify-top splits).",
)
@click.option(
    "--parallel",
    is_flag=True,
    help="Search tp x pp x dp and micro-batches for the training model instead (docs/parallel.md).",
)
@click.option(
    "--device-memory-gb",
    "memory_gb",
    type=float,
    default=80.0,
    help="--parallel: each NPU's memory (GiB); splits that do not fit are left out.",
)
@click.option("--top", type=COUNT, default=10, help="--parallel: how many of the fitting splits to list.")
@click.option(
    "--verify-top",
    type=COUNT,
    default=3,
    help="--parallel --verify: how many of the best splits to run at packet level.",
)
def design_command(scenario, overrides, out, overwrite, verify, parallel, memory_gb, top, verify_top, **rates):
    """Split each NPU's bandwidth budget across a multi_dim fabric's dimensions so that the
    workload's hierarchical all-reduces finish soonest (LIBRA-style, on the alpha-beta model;
    docs/design.md), and write the scenario with those rates. With --parallel, rank the
    tp x pp x dp splits (and pipeline micro-batches) of the training model that fit in each
    NPU's memory by predicted iteration time, and write the scenario with the best one
    (COMET-style; docs/parallel.md).

    \b
    Examples:
      roce-emu design scenarios/allreduce_multi_dim.yaml --budget-gbps 800
      roce-emu design scenarios/allreduce_multi_dim.yaml --budget-gbps 800 --overlap sum --verify
      roce-emu design scenarios/allreduce_multi_dim.yaml --cost 1,4 --cost-budget 3000 -o cheap.yaml
      roce-emu design scenarios/training_transformer.yaml --parallel --device-memory-gb 16 --verify
    """
    from . import api
    from .design import parse_costs

    if parallel:
        d: api.ParallelDesign | api.RatesDesign = api.design_parallel(
            scenario, overrides, memory_gb, verify_top if verify else 0, out, overwrite
        )
    else:  # rates: --budget-gbps, --overlap, --cost, --cost-budget
        rates["costs"] = parse_costs(rates["costs"])
        d = api.design_rates(scenario, overrides, verify=verify, dest=out, overwrite=overwrite, **rates)
    api.write_design(d, scenario, overwrite)
    click.echo("\n".join(d.report(top) if isinstance(d, api.ParallelDesign) else d.report()))
    _echo_written(d.dest)


@main.group("import")
def import_group():
    """Write a roce-emu scenario from another tool's files.

    \b
    Examples:
      roce-emu import astra-sim network.yml --system system.json --out dgx.yaml
      roce-emu import ns3 config.txt --out hpcc.yaml
      roce-emu run dgx.yaml
    """


@import_group.command("astra-sim")
@click.argument("network", type=FILE)
@click.option("--system", type=FILE, help="ASTRA-sim system JSON: the collective algorithms and chunks to use.")
@click.option(
    "--bytes", "nbytes", type=COUNT, default=64 << 20, help="Bytes per NPU of the all-reduce the scenario runs."
)
@out_option("Scenario file to write (default: ./NETWORK.yaml).")
@overwrite_option
def import_astra_sim(network, system, nbytes, out, overwrite):
    """An ASTRA-sim network YAML (and system JSON) as a scenario: the fabric as multi_dim and
    one all-reduce. A scenario can also name the network file directly:
    topology: {kind: astra_sim, file: network.yml}.

    \b
    Examples:
      roce-emu import astra-sim DGX_H100-32.yml --system DGX_H100.json -o dgx.yaml
      roce-emu import astra-sim Ring_8.yml --bytes 1000000
    """
    from .importers import astra_sim

    _write_imported(out, overwrite, lambda: astra_sim.scenario(network, system, nbytes))


@import_group.command("ns3")
@click.argument("config", type=FILE)
@click.option(
    "--topology",
    type=FILE,
    help="Topology file (default: TOPOLOGY_FILE of the configuration, or topology.txt beside it).",
)
@click.option("--flows", type=FILE, help="Flow file (default: FLOW_FILE of the configuration, or flow.txt beside it).")
@out_option("Scenario file to write (default: ./CONFIG.yaml).")
@overwrite_option
def import_ns3(config, topology, flows, out, overwrite):
    """An HPCC ns-3 simulator run (config.txt with its topology and flow files) as a scenario:
    the fabric as a custom topology, the flows, the congestion control and its parameters,
    the ECN maps, the buffer, link failures and losses. Every key is either mapped or listed
    as not carried over. A scenario can also name the topology file directly:
    topology: {kind: ns3, file: topology.txt}.

    \b
    Examples:
      roce-emu import ns3 config.txt --out hpcc.yaml && roce-emu run hpcc.yaml
      roce-emu import ns3 config.txt --topology fat.txt --flows flow.txt -o fat.yaml
    """
    from .importers import ns3

    _write_imported(out, overwrite, lambda: ns3.scenario(config, topology, flows))


@main.group()
def cache():
    """Numba's compiled-code cache (tied to a hash of the engine sources).

    \b
    Example:
      roce-emu cache info
    """


@cache.command("info")
def cache_info():
    """Show where compiled code is cached."""
    from .core import CACHE_DIR, CORE_HASH

    click.echo(f"core hash {CORE_HASH}: {CACHE_DIR}")


@cache.command("clear")
def cache_clear():
    """Delete every cached compilation of roce-emu (the numba-<hash> folders of all core
    versions); nothing else in the cache folder is touched."""
    from .core import CACHE_DIR, clear_cache

    n = len(clear_cache())
    click.echo(f"removed {n} cached engine version{'s' if n != 1 else ''} from {CACHE_DIR.parent}")
