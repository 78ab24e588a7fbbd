"""The service's commands: serve (HTTP), mcp (MCP on stdin/stdout) and check-config."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from planner_arm.cli.running import run_in_process, settings
from planner_arm.config import Settings

if TYPE_CHECKING:  # built lazily: `planner-arm --help` need not load the whole service
    from planner_arm.service.wiring import Runtime


def serve(
    host: Annotated[str | None, typer.Option(help="Address to bind (default from config)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default from config)")] = None,
) -> None:
    """Start the HTTP service."""
    from planner_arm.api.app import create_app
    from planner_arm.api.server import build_server

    # Into the settings: the app warns when it listens beyond loopback without keys, and /mcp
    # answers to the host it is bound to.
    bind = {name: value for name, value in (("host", host), ("port", port)) if value}
    current = settings(server=bind)
    app = create_app(current)
    build_server(app, current).run()


def mcp() -> None:
    """Serve the planner over MCP on stdin/stdout, for a desktop agent host."""
    from planner_arm.api.mcp_server import build_mcp_server

    async def run(runtime: Runtime) -> None:
        await build_mcp_server(runtime).run_stdio_async()

    # Logs go to stderr: stdout carries the protocol.
    run_in_process(run)


# check-config names each arm up to this many; a tool set of hundreds is only counted.
LISTED_ARMS = 10


def configuration_summary(current: Settings) -> str:
    """What the service would run with: the models, the profile and the step bounds its
    plans keep, the tools, keys and tenants read, the deadline."""
    from planner_arm.plan.validation import PlanRules, profile_of

    ids = current.arm_ids
    rules = PlanRules.for_arms(current.planning, ids)
    models = current.model.chain if current.llm_enabled else []
    where = f" base_url={current.model.base_url}" if current.model.base_url else ""
    entries = current.auth.key_entries
    # A plain key is a tenant of its own; named tenants share their keys' plans.
    tenants = {tenant or f"key {index}" for index, (tenant, _) in enumerate(entries)}
    more = [f"+{len(ids) - LISTED_ARMS} more"] if len(ids) > LISTED_ARMS else []
    return (
        f"ok: models={models} llm={'configured' if current.llm_enabled else 'disabled'}{where}\n"
        f"profile={profile_of(current.planning, ids)} "
        f"steps={rules.min_steps}-{rules.max_steps} tools={len(ids)} keys={len(entries)} "
        f"tenants={len(tenants)} timeout={current.planning.timeout_seconds}s\n"
        f"arms={ids[:LISTED_ARMS] + more}"
    )


def check_config() -> None:
    """Validate the configuration and print what the service would run with."""
    Console().print(configuration_summary(settings()), highlight=False, soft_wrap=True)
