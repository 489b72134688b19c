"""`memstream chat --tenant T --thread X`: a terminal agent with long-term memory.

One line in, one answer out, with the thread's usage after each answer. The model is the
configured OpenAI-compatible chat API, or, when none is configured, the offline echo model,
which answers by showing what memory put into its prompt. Memory is the event-sourced store
(a worker must run: `memstream up --worker`); the effects journal lives in Redis.
"""

from __future__ import annotations

import argparse
import sys

from memstream.agent import Agent, OfflineEchoModel, RunConfig
from memstream.deployment import Deployment
from memstream.llm import ModelClient
from memstream.memory.tenancy import validate_tenant

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chat = commands.add_parser("chat", help="talk to an agent with long-term memory")
    chat.add_argument("--tenant", required=True)
    chat.add_argument("--thread", required=True)
    chat.set_defaults(run=_run)


def _model(deployment: Deployment) -> tuple[ModelClient, str]:
    client = deployment.chat_model()
    settings = deployment.settings
    if client is not None:
        return client, f"{settings.chat_model} at {settings.chat_base_url}"
    return OfflineEchoModel(), "the offline echo model (set MEMSTREAM_CHAT_BASE_URL for an LLM)"


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    tenant = validate_tenant(args.tenant)
    model, described = _model(deployment)
    agent = Agent(
        model,
        middleware=[deployment.memory_middleware(model)],
        journal=deployment.projection.journal(),
    )
    interactive = sys.stdin.isatty()
    print(f"memstream chat: tenant {tenant!r}, thread {args.thread!r}, {described}.")
    if interactive:
        print("Type a message; Ctrl-D ends.")
    try:
        for line in sys.stdin:
            text = line.strip()
            if not text:
                continue
            result = agent.run(text, RunConfig(thread_id=args.thread, tenant_id=tenant))
            if result.status == "completed":
                print(result.answer)
            else:
                print(f"[{result.status}] {result.reason}")
            usage = result.usage
            print(
                f"  (usage: {usage.calls} calls, {usage.input_tokens} in, "
                f"{usage.output_tokens} out tokens)",
                flush=True,
            )
    finally:
        deployment.close()
    return 0
