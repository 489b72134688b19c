"""`memstream serve` refuses bad input with the documented 4xx and writes nothing; keys,
limits, read-your-writes, summary views' refusals, and the keyless modes."""

from __future__ import annotations

import os
import signal
import uuid
from pathlib import Path

import httpx
import pytest

from memstream import Settings
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.operations import drop

from .commands import memstream_process
from .helpers import TestStack, wait_until
from .serving import create_key, free_port, serving

pytestmark = pytest.mark.integration


def _record(**fields: object) -> dict[str, object]:
    return {"id": uuid.uuid4().hex, "text": "The user likes tea", **fields}


def _only_the_sentinel_is_stored(http: httpx.Client, stack: TestStack, tenant: str) -> None:
    """Nothing the refused requests carried was written: a memory written after them (and,
    per tenant, applied after anything sent before it) is the tenant's only one."""
    sentinel = _record(text="sentinel")
    response = http.post("/v1/long-term-memory/?wait=true", json={"memories": [sentinel]})
    assert response.status_code == 200, response.text
    assert stack.stored_memories(tenant) == 1


def _refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail", "code", "retryable"}
    for word in words:
        assert word in body["detail"], body["detail"]


def test_bad_input_gets_its_4xx_and_nothing_is_written(
    http: httpx.Client, stack: TestStack, tenant: str, server: str
) -> None:
    create = "/v1/long-term-memory/"
    _refused(http.post(create, json={"memories": [_record(colour="teal")]}), 422, "colour")
    _refused(http.post(create, json={"memories": [_record()], "extra": 1}), 422, "extra")
    _refused(http.post(create, json={"memories": [_record(id="no/slashes")]}), 422, "id")
    _refused(http.post(create, json={"memories": [_record(text="")]}), 422, "text")
    _refused(http.post(create, json={"memories": [_record(text="   ")]}), 422, "text")
    _refused(http.post(create, json={"memories": []}), 422, "memories")
    many = {"memories": [_record() for _ in range(101)]}
    _refused(http.post(create, json=many), 422, "MEMSTREAM_SERVER_MAX_RECORDS")
    long = {"memories": [_record(text="x" * 8001)]}
    _refused(http.post(create, json=long), 422, "MEMSTREAM_MAX_RECORD_CHARS")
    huge = {"memories": [_record(text="x" * 2_000_000)]}
    _refused(http.post(create, json=huge), 413, "MEMSTREAM_SERVER_MAX_BODY_BYTES")
    # Streamed without a Content-Length: refused once more than the limit has arrived.
    streamed = (chunk for chunk in [b'{"memories": [{"id": "s", "text": "', b"x" * 2_000_000])
    chunked = http.post(create, content=streamed, headers={"content-type": "application/json"})
    _refused(chunked, 413, "MEMSTREAM_SERVER_MAX_BODY_BYTES")
    reserved = _record(metadata={"ams.topics": "x"})
    _refused(http.post(create, json={"memories": [reserved]}), 422, "metadata")
    _refused(http.post(create, json={"memories": [_record(topics=["a,b"])]}), 422, "topics")
    _refused(
        http.post(create, content=b"{not json", headers={"content-type": "application/json"}),
        422,
    )
    with httpx.Client(base_url=server) as anonymous:
        _refused(anonymous.post(create, json={"memories": [_record()]}), 401, "Bearer")
        wrong = {"Authorization": "Bearer msk_000000000000_wrong"}
        _refused(anonymous.post(create, json={"memories": [_record()]}, headers=wrong), 401)
        basic = {"Authorization": "Basic dXNlcjpwYXNz"}
        _refused(anonymous.post(create, json={"memories": [_record()]}, headers=basic), 401)
    _only_the_sentinel_is_stored(http, stack, tenant)


def test_search_and_read_limits(http: httpx.Client, tenant: str) -> None:
    search = "/v1/long-term-memory/search"
    _refused(http.post(search, json={"text": "tea", "limit": 101}), 422, "limit")
    _refused(http.post(search, json={"text": "x" * 2001}), 422, "MEMSTREAM_SERVER_MAX_QUERY_CHARS")
    _refused(http.post(search, json={"text": "tea", "offset": 901}), 422, "offset")
    _refused(http.post(search, json={"text": "tea", "sesion_id": {"eq": "a"}}), 422, "sesion_id")
    _refused(
        http.post(search, json={"text": "tea", "search_mode": "keyword", "distance_threshold": 1}),
        422,
        "semantic",
    )
    _refused(http.post(search, json={"text": "tea", "memory_type": {"eq": "fact"}}), 422, "type")
    # Excluding the key's own tenant, or asking `all` of two sessions, matches nothing.
    for nothing in ({"namespace": {"ne": tenant}}, {"session_id": {"all": ["a", "b"]}}):
        found = http.post(search, json={"text": "tea", **nothing})
        assert found.status_code == 200 and found.json()["total"] == 0, found.text
    _refused(http.get("/v1/long-term-memory/bad:id"), 422)
    _refused(http.get(f"/v1/long-term-memory/{uuid.uuid4().hex}"), 404, "no memory")
    _refused(
        http.delete("/v1/long-term-memory", params={"memory_ids": "bad:id"}), 422, "memory_ids"
    )
    _refused(http.delete("/v1/long-term-memory"), 422, "memory_ids")
    _refused(
        http.post("/v1/long-term-memory/?wait=true&wait_timeout=3600", json={"memories": []}),
        422,
    )


