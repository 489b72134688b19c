"""`memstream mcp --tenant T`: the MCP tools over stdio, for one tenant (an MCP host's config)."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from memstream.cli.serve import missing_extra
from memstream.deployment import Deployment
from memstream.memory.tenancy import validate_tenant
from memstream.server.service import MemoryService

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = commands.add_parser("mcp", help="serve the MCP tools over stdio for one tenant")
    mcp.add_argument("--tenant", required=True, help="the tenant every tool call acts for")
    mcp.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    try:
        from memstream.server.mcp import build_mcp, stdio_principal
        from memstream.server.parts import memory_service
    except ModuleNotFoundError as exc:
        raise missing_extra("mcp", exc) from None

    tenant = validate_tenant(args.tenant)
    state: dict[str, MemoryService] = {}

    @asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        async with memory_service(deployment) as service:
            state["service"] = service
            yield

    server = build_mcp(lambda: state["service"], stdio_principal(tenant), lifespan=lifespan)
    server.run("stdio")
    return 0
