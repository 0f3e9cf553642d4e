"""The command reference, generated from the command line's own help (cli.py) so that it cannot drift.

Every command and sub-command with its ``--help`` text, at a fixed width. The committed page is
docs/reference/commands.md; tests/test_docs.py checks it is current::

    python -m roce_emu.cli_reference > docs/reference/commands.md
"""

import click

from .cli import main

#: the order a newcomer meets the commands in; commands not listed follow alphabetically
ORDER = ("run", "validate", "topo", "examples", "sweep", "plot", "cc", "design", "import", "cache")
WIDTH = 100

HEADER = """\
# Commands

<!-- Generated from roce_emu/cli.py: do not edit. Regenerate with
     python -m roce_emu.cli_reference > docs/reference/commands.md -->

Every command of `roce-emu`, with its `--help`. `--set KEY=VALUE` overrides any scenario key
by its dotted path, list items by index (`--set topology.k=8 --set workload.flows.0.bytes=5e5`);
the keys are in the [scenario reference](scenario.md). What a run writes is in
[Outputs](outputs.md); exit codes and error messages are in [Errors and exit codes](errors.md).
"""


def ordered(group: click.Group, ctx: click.Context) -> list[str]:
    names = group.list_commands(ctx)
    return [n for n in ORDER if n in names] + sorted(n for n in names if n not in ORDER)


def help_text(command: click.Command, ctx: click.Context) -> str:
    return command.get_help(ctx).rstrip()


def sections(command: click.Command, parent: click.Context, name: str, level: int) -> list[str]:
    ctx = click.Context(command, info_name=name, parent=parent, terminal_width=WIDTH, max_content_width=WIDTH)
    title = ctx.command_path
    out = ["", f"{'#' * level} {title}", "", "```text", help_text(command, ctx), "```"]
    if isinstance(command, click.Group):
        for sub in ordered(command, ctx):
            out += sections(command.commands[sub], ctx, sub, level + 1)
    return out


def markdown() -> str:
    settings = {**main.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    root = click.Context(main, info_name="roce-emu", **settings)
    out = [HEADER.rstrip("\n"), "", "```text", help_text(main, root), "```"]
    for name in ordered(main, root):
        out += sections(main.commands[name], root, name, 2)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
