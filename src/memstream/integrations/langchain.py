"""MemstreamMiddleware: memstream's long-term memory for LangChain v1 agents (`create_agent`).

The same semantics as memstream's own memory middleware (`hooks.middleware`), through the
same code (`hooks.turns`, the tenant cells, the manager):

    before_agent     recall what earlier threads of the tenant recorded that is relevant to
                     the turn's input, within `max_recall_tokens * 4` characters, and keep it
                     in the agent state for this turn (a failed search is skipped and
                     announced; the turn goes on without memory)
    wrap_model_call  show it to every model call of the turn as the `semantic-memory` section,
                     appended to the system message's content blocks, which are kept
    after_agent      record the turn (the last user message and the final answer) as one
                     TurnCompleted event, sent without waiting for Kafka; a failure is skipped
                     and announced by a `Skipped` monitoring event, never raised into the answer

Each hook has its async twin (LangChain's base class raises NotImplementedError for a missing
`awrap_model_call`, which would break `ainvoke`). The tenant is an attribute (or key) of the
run's context, `tenant_key` ("user_id" by default): a run whose context has none runs without
memory, and an unusable tenant id refuses the input before any model call. The thread is the
run's LangGraph thread id (a run without a checkpointer's thread is a thread of its own).
With `tools=True` the agent also gets `remember` and `forget` tools scoped to the same tenant.

Register it outside (before) guardrail middleware, so that a blocked answer is never recorded.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, NotRequired

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    PrivateStateAttr,
)
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langgraph.config import get_config
from langgraph.runtime import Runtime

from memstream.config import Settings
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError, InfrastructureError, MemstreamError
from memstream.hooks.middleware import SemanticMemoryMiddleware
from memstream.hooks.tenants import TenantCells
from memstream.hooks.turns import RecallConfig, RecordConfig, Stage, is_echo, recall_context
from memstream.hooks.turns import skipped as skipped_event
from memstream.llm import ModelRequest as MemstreamModelRequest
from memstream.llm import ModelResponse as MemstreamModelResponse
from memstream.llm import PromptSection
from memstream.memory.events import MemoryForgotten, MessageRecorded
from memstream.memory.manager import LLMMemoryManager
from memstream.memory.monitoring import Monitor
from memstream.memory.store import MemoryStore
from memstream.memory.tenancy import validate_tenant

__all__ = ["MemstreamMiddleware", "MemstreamState", "with_memory"]

_RECALLED = "semantic_memory"
_SHOWN = "semantic_memory_shown"


class MemstreamState(AgentState[Any]):
    """The agent state the middleware adds: this turn's recalled text, private to it."""

    semantic_memory: NotRequired[Annotated[str, PrivateStateAttr]]
    # The ids of the memories in that text, in order: what the turn records as shown.
    semantic_memory_shown: NotRequired[Annotated[list[str], PrivateStateAttr]]


class _NoModel:
    """The manager's model client: this middleware scores importance without a model."""

    def complete(self, request: MemstreamModelRequest) -> MemstreamModelResponse:
        raise ConfigurationError(
            "MemstreamMiddleware's memory manager asks no model; use heuristic importance"
        )


