"""`memstream import FILE.jsonl [--wait]`: load past conversations into a tenant's memory.

One JSON object a line, either a turn or a single message:

    {"tenant": "acme", "thread": "t-1", "query": "...", "answer": "...", "ts": "..."}
    {"tenant": "acme", "thread": "t-1", "content": "...", "speaker": "Ana", "metadata": {...}}

`ts` is ISO-8601 (without a zone it is read as UTC; absent, the import's start time);
`metadata` maps strings to strings and stays with the memories; `importance` (0 to 1) is
optional. The whole file is checked before anything is sent: one bad line stops the import
with its line number, and nothing is written. Events get ids derived from their content, so
importing a file twice adds nothing the second time.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memstream.deployment import Deployment
from memstream.errors import ImportFileError, InvalidInputError, MemstreamError
from memstream.memory.events import MemoryEvent, MessageRecorded, TurnCompleted
from memstream.memory.moments import parse_moment

__all__ = ["parse_import_lines", "register", "wait_applied"]

_TURN_KEYS = {"tenant", "thread", "query", "answer"}
_MESSAGE_KEYS = {"tenant", "thread", "content"}
_OPTIONAL_KEYS = {"ts", "metadata", "importance", "speaker"}
_PUBLISH_BATCH = 500


def parse_import_lines(
    lines: Iterable[str],
    *,
    embedding_model: str,
    max_chars: int,
    default_importance: float,
    now: datetime,
) -> list[MemoryEvent]:
    """Every event of an import file, or ImportFileError for its first bad line."""
    events: list[MemoryEvent] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            events.append(_event(line, embedding_model, max_chars, default_importance, now))
        except ImportFileError:
            raise
        except (InvalidInputError, ValueError) as exc:
            raise ImportFileError(number, str(exc)) from None
    return events


def _event(
    line: str, embedding_model: str, max_chars: int, default_importance: float, now: datetime
) -> MemoryEvent:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(row, dict):
        raise InvalidInputError("each line must be a JSON object")
    is_turn = "query" in row or "answer" in row
    required = _TURN_KEYS if is_turn else _MESSAGE_KEYS
    missing = sorted(required - row.keys())
    if missing:
        kind = "a turn" if is_turn else "a message"
        raise InvalidInputError(f"{kind} needs {', '.join(map(repr, missing))}")
    unknown = sorted(row.keys() - required - _OPTIONAL_KEYS)
    if unknown:
        raise InvalidInputError(
            f"unknown field {unknown[0]!r}; allowed: {sorted(required | _OPTIONAL_KEYS)}"
        )
    texts = {key: row[key] for key in required if key != "tenant"}
    for key, value in texts.items():
        if not isinstance(value, str) or not value.strip():
            raise InvalidInputError(f"{key!r} must be non-empty text")
        if len(value) > max_chars:
            raise InvalidInputError(
                f"{key!r} has {len(value)} characters, more than MEMSTREAM_MAX_RECORD_CHARS="
                f"{max_chars}; split it or raise the limit"
            )
    at = _timestamp(row.get("ts"), now)
    importance = row.get("importance", default_importance)
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not 0 <= importance <= 1
    ):
        raise InvalidInputError(f"'importance' must be a number from 0 to 1, got {importance!r}")
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidInputError("'metadata' must be an object of strings")
    common: dict[str, Any] = {
        "tenant": row["tenant"],
        "thread": texts["thread"],
        "recorded_at": at,
        "importance": float(importance),
        "embedding_model": embedding_model,
        "metadata": metadata,
    }
    speaker = row.get("speaker", "")
    if not isinstance(speaker, str):
        raise InvalidInputError("'speaker' must be text")
    # An imported line has no agent run to key it: its natural key is a digest of what it
    # says and when (as written, so a line without `ts` keys the same on every import).
    said = [texts.get("query"), texts.get("answer"), texts.get("content"), speaker, row.get("ts")]
    digest = hashlib.sha256(json.dumps(said, ensure_ascii=False).encode()).hexdigest()[:32]
    if is_turn:
        return TurnCompleted(
            run=f"import:{digest}", turn=0, query=texts["query"], answer=texts["answer"], **common
        )
    return MessageRecorded(
        source_id=f"import:{digest}", content=texts["content"], speaker=speaker, **common
    )


def _timestamp(raw: object, now: datetime) -> datetime:
    if raw is None:
        return now
    if not isinstance(raw, str):
        raise InvalidInputError(f"'ts' must be an ISO-8601 string, got {raw!r}")
    try:
        return parse_moment(raw)
    except ValueError:
        raise InvalidInputError(f"'ts' is not ISO-8601: {raw!r}") from None


async def _publish(deployment: Deployment, events: list[MemoryEvent]) -> None:
    await deployment.ensure_topics()
    async with deployment.event_publisher() as publisher:
        for start in range(0, len(events), _PUBLISH_BATCH):
            await publisher.publish(events[start : start + _PUBLISH_BATCH])


def import_file(deployment: Deployment, path: Path, *, wait_s: float | None) -> list[MemoryEvent]:
    """Check, send and (with `wait_s`) wait until every event of `path` is recallable."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"cannot read {path}: {exc}") from None
    settings = deployment.settings
    events = parse_import_lines(
        lines,
        embedding_model=deployment.embedding_model,
        max_chars=settings.max_record_chars,
        default_importance=settings.default_importance,
        now=datetime.now(UTC),
    )
    asyncio.run(_publish(deployment, events))
    if wait_s is not None:
        wait_applied(deployment, events, wait_s)
    return events


def wait_applied(deployment: Deployment, events: Sequence[MemoryEvent], wait_s: float) -> None:
    """Return once the live projection has applied every one of `events`."""
    pending = deployment.status().wait_applied(events, wait_s)
    if pending:
        raise MemstreamError(
            f"the events of {len(pending)} tenants were not projected within {wait_s:.0f}s; "
            "is a worker running (`memstream up --worker` or `memstream worker`)? The events "
            "are safely in the log and will be applied."
        )


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    command = commands.add_parser("import", help="import turns or messages from a JSONL file")
    command.add_argument("file", type=Path)
    command.add_argument("--wait", action="store_true", help="return once all is recallable")
    command.add_argument("--timeout", type=float, default=300.0, help="--wait's limit in seconds")
    command.set_defaults(run=_run)


def _run(args: argparse.Namespace, deployment: Deployment) -> int:
    events = import_file(deployment, args.file, wait_s=args.timeout if args.wait else None)
    tenants = len({event.tenant for event in events})
    done = "recallable" if args.wait else "in the log"
    print(f"imported {len(events)} events for {tenants} tenants; {done}", file=sys.stderr)
    return 0
