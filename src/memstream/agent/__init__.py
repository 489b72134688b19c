"""The agent runtime: middleware contract, run context, usage, effects journal, model clients.

It knows nothing of memory: memory plugs in as one middleware (memstream.hooks).
"""

from memstream.agent.context import Clock, RunConfig, RunContext, SystemClock
from memstream.agent.guardrails import Guardrails, Rule
from memstream.agent.journal import InMemoryJournal, Journal, RunRecord
from memstream.agent.middleware import (
    AgentMiddleware,
    Ask,
    AskingMiddleware,
    Block,
    Fail,
    Fatal,
    NeedsApproval,
    Proceed,
    Success,
    ToolError,
    ToolOutcome,
    Turn,
)
from memstream.agent.models import OfflineEchoModel, ScriptedModel
from memstream.agent.runtime import Agent, RunResult
from memstream.agent.threads import InMemoryThreadStore, ThreadState, ThreadStore
from memstream.agent.tools import Tool
from memstream.llm import (
    Message,
    ModelClient,
    ModelRequest,
    ModelResponse,
    PromptSection,
    ToolCall,
    ToolSpec,
    Usage,
)

__all__ = [
    "Agent",
    "AgentMiddleware",
    "Ask",
    "AskingMiddleware",
    "Block",
    "Clock",
    "Fail",
    "Fatal",
    "Guardrails",
    "InMemoryJournal",
    "InMemoryThreadStore",
    "Journal",
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "NeedsApproval",
    "OfflineEchoModel",
    "Proceed",
    "PromptSection",
    "Rule",
    "RunConfig",
    "RunContext",
    "RunRecord",
    "RunResult",
    "ScriptedModel",
    "Success",
    "SystemClock",
    "ThreadState",
    "ThreadStore",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolOutcome",
    "ToolSpec",
    "Turn",
    "Usage",
]
