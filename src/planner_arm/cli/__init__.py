"""The command line: `planner-arm serve | mcp | plan | validate | replan | get | show`, and
`check-config`.

Every command builds the service through the same composition root as the app. With `--url`,
plan, validate, replan and get talk to a running service through `planner_arm.client`;
without it, plan, validate and replan run in this process (a replan then needs the plan as a
file: this process has no store of earlier plans), and get, which reads a store, needs --url;
show draws a plan from the service at --url or from a file, in the terminal or as Mermaid text.

The package: app.py (the command group, its commands in order, `main`), serving.py (serve,
mcp, check-config), planning.py (plan, validate, replan, get), show.py (show), running.py
(what every command shares: its options, settings, the service of this process, the JSON it
reads, how it fails) and readable_help.py (`--help` in words).
"""

from planner_arm.cli.app import cli, main

__all__ = ["cli", "main"]