class MemstreamMiddleware(AgentMiddleware[MemstreamState, Any]):
    """memstream's memory for a LangChain v1 agent. Build it with `from_env(tenant_key=...)`,
    or on a `Deployment` an application already has; `close()` when done."""

    state_schema = MemstreamState
    SECTION: ClassVar[str] = SemanticMemoryMiddleware.SECTION

    def __init__(
        self,
        deployment: Deployment,
        *,
        tenant_key: str = "user_id",
        recall: RecallConfig | None = None,
        record: RecordConfig | None = None,
        monitor: Monitor | None = None,
        tools: bool = False,
    ) -> None:
        super().__init__()
        self._deployment = deployment
        stores = deployment.stores()
        self._tenant_key = tenant_key
        self._recall = recall or RecallConfig()
        self._record = record or RecordConfig(deployment.settings.max_record_chars)
        self._monitor = monitor or stores.monitor
        self._cells = TenantCells(stores)
        # A fact the user asked to have remembered outranks an ordinary turn for eviction.
        self._remembered_importance = max(deployment.settings.default_importance, 0.8)
        self.tools: Sequence[BaseTool] = self._memory_tools() if tools else ()

    @classmethod
    def from_env(
        cls,
        *,
        tenant_key: str = "user_id",
        max_recall_tokens: int = 600,
        tools: bool = False,
        settings: Settings | None = None,
    ) -> MemstreamMiddleware:
        """A middleware on the deployment the environment names (the MEMSTREAM_* variables)."""
        deployment = Deployment(settings or Settings.from_env())
        return cls(
            deployment, tenant_key=tenant_key, recall=RecallConfig(max_recall_tokens), tools=tools
        )

    def close(self) -> None:
        """Close the deployment's agent side: send what is queued (up to 10 s), stop the
        publisher."""
        self._deployment.close()

    # -- hooks --------------------------------------------------------------------------------

    def before_agent(self, state: MemstreamState, runtime: Runtime[Any]) -> dict[str, Any]:
        tenant = self._tenant(runtime.context)
        query = _last_text(state["messages"], HumanMessage)
        if tenant is None or not query:
            return {_RECALLED: "", _SHOWN: []}
        try:
            recalled = recall_context(self._manager(tenant), query, self._recall)
        except InfrastructureError as exc:
            self._skipped(tenant, runtime, "recall", exc)
            return {_RECALLED: "", _SHOWN: []}
        return {_RECALLED: recalled.text, _SHOWN: list(recalled.shown)}

    async def abefore_agent(self, state: MemstreamState, runtime: Runtime[Any]) -> dict[str, Any]:
        # Recall is a synchronous round trip to Redis; a thread keeps the event loop free.
        return await asyncio.to_thread(self.before_agent, state, runtime)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(with_memory(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(with_memory(request))

    def after_agent(self, state: MemstreamState, runtime: Runtime[Any]) -> None:
        try:
            tenant = self._tenant(runtime.context)
        except MemstreamError:
            return None  # refused before the turn; nothing to record
        query = _last_text(state["messages"], HumanMessage)
        answer = _last_text(state["messages"], AIMessage)
        if tenant is None or not query or not answer:
            return None
        recalled = state.get("semantic_memory", "")
        shown = tuple(state.get("semantic_memory_shown", ())) if recalled else ()
        try:
            self._manager(tenant).record_turn(
                thread=_thread(runtime),
                run=_run(runtime),
                turn=sum(isinstance(m, HumanMessage) for m in state["messages"]) - 1,
                query=query,
                answer=answer,
                at=datetime.now(UTC),
                max_chars=self._record.max_record_chars,
                shown=shown,
                echo=is_echo(self._record, shown, recalled, answer),
            )
        except MemstreamError as exc:
            self._skipped(tenant, runtime, "record", exc)
        return None

    async def aafter_agent(self, state: MemstreamState, runtime: Runtime[Any]) -> None:
        # Recording only queues the event (librdkafka sends it): nothing here waits.
        self.after_agent(state, runtime)

    # -- helpers ------------------------------------------------------------------------------

    def _tenant(self, context: object) -> str | None:
        raw = (
            context.get(self._tenant_key)
            if isinstance(context, Mapping)
            else getattr(context, self._tenant_key, None)
        )
        return None if raw is None else validate_tenant(raw)

    def _store(self, tenant: str) -> MemoryStore:
        store = self._cells.cell(tenant).store
        if store is None:  # the event-sourced resolver always gives one
            raise ConfigurationError(f"no memory store was resolved for tenant {tenant!r}")
        return store

    def _manager(self, tenant: str) -> LLMMemoryManager:
        return self._deployment.manager(self._store(tenant), _NoModel())

    def _skipped(
        self, tenant: str, runtime: Runtime[Any], stage: Stage, error: MemstreamError
    ) -> None:
        self._monitor.announce(
            skipped_event(
                tenant=tenant,
                thread=_thread(runtime),
                run_id=_run(runtime),
                stage=stage,
                error=error,
                at=datetime.now(UTC),
            )
        )

    def _memory_tools(self) -> list[BaseTool]:
        middleware = self

        @tool
        def remember(fact: str, runtime: ToolRuntime[Any, Any]) -> str:
            """Remember a fact about the user for later conversations. Returns its memory id."""
            tenant = middleware._tenant(runtime.context)
            if tenant is None:
                return "No memory in this run: nothing was remembered."
            store = middleware._store(tenant)
            event = MessageRecorded(
                tenant=tenant,
                thread=_thread_of(runtime.config),
                # The fact's digest: remembering the same fact twice adds nothing.
                source_id=hashlib.sha256(fact.encode()).hexdigest(),
                content=fact[: middleware._record.max_record_chars],
                speaker="user",
                recorded_at=datetime.now(UTC),
                importance=middleware._remembered_importance,
                embedding_model=store.embedding_model,
            )
            (memory_id,) = store.write(event).memory_ids
            return f"Remembered (memory id {memory_id})."

        @tool
        def forget(memory_ids: list[str], runtime: ToolRuntime[Any, Any]) -> str:
            """Forget memories by their ids, for good."""
            tenant = middleware._tenant(runtime.context)
            if tenant is None or not memory_ids:
                return "Nothing was forgotten."
            middleware._store(tenant).write(
                MemoryForgotten(
                    tenant=tenant,
                    request_id=uuid.uuid4().hex,
                    requested_at=datetime.now(UTC),
                    memory_ids=tuple(memory_ids),
                )
            )
            return f"Forgotten: {len(set(memory_ids))} memory id(s)."

        return [remember, forget]


def with_memory(request: ModelRequest[Any]) -> ModelRequest[Any]:
    """`request` with this turn's recalled memories appended to its system message as the
    `semantic-memory` section; the message's existing content blocks are kept as they are
    (as LangChain's own middleware do, todo.py)."""
    recalled = request.state.get(_RECALLED)
    if not isinstance(recalled, str) or not recalled:
        return request
    section = PromptSection(MemstreamMiddleware.SECTION, recalled).render()
    blocks: list[Any] = (
        [*request.system_message.content_blocks, {"type": "text", "text": f"\n\n{section}"}]
        if request.system_message is not None
        else [{"type": "text", "text": section}]
    )
    return request.override(system_message=SystemMessage(content=blocks))


def _last_text(messages: Sequence[AnyMessage], kind: type[AnyMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, kind):
            return str(message.text)
    return ""


def _thread(runtime: Runtime[Any]) -> str:
    info = runtime.execution_info
    if info is not None and info.thread_id:
        return str(info.thread_id)
    return _thread_of(get_config())


def _thread_of(config: Mapping[str, Any]) -> str:
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    # Without a checkpointer a run has no thread: it is a thread of its own.
    return str(thread) if thread else f"run-{config.get('run_id') or uuid.uuid4()}"


def _run(runtime: Runtime[Any]) -> str:
    """The run the turn belongs to: LangGraph's run id when the caller gave one, else the
    task id, which LangGraph derives from the checkpoint, so a node retried after a crash
    records the same event (applied once) rather than a second one."""
    info = runtime.execution_info
    if info is not None:
        return str(info.run_id or info.task_id)
    return str(get_config().get("run_id") or uuid.uuid4())
