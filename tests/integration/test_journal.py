"""The durable effects journal on the real Redis: a run that crashed in one process is
recovered by another, without calling the model or the effect again."""

from __future__ import annotations

import uuid

import pytest

from memstream import Settings
from memstream.agent import (
    Agent,
    AgentMiddleware,
    Proceed,
    RunConfig,
    RunContext,
    ScriptedModel,
    Turn,
)
from memstream.projections.connection import redis_client
from memstream.projections.journal import RedisJournal

pytestmark = pytest.mark.integration


class Crash(Exception):
    pass


class Sender(AgentMiddleware):
    id = "sender"

    def __init__(self, sent: list[str], crash: bool) -> None:
        self.sent = sent
        self.crash = crash

    def after_agent(self, turn: Turn, context: RunContext) -> Proceed:
        context.effect("mail.send", context.run_id, lambda: self.sent.append(turn.answer) or 1)
        if self.crash:
            raise Crash("the process died here")
        return Proceed()


def test_a_run_crashed_in_one_process_is_recovered_in_another(settings: Settings) -> None:
    journal = RedisJournal(redis_client(settings.redis), settings.namespace)
    sent: list[str] = []
    config = RunConfig(thread_id=f"thread-{uuid.uuid4().hex[:6]}", tenant_id="acme")
    first = Agent(
        ScriptedModel(["Sent it."]), middleware=[Sender(sent, crash=True)], journal=journal
    )
    run_id = f"run-{uuid.uuid4().hex}"
    with pytest.raises(Crash):
        first.run("mail Bob", config, run_id=run_id)

    no_more_replies = ScriptedModel([])  # any model call would fail the recovery
    second = Agent(no_more_replies, middleware=[Sender(sent, crash=False)], journal=journal)
    result = second.recover(run_id)

    assert (result.status, result.answer) == ("completed", "Sent it.")
    assert sent == ["Sent it."]
    assert no_more_replies.requests == []
    assert [m.content for m in second.thread(config.thread_id).messages] == ["mail Bob", "Sent it."]
    record = journal.run(run_id)
    assert record is not None and record.status == "completed"
