"""How the HTTP API answers an error: memstream's error classes as status codes, each body
`{"detail", "code", "retryable"}` (`detail` is what AMS's client reads). Under the store API
(`/v1/stores/`, Redis Agent Memory's) the same errors are RFC 9457 problem details with the
`type` URIs its SDK reads, `code` and `retryable` beside them; a refused input is 400 there."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel

from memstream.errors import (
    ConfigurationError,
    ForbiddenError,
    InfrastructureError,
    InvalidInputError,
    LimitExceededError,
    MemoryIdRetiredError,
    MemoryNotFoundError,
    MemstreamError,
    NamespaceConflictError,
    NotAuthenticatedError,
    ProjectionLagError,
    StaleSessionError,
)

__all__ = [
    "ERROR_RESPONSES",
    "STORE_ERROR_RESPONSES",
    "STORE_PREFIX",
    "ErrorResponse",
    "Problem",
    "error_response",
    "problem_response",
    "status_of",
]

# The routes of Redis Agent Memory's store API (server/store_routes.py) answer problems.
STORE_PREFIX = "/v1/stores/"


class ErrorResponse(BaseModel):
    detail: str
    code: str
    retryable: bool = False


# The most specific class first: the first match decides.
_STATUS: tuple[tuple[type[MemstreamError], int], ...] = (
    (NotAuthenticatedError, 401),
    (ForbiddenError, 403),
    (MemoryNotFoundError, 404),
    (MemoryIdRetiredError, 409),
    (StaleSessionError, 409),
    (NamespaceConflictError, 409),
    (InvalidInputError, 422),
    (ProjectionLagError, 504),
    (InfrastructureError, 503),
    (ConfigurationError, 500),
)

# The error answers every route may give, for the OpenAPI schema.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (401, 403, 404, 409, 413, 422, 503, 504)
}


def status_of(exc: MemstreamError, path: str = "") -> int:
    """The status `exc` answers on `path` (the store API says 400 for a refused input and 424
    for a dependency that is away, as its SDK expects)."""
    if isinstance(exc, LimitExceededError) and exc.limit == "max_body_bytes":
        return 413
    status = next((status for cls, status in _STATUS if isinstance(exc, cls)), 500)
    if path.startswith(STORE_PREFIX):
        return {422: 400, 503: 424}.get(status, status)
    return status


class Problem(BaseModel):
    """An error of the store API: RFC 9457 problem details, with memstream's code."""

    type: str
    title: str
    status: int
    detail: str
    code: str
    retryable: bool = False


# The error answers every store route may give, for the OpenAPI schema.
STORE_ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem} for status in (400, 401, 403, 404, 409, 413, 424, 504)
}

# The problem types of the store API's SDK, by status.
_PROBLEMS = {
    400: ("/errors/invalid-data", "Invalid request"),
    401: ("/errors/authentication-failed", "Authentication failed"),
    403: ("/errors/insufficient-permissions", "Insufficient permissions"),
    404: ("/errors/resource-not-found", "Resource not found"),
    408: ("/errors/timeout", "Timeout"),
    409: ("/errors/conflict", "Conflict"),
    413: ("/errors/payload-too-large", "Payload too large"),
    424: ("/errors/resource-unavailable", "Resource unavailable"),
    429: ("/errors/too-many-requests", "Too many requests"),
}


def problem_response(status: int, code: str, detail: str, retryable: bool = False) -> JSONResponse:
    kind, title = _PROBLEMS.get(status, ("/errors/unexpected-error", "Unexpected error"))
    body = Problem(
        type=kind, title=title, status=status, detail=detail, code=code, retryable=retryable
    )
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


def error_response(
    status: int, code: str, detail: str, retryable: bool = False, *, path: str = ""
) -> JSONResponse:
    """The answer to an error on `path`: a problem under the store API, else AMS's shape."""
    if path.startswith(STORE_PREFIX):
        return problem_response(status, code, detail, retryable)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = ErrorResponse(detail=detail, code=code, retryable=retryable)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)
