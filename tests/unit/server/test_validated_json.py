"""A route that answers `validated_json(model)` sends the body FastAPI would have made of the
same model as its `response_model`: same fields, same names (aliases), same values."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from fastapi.routing import serialize_response
from fastapi.utils import create_model_field
from pydantic import BaseModel

from memstream.server.models import MemoryRecordResults
from memstream.server.routes import validated_json
from memstream.server.store_models import SearchResponse

_AT = datetime(2026, 5, 1, 12, 30, 0, 123456, tzinfo=UTC)


def _fastapi_body(model: BaseModel) -> Any:
    field = create_model_field(name="response", type_=type(model), mode="serialization")
    return asyncio.run(serialize_response(field=field, response_content=model, is_coroutine=False))


def _sent(model: BaseModel) -> Any:
    response = validated_json(model)
    assert response.media_type == "application/json"
    return json.loads(bytes(response.body))


def test_a_search_result_is_sent_as_fastapi_would_send_it() -> None:
    results = MemoryRecordResults.model_validate(
        {
            "memories": [
                {
                    "id": "m-1",
                    "text": "Deploys happen on Tuesdays — «always» after the stand-up",
                    "session_id": "thread-1",
                    "namespace": "acme",
                    "created_at": _AT,
                    "last_accessed": _AT,
                    "updated_at": _AT,
                    "topics": ["deploys"],
                    "memory_type": "episodic",
                    "metadata": {"source": "chat"},
                    "importance": 0.25,
                    "dist": 0.1 + 0.2,
                    "score": 1 - (0.1 + 0.2),
                    "score_type": "hybrid",
                    "valid_to": None,
                }
            ],
            "total": 12,
            "next_offset": 10,
        }
    )
    sent = _sent(results)
    assert sent == _fastapi_body(results)
    assert sent["memories"][0]["dist"] == 0.1 + 0.2  # floats exact, not rounded
    assert sent["memories"][0]["text"].endswith("«always» after the stand-up")


def test_a_store_answer_keeps_its_camel_case_names() -> None:
    page = SearchResponse.model_validate(
        {
            "items": [
                {
                    "id": "m-2",
                    "text": "likes tea",
                    "createdAt": _AT,
                    "updatedAt": _AT,
                    "sessionId": "s-1",
                    "ownerId": "user-7",
                }
            ],
            "nextPageToken": "10",
        }
    )
    sent = _sent(page)
    assert sent == _fastapi_body(page)
    assert sent["nextPageToken"] == "10" and sent["items"][0]["ownerId"] == "user-7"