def test_wait_true_reads_its_own_writes(http: httpx.Client) -> None:
    record = _record(text="The user's passport expires in March 2031")
    response = http.post("/v1/long-term-memory/?wait=true", json={"memories": [record]})
    assert response.status_code == 200, response.text
    # No polling: with ?wait=true the answer came once the memory was recallable.
    fetched = http.get(f"/v1/long-term-memory/{record['id']}")
    assert fetched.status_code == 200 and fetched.json()["text"] == record["text"]
    found = http.post("/v1/long-term-memory/search", json={"text": "passport"}).json()
    assert found["memories"][0]["id"] == record["id"]

    gone = http.delete("/v1/long-term-memory", params={"memory_ids": record["id"], "wait": "true"})
    assert gone.status_code == 200 and gone.json()["status"] == "ok, deleted 1 memories"
    _refused(http.get(f"/v1/long-term-memory/{record['id']}"), 404)
    again = http.post("/v1/long-term-memory/", json={"memories": [record]})
    _refused(again, 409, "never used again")


def test_a_revoked_key_is_refused_within_the_key_cache_bound(
    server: str, env: dict[str, str], tenant: str
) -> None:
    key = create_key(env, "--tenant", tenant)
    headers = {"Authorization": f"Bearer {key}"}
    assert httpx.post(f"{server}/v1/long-term-memory/search", json={}, headers=headers).is_success
    key_id = key.split("_")[1]
    listed = memstream_process(env, "keys", "list")
    assert key_id in listed.stdout and key not in listed.stdout  # the secret is never shown
    assert memstream_process(env, "keys", "revoke", key_id).returncode == 0
    # The server trusts a verified key for MEMSTREAM_SERVER_KEY_CACHE_S (2 s): the revocation,
    # made by another process, holds once that has passed (the CLI's own start took longer).
    bound = Settings.from_env(env).server_key_cache_s

    def refused() -> bool:
        answer = httpx.post(f"{server}/v1/long-term-memory/search", json={}, headers=headers)
        return answer.status_code == 401

    wait_until(refused, "the revoked key to be refused", timeout=bound + 5)
    again = httpx.post(f"{server}/v1/long-term-memory/search", json={}, headers=headers)
    _refused(again, 401, "revoked")
    assert memstream_process(env, "keys", "revoke", key_id).returncode == 1


def test_summary_view_input_is_refused_saying_why(http: httpx.Client) -> None:
    for body, why in [
        ({"source": "working_memory"}, "must be 'long_term'"),
        ({"source": "long_term", "filters": {"topics": "x"}}, "Unsupported filter fields: topics"),
        ({"source": "long_term", "filters": {"memory_type": "dream"}}, "not one of"),
        ({"source": "long_term", "time_window_days": 0}, "greater than or equal to 1"),
        ({"name": "no source"}, "source"),
    ]:
        _refused(http.post("/v1/summary-views", json=body), 422, why)
    _refused(http.get("/v1/summary-views/no-such-view"), 404, "SummaryView no-such-view not found")
    _refused(http.post("/v1/summary-views/x/run"), 422, "body")  # AMS's body is required
    _refused(http.get("/v1/tasks/no-such-task"), 404, "Task no-such-task not found")
    schema = http.get("/openapi.json").json()
    assert {"/v1/summary-views", "/v1/tasks/{task_id}"} <= set(schema["paths"])


def test_without_keys_loopback_only_and_wait_times_out(env: dict[str, str], tmp_path: Path) -> None:
    """A namespace with no key and no worker: the server binds loopback only (and refuses a
    wider address unless --insecure); keyless requests act as admin and must name the tenant;
    a write asked to wait answers 504 when nothing projects it."""
    namespace = f"test-{uuid.uuid4().hex[:10]}"
    bare = {**env, "MEMSTREAM_NAMESPACE": namespace}
    try:
        refused = memstream_process(bare, "serve", "--host", "0.0.0.0", "--port", "1")
        assert refused.returncode == 2 and "no API key exists" in refused.stderr
        with serving(bare, tmp_path / "server.log") as url:
            assert "no API keys configured" in (tmp_path / "server.log").read_text()
            record = _record()
            unnamed = httpx.post(f"{url}/v1/long-term-memory/", json={"memories": [record]})
            _refused(unnamed, 422, "names exactly one tenant")
            named = {"memories": [_record(namespace="acme")]}
            slow = httpx.post(
                f"{url}/v1/long-term-memory/?wait=true&wait_timeout=0.5", json=named, timeout=10
            )
            _refused(slow, 504, "not applied within 0.5s")
            assert slow.json()["retryable"] is True
    finally:
        drop(Deployment(Settings.from_env(bare)))


def test_up_serve_starts_the_server_beside_the_stack(
    settings: Settings, env: dict[str, str]
) -> None:
    stack = LocalStack(settings)
    if stack.pid("kafka") is None or stack.pid("redis") is None:
        pytest.skip("the stack was not started by `memstream up`, so `up --serve` cannot join it")
    port = free_port()
    started = memstream_process({**env, "MEMSTREAM_SERVER_PORT": str(port)}, "up", "--serve")
    pid = stack.pid("server")
    try:
        assert started.returncode == 0, started.stderr
        assert "kafka: already running" in started.stdout and "server: ready" in started.stdout
        assert httpx.get(f"http://127.0.0.1:{port}/v1/health").status_code == 200
        assert "server: running" in memstream_process(env, "status").stdout
    finally:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            wait_until(lambda: stack.pid("server") is None, "the server to stop")
