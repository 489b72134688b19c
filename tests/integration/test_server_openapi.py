"""Schemathesis against the OpenAPI document `memstream serve` publishes: generated requests
to every route, valid and invalid, never get a 5xx, and every response matches the schema
(status code documented, content type, body).

Schemathesis's pytest plugin reads a pytest attribute that pytest 9 no longer has, so the
operations are driven through its documented strategies (`APIOperation.as_strategy`) with
hypothesis directly.

In `make test` the examples are the same every run (tests/fuzzing.py); `make fuzz` draws new
ones, many more. A failure it finds is fixed and its request added to REGRESSIONS, which every
run of the gate sends first.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, example, given, settings
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ..fuzzing import examples
from .serving import tenant_key

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

EXAMPLES = examples(25)
ATTEMPTS = 3

# Requests the fuzzer once answered with a 5xx, by (method, path): each is sent, as an explicit
# example, before the generated ones in both modes.
REGRESSIONS: dict[tuple[str, str], list[dict[str, Any]]] = {
    # An empty session namespace reached the search filter as an empty value: a 500
    # (--hypothesis-seed=251557871175403775873906161222418223730), now a 422.
    ("POST", "/v1/memory/prompt"): [
        {"body": {"query": "0", "session": {"session_id": "", "namespace": ""}}},
        {"body": {"query": "0", "session": {"session_id": "", "user_id": ""}}},
        # An empty session id is no session, and excludes none from the search.
        {"body": {"query": "0", "session": {"session_id": ""}}},
    ],
}


def no_5xx_unless_told_to_wait(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """No 5xx, except the documented 504 of a write told to wait (`?wait=true`) longer than
    its `wait_timeout` allowed (a fuzzer picks timeouts of nanoseconds)."""
    asked_to_wait = str((case.query or {}).get("wait")).lower() == "true"
    if response.status_code == 504 and asked_to_wait:
        return None
    return not_a_server_error(ctx, response, case)


def send(case: Case, server: str, headers: dict[str, str]) -> Response:
    """The server's answer to `case`, sent again (up to ATTEMPTS times) while it is a
    retryable 503: a write Kafka did not acknowledge within the server's timeout, which a
    machine busy enough makes happen to any request. The API says to retry (event ids are
    deterministic, so nothing is written twice); a 503 that persists is still a failure."""
    for _ in range(ATTEMPTS - 1):
        response = case.call(base_url=server, headers=headers, timeout=30)
        if response.status_code != 503 or not _retryable(response):
            return response
    return case.call(base_url=server, headers=headers, timeout=30)


def _retryable(response: Response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("retryable") is True


# What the issue asks of the served document: no 5xx, and every response as documented.
CHECKS = [
    no_5xx_unless_told_to_wait,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_5xx_and_every_response_matches_the_schema(
    server: str, env: dict[str, str], mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{server}/openapi.json")
    # The session's namespace is fresh, so a fixed tenant name is too.
    headers = {"Authorization": f"Bearer {tenant_key(env, f'fuzz-{mode.value}')}"}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {op.path for op in operations} >= {
        "/v1/long-term-memory/",
        "/v1/long-term-memory/search",
        "/v1/long-term-memory/{memory_id}",
        "/v1/long-term-memory",
        "/v1/long-term-memory/forget",
        "/v1/memory/prompt",
        "/v1/health",
        "/v1/working-memory/",
        "/v1/working-memory/{session_id}",
        "/v1/working-memory/{session_id}/messages",
    }
    for operation in operations:
        inputs = [operation.body, operation.query, operation.path_parameters]
        if mode == GenerationMode.NEGATIVE and not any(inputs):
            continue  # nothing to make invalid (GET /v1/health)

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, suppress_health_check=list(HealthCheck))
        def exchange(case: Case) -> None:
            case.validate_response(send(case, server, headers), checks=CHECKS)

        for known in REGRESSIONS.get((operation.method.upper(), operation.path), []):
            exchange = example(case=operation.Case(**known))(exchange)
        exchange()
