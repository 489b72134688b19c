"""`memstream demo`: import a small sample for two tenants, show that each recalls only its
own, then run one agent turn in a new thread of each tenant to show what memory puts in the
model's prompt.

Needs the stack and a worker (`make demo` starts both). The agent's model is the offline echo
model, so the demo runs without any LLM and shows the prompt section verbatim.
"""

from __future__ import annotations

import argparse
from importlib.resources import as_file, files

from memstream.agent import Agent, OfflineEchoModel, RunConfig
from memstream.cli.importer import import_file
from memstream.deployment import Deployment
from memstream.hooks import RecallConfig
from memstream.memory.tenancy import validate_tenant

__all__ = ["register"]

QUESTIONS = (
    "Which database do we use, and when do we deploy?",
    "What caused the last outage?",
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="import a sample for two tenants and recall")
    demo.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    with as_file(files("memstream.cli").joinpath("demo.jsonl")) as sample:
        events = import_file(deployment, sample, wait_s=120.0)
    print(f"Imported {len(events)} events for tenants 'acme' and 'globex' (threads differ).\n")
    recaller = deployment.recaller()
    for question in QUESTIONS:
        for tenant in ("acme", "globex"):
            print(f"[{tenant}] {question}")
            for hit in recaller.recall(validate_tenant(tenant), question, k=3):
                memory = hit.memory
                print(f"   {hit.score:5.2f}  ({memory.thread}, {memory.role}) {memory.content}")
        print()
    _agent_turns(deployment)
    return 0


def _agent_turns(deployment: Deployment) -> None:
    model = OfflineEchoModel()
    memory = deployment.memory_middleware(model, recall=RecallConfig(max_recall_tokens=120))
    agent = Agent(model, middleware=[memory])
    for tenant in ("acme", "globex"):
        question = "Remind me: what database do we run?"
        print(f"[{tenant}] agent turn in a new thread: {question!r}")
        result = agent.run(question, RunConfig(thread_id="demo-new-thread", tenant_id=tenant))
        print("   " + result.answer.replace("\n", "\n   "))
        print()
