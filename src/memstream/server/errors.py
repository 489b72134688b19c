"""How the HTTP API answers an error: memstream's error classes as status codes, each body
`{"detail", "code", "retryable"}` (`detail` is what AMS's client reads)."""

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
    NotAuthenticatedError,
    ProjectionLagError,
    StaleSessionError,
)

__all__ = ["ERROR_RESPONSES", "ErrorResponse", "error_response", "status_of"]


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
    (InvalidInputError, 422),
    (ProjectionLagError, 504),
    (InfrastructureError, 503),
    (ConfigurationError, 500),
)

# The error answers every route may give, for the OpenAPI schema.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse} for status in (401, 403, 404, 409, 413, 422, 503, 504)
}


def status_of(exc: MemstreamError) -> int:
    if isinstance(exc, LimitExceededError) and exc.limit == "max_body_bytes":
        return 413
    return next((status for cls, status in _STATUS if isinstance(exc, cls)), 500)


def error_response(status: int, code: str, detail: str, retryable: bool = False) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    body = ErrorResponse(detail=detail, code=code, retryable=retryable)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)
