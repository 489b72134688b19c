"""agent-memory-server's summary views and tasks, served by memstream on the real stack and
driven through AMS's own Python client: views defined and removed as events, one partition
summarised at once, a whole run as a task the worker finishes, a view without groups, another
tenant seeing none of it, tasks that outlive the server, and (with a chat model) summaries a
replay rebuilds without asking the model again."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from agent_memory_client import MemoryAPIClient
from agent_memory_client.exceptions import MemoryClientError, MemoryNotFoundError
from agent_memory_client.models import CreateSummaryViewRequest

from .commands import memstream
from .helpers import running_worker, scripted_chat, wait_until
from .serving import ams_client, new_tenant, serving, tenant_key

pytestmark = pytest.mark.integration

FACTS = [
    ("alice", "Alice prefers green tea"),
    ("alice", "Alice lives in Lyon"),
    ("bob", "Bob drinks his coffee black"),
]


def _save(http: httpx.Client, facts: list[tuple[str, str]] = FACTS) -> None:
    records = [
        {"id": uuid.uuid4().hex, "text": text, "user_id": user, "memory_type": "semantic"}
        for user, text in facts
    ]
    saved = http.post("/v1/long-term-memory/?wait=true&wait_timeout=30", json={"memories": records})
    assert saved.status_code == 200, saved.text


async def _finished(client: MemoryAPIClient, task_id: str) -> str:
    status = ""
    for _ in range(600):
        task = await client.get_task(task_id)
        assert task is not None
        status = str(task.status)
        if status in ("success", "failed"):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} still {status}")


async def test_views_partitions_and_tasks_through_the_python_client(
    client: MemoryAPIClient, http: httpx.Client, server: str, env: dict[str, str]
) -> None:
    _save(http)
    view = await client.create_summary_view(
        CreateSummaryViewRequest(
            name="by user",
            source="long_term",
            group_by=["user_id"],
            filters={"memory_type": "semantic"},
            time_window_days=30,
        )
    )
    assert view.group_by == ["user_id"] and view.filters == {"memory_type": "semantic"}
    assert await client.get_summary_view(view.id) == view
    assert view.id in [v.id for v in await client.list_summary_views()]

    # One partition, answered at once: no chat model here, so it lists the memories.
    alice = await client.run_summary_view_partition(view.id, {"user_id": "alice"})
    assert alice.group == {"user_id": "alice"} and alice.memory_count == 2
    assert alice.summary.startswith("LLM summarization disabled")
    assert "- Alice prefers green tea" in alice.summary and "Bob" not in alice.summary

    # The whole view, as a task the worker runs.
    task = await client.run_summary_view(view.id)
    assert task.view_id == view.id and str(task.status) == "pending"
    assert await _finished(client, task.id) == "success"
    done = await client.get_task(task.id)
    assert done is not None and done.started_at is not None and done.completed_at is not None
    results = await client.list_summary_view_partitions(view.id)
    assert {tuple(r.group.items()): r.memory_count for r in results} == {
        (("user_id", "alice"),): 2,
        (("user_id", "bob"),): 1,
    }
    (bob,) = await client.list_summary_view_partitions(view.id, user_id="bob")
    assert "- Bob drinks his coffee black" in bob.summary

    # What the client refuses on the server's word.
    with pytest.raises(MemoryClientError, match="Unsupported group_by fields: topics"):
        await client.create_summary_view(
            CreateSummaryViewRequest(source="long_term", group_by=["topics"])
        )
    with pytest.raises(MemoryClientError, match=r"must exactly match view\.group_by"):
        await client.run_summary_view_partition(view.id, {"session_id": "s"})
    assert await client.get_task("no-such-task") is None

    # Another tenant sees none of it.
    async with ams_client(server, tenant_key(env, new_tenant("globex"))) as theirs:
        assert await theirs.list_summary_views() == []
        assert await theirs.get_summary_view(view.id) is None
        assert await theirs.get_task(task.id) is None
        with pytest.raises(MemoryNotFoundError):
            await theirs.list_summary_view_partitions(view.id)

    # Removed: the view and its results go.
    assert (await client.delete_summary_view(view.id)).status == "ok"
    assert await client.get_summary_view(view.id) is None
    with pytest.raises(MemoryNotFoundError):
        await client.list_summary_view_partitions(view.id)


async def test_a_view_without_groups_summarises_everything_and_the_worker_goes_on(
    client: MemoryAPIClient, http: httpx.Client
) -> None:
    # Its one partition's group is empty: its result once named no document, and the worker
    # stopped on it for good (found by `bench chaos`'s negative cases).
    _save(http)
    view = await client.create_summary_view(
        CreateSummaryViewRequest(source="long_term", group_by=[])
    )
    assert view.group_by == []
    whole = await client.run_summary_view_partition(view.id, {})
    assert whole.group == {} and whole.memory_count == 3
    task = await client.run_summary_view(view.id)
    assert await _finished(client, task.id) == "success"
    (stored,) = await client.list_summary_view_partitions(view.id)
    assert stored.group == {} and stored.memory_count == 3
    assert "- Bob drinks his coffee black" in stored.summary
    # The worker still projects: a write told to wait for it is answered.
    _save(http, [("carol", "Carol cycles to work")])


async def test_a_task_outlives_the_server_that_started_it(
    env: dict[str, str], worker: Path, tmp_path: Path
) -> None:
    tenant = new_tenant("acme")
    key = tenant_key(env, tenant)
    with serving(env, tmp_path / "first.log") as url:
        async with ams_client(url, key) as client:
            view = await client.create_summary_view(
                CreateSummaryViewRequest(source="long_term", group_by=["user_id"])
            )
            task = await client.run_summary_view(view.id)
    with serving(env, tmp_path / "second.log") as url:
        async with ams_client(url, key) as client:
            assert await _finished(client, task.id) == "success"
            found = await client.get_task(task.id)
            assert found is not None and found.view_id == view.id


@pytest.fixture
def with_chat(
    env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[dict[str, str], str, list[dict[str, object]]]]:
    """A namespace of its own whose worker and server summarise with a scripted chat model:
    its env, the server's URL, and the requests the model got."""
    with scripted_chat("Alice drinks green tea and lives in Lyon.") as (chat_url, asked):
        chat = env | {
            "MEMSTREAM_NAMESPACE": f"test-{uuid.uuid4().hex[:10]}",
            "MEMSTREAM_CHAT_BASE_URL": chat_url,
            "MEMSTREAM_CHAT_MODEL": "scripted",
            # Continuous views run again every 3 s here (every hour by default).
            "MEMSTREAM_SUMMARY_REFRESH_MINUTES": "0.05",
        }
        with (
            running_worker(chat, tmp_path / "worker.log"),
            serving(chat, tmp_path / "server.log") as url,
        ):
            yield chat, url, asked


