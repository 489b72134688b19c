"""Helpers for tests of `memstream serve`: start it as a real process, make keys (in process,
or with the CLI where the CLI is what is tested), speak MCP to it with the official client."""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
from agent_memory_client import MemoryAPIClient, MemoryClientConfig
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.processes import free_port, running
from memstream.server.parts import api_keys

from .commands import memstream_process


@contextlib.contextmanager
def serving(env: dict[str, str], log: Path, *args: str) -> Iterator[str]:
    """A `memstream serve` process on a free loopback port; yields its base URL once healthy."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
        return False

    command = [sys.executable, "-m", "memstream", "serve", "--port", str(port), *args]
    with running(command, env=env, log=log, ready=healthy, what="memstream serve"):
        yield url


def create_key(env: dict[str, str], *args: str) -> str:
    """A new key from `memstream keys create`, whose stdout must be the key alone."""
    done = memstream_process(env, "keys", "create", *args)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("msk_"), done.stdout
    return lines[0]


def tenant_key(env: dict[str, str], tenant: str | None) -> str:
    """A new key for `tenant` (None: an admin key), made as `memstream keys create` makes it
    but in this process: most tests need a key, not the CLI's second of start-up."""
    with Deployment(Settings.from_env(env)) as deployment:
        key, _ = api_keys(deployment).create(tenant)
    return key


def new_tenant(name: str) -> str:
    """A tenant id no other test uses."""
    return f"{name}-{uuid.uuid4().hex[:8]}"


def ams_client(server: str, key: str) -> MemoryAPIClient:
    """agent-memory-client on `server` with `key`: it has no key option, so, like AMS's token
    mode, the key goes on its httpx client's headers."""
    client = MemoryAPIClient(MemoryClientConfig(base_url=server))
    client._client.headers["Authorization"] = f"Bearer {key}"
    return client


@contextlib.asynccontextmanager
async def mcp_over_http(server: str, key: str, path: str = "/mcp") -> AsyncIterator[ClientSession]:
    """An initialised MCP client session on `server`'s `path` (`/mcp`), with `key`."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{server}{path}", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def call_tool(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """A tool's result, which must not be an error, as JSON."""
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content)
    return json.loads(result.content[0].text)  # type: ignore[union-attr]
