"""POST a JSON body to an HTTP API and get JSON back, with the retry policy every provider uses.

Busy (429) and failing (5xx) answers and transport errors are retried with exponential
backoff (honouring Retry-After when the server gives one); any other error status is final.
Every failure is raised as the caller's error type, with what the server said.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from memstream.errors import InfrastructureError

__all__ = ["post_json"]

RETRIES = 4
_MAX_WAIT_S = 30.0


def post_json(
    client: httpx.Client,
    path: str,
    body: dict[str, Any],
    *,
    error: type[InfrastructureError],
    hint: str,
    refused: type[InfrastructureError] | None = None,
) -> Any:
    """The JSON `path` answers to `body`; `error` when it fails, or `refused` (default:
    `error`) when the server's answer is final (a 4xx other than 429)."""
    delay = 0.5
    problem = ""
    for attempt in range(RETRIES + 1):
        try:
            response = client.post(path, json=body)
        except httpx.HTTPError as exc:
            problem = f"could not reach {client.base_url}: {exc}"
        else:
            if response.status_code == 200:
                try:
                    return response.json()
                except ValueError as exc:
                    raise error(
                        f"{client.base_url} answered something that is not JSON: {exc}"
                    ) from exc
            problem = f"{client.base_url} answered {response.status_code}: {response.text[:200]}"
            if response.status_code != 429 and response.status_code < 500:
                raise (refused or error)(f"{problem}; {hint}")
            delay = _retry_after(response) or delay
        if attempt < RETRIES:
            time.sleep(min(delay, _MAX_WAIT_S))
            delay *= 2
    raise error(f"{problem} (after {RETRIES + 1} tries)")


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None