def test_the_model_summarises_once_and_a_replay_rebuilds_without_asking_it(
    with_chat: tuple[dict[str, str], str, list[dict[str, object]]],
) -> None:
    chat, url, asked = with_chat
    key = tenant_key(chat, new_tenant("acme"))
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as h:
        _save(h, FACTS[:2])
        view = h.post(
            "/v1/summary-views",
            json={"source": "long_term", "group_by": ["user_id"], "prompt": "One sentence."},
        ).json()

        def partitions() -> list[dict[str, object]]:
            listed = h.get(f"/v1/summary-views/{view['id']}/partitions")
            assert listed.status_code == 200, listed.text
            result: list[dict[str, object]] = listed.json()
            return result

        task = h.post(f"/v1/summary-views/{view['id']}/run", json={}).json()
        wait_until(
            lambda: h.get(f"/v1/tasks/{task['id']}").json()["status"] == "success", "the run"
        )
        (result,) = partitions()
        assert result["summary"] == "Alice drinks green tea and lives in Lyon."
        (request,) = asked
        prompt = json.dumps(request["messages"])
        assert "One sentence." in prompt and "Alice lives in Lyon" in prompt

        # Nothing changed: a second run keeps the summary and asks no model.
        again = h.post(f"/v1/summary-views/{view['id']}/run", json={}).json()
        wait_until(
            lambda: h.get(f"/v1/tasks/{again['id']}").json()["status"] == "success", "a rerun"
        )
        assert len(asked) == 1 and partitions() == [result]

        # A rebuild from the log has the same summaries, and asks no model either.
        replayed = memstream(chat, "replay")
        assert replayed.returncode == 0, replayed.stderr
        assert len(asked) == 1 and partitions() == [result]


def test_a_continuous_view_is_summarised_again_each_period_without_a_run(
    with_chat: tuple[dict[str, str], str, list[dict[str, object]]],
) -> None:
    chat, url, asked = with_chat
    key = tenant_key(chat, new_tenant("acme"))
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as h:
        _save(h, FACTS[:2])
        body = {"source": "long_term", "group_by": ["user_id"], "continuous": True}
        view = h.post("/v1/summary-views", json=body).json()
        assert view["continuous"] is True

        def partitions() -> list[dict[str, object]]:
            listed = h.get(f"/v1/summary-views/{view['id']}/partitions")
            assert listed.status_code == 200, listed.text
            result: list[dict[str, object]] = listed.json()
            return result

        # Nobody runs it: the worker's refresh does, within a period or two.
        wait_until(lambda: len(partitions()) == 1, "the continuous view summarised", 60)
        assert partitions()[0]["summary"] == "Alice drinks green tea and lives in Lyon."
        assert len(asked) == 1
        # A memory more: a later period summarises the partition again.
        first = partitions()[0]["computed_at"]
        _save(h, [("alice", "Alice adopted a cat")])
        wait_until(lambda: partitions()[0]["computed_at"] != first, "the view refreshed", 60)
        assert len(asked) == 2 and partitions()[0]["memory_count"] == 3
