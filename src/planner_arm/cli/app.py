"""The command group: its commands, in the order `--help` lists them, and `main`."""

from __future__ import annotations

import typer

from planner_arm.cli.planning import get, plan, replan, validate
from planner_arm.cli.readable_help import ReadableCommand, ReadableGroup
from planner_arm.cli.serving import check_config, mcp, serve
from planner_arm.cli.show import show

cli = typer.Typer(
    name="planner-arm",
    help="Turns a goal into a validated, executable plan of arm steps.",
    no_args_is_help=True,
    add_completion=False,
    cls=ReadableGroup,
)

for command in (serve, mcp, plan, validate, replan, get, show):
    cli.command(cls=ReadableCommand)(command)
cli.command("check-config", cls=ReadableCommand)(check_config)


def main() -> None:
    cli()
