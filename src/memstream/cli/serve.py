"""`memstream serve`: the HTTP API (agent-memory-server's long-term routes) and MCP at /mcp.

With no API key configured it serves only on a loopback address, and says so; anywhere else
it refuses to start unless told `--insecure`. Keys are checked per request, so keys created
or revoked while it runs take effect at once.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys

from memstream.deployment import Deployment
from memstream.errors import ConfigurationError
from memstream.health import LastError
from memstream.operations import heartbeat

__all__ = ["is_loopback", "missing_extra", "register"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="serve the HTTP API and MCP (agent-memory-server)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=int, help="port (default MEMSTREAM_SERVER_PORT, 8000)")
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="listen beyond loopback although no API key exists (anyone may read and write)",
    )
    serve.set_defaults(run=_run)


def missing_extra(command: str, exc: ModuleNotFoundError) -> ConfigurationError:
    """The error for a server command run without the `server` extra installed."""
    return ConfigurationError(
        f"`memstream {command}` needs the server extra ({exc.name} is not installed): "
        "pip install 'memstream[server]'"
    )


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    try:
        import uvicorn

        from memstream.server.app import create_app
        from memstream.server.console_ops import ConsoleOperations
        from memstream.server.parts import api_keys, memory_service
    except ModuleNotFoundError as exc:
        raise missing_extra("serve", exc) from None

    settings = deployment.settings
    keys = api_keys(deployment)
    loopback = is_loopback(args.host)
    if not keys.any():
        if not loopback and not args.insecure:
            raise ConfigurationError(
                f"no API key exists, and {args.host} is not a loopback address: anyone who "
                "can reach it could read and write every tenant's memories. Create keys first "
                "(`memstream keys create --tenant T`), listen on 127.0.0.1, or pass --insecure"
            )
        print(
            "memstream serve: no API keys configured; requests without a key act as admin "
            + ("(loopback only)" if loopback else "(--insecure: open to the network)"),
            file=sys.stderr,
        )
    app = create_app(
        lambda: memory_service(deployment),
        keys,
        max_body_bytes=settings.server_max_body_bytes,
        keyless=loopback or args.insecure,
        host=args.host,
        metrics=deployment.metrics,
        operations=ConsoleOperations(deployment),
    )
    port = args.port or settings.server_port
    print(
        f"memstream serve: http://{args.host}:{port} (console at /console, MCP at /mcp, /metrics)",
        file=sys.stderr,
    )
    # Its last error goes to `memstream status`; uvicorn's own logger does not propagate.
    errors = LastError()
    for logger in (logging.getLogger(), logging.getLogger("uvicorn")):
        logger.addHandler(errors)
    beat = heartbeat(deployment, "server", errors)
    beat.start()
    try:
        uvicorn.run(app, host=args.host, port=port, log_level="warning", access_log=False)
    finally:
        beat.stop()
    return 0
