"""The log evolves: golden payloads of every released version, upcasting, the rename, events
from other producers, the published schemas and the id derivation's test vectors."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstream import (
    DecodeContext,
    MemoryForgotten,
    MessageRecorded,
    TenantErased,
    TurnCompleted,
    decode_event,
    encode_event,
    memories_of,
)
from memstream.errors import (
    EventDecodeError,
    EventIdMismatchError,
    EventKeyMismatchError,
    EventVersionError,
)
from memstream.memory.codec import check_transcodings
from memstream.memory.events import (
    ID_NAMESPACE,
    REGISTRY,
    Applies,
    EventType,
    Origin,
    Registry,
    Selection,
    derive_id,
    memory_ids_of,
)
from memstream.memory.model import Memory, MemoryType
from memstream.memory.provenance import provenance_of
from memstream.memory.schemas import schema_files

from ..fuzzing import examples

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "events"
AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
WHERE = Origin("t", AT)
CONTEXT = DecodeContext(key=b"acme", timestamp=AT, embedding_model="model@1", importance=0.5)


def golden() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("v*/*.json") if not p.name.endswith(".memories.json"))


def _memory_json(event: Any) -> list[dict[str, Any]]:
    return [
        {
            "id": m.id,
            "content": m.content,
            "role": m.role,
            "memory_type": str(m.memory_type),
            "thread": m.thread,
            "timestamp": m.timestamp.isoformat(),
            "importance": m.importance,
            "event_id": m.event_id,
            "metadata": dict(m.metadata),
            "embedding_model": m.embedding_model,
        }
        for m in memories_of(event)
    ]


@pytest.mark.parametrize("path", golden(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_golden_payload_decodes_keeps_its_id_and_writes_the_same_memories(
    path: Path,
) -> None:
    raw = path.read_bytes().strip()
    event = decode_event(raw)
    assert event.id == json.loads(raw)["id"]
    expected = json.loads(path.with_suffix(".memories.json").read_text())
    assert _memory_json(event) == expected


@pytest.mark.parametrize("path", golden(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_the_ids_an_event_writes_are_its_memories_ids_without_building_them(path: Path) -> None:
    event = decode_event(path.read_bytes().strip())
    assert memory_ids_of(event) == tuple(m.id for m in memories_of(event))


_ID_PARTS = st.lists(
    st.one_of(st.text(), st.integers(), st.booleans(), st.floats(allow_nan=False), st.none()),
    max_size=6,
)


@settings(max_examples=examples(300))
@given(parts=_ID_PARTS)
def test_an_id_is_the_uuid5_of_its_parts_json_whatever_the_parts(parts: list[object]) -> None:
    # derive_id writes the JSON by hand for texts and ints: it must be json.dumps's, always.
    name = json.dumps(parts, ensure_ascii=False)
    assert derive_id.__wrapped__(*parts) == str(uuid.uuid5(ID_NAMESPACE, name))


def test_golden_payloads_cover_every_version_of_every_type() -> None:
    payloads = [json.loads(p.read_bytes()) for p in golden()]
    written = {(body["type"], body["version"]) for body in payloads}
    for row in REGISTRY.rows:
        names = [*row.aliases.items(), (row.name, row.version)]
        for version in range(1, row.version + 1):
            assert any((name, version) in written for name, newest in names if newest >= version)
        assert all(any(body["type"] == name for body in payloads) for name, _ in names)


def test_a_v1_turn_recorded_reads_as_a_turn_completed_with_the_same_id() -> None:
    raw = (GOLDEN / "v1" / "TurnRecorded.json").read_bytes()
    old = json.loads(raw)
    event = decode_event(raw)
    assert isinstance(event, TurnCompleted)
    assert event.id == old["id"]
    new = json.loads(encode_event(event))
    assert (new["type"], new["version"], new["id"]) == ("TurnCompleted", 3, old["id"])
    assert {k: v for k, v in new.items() if k not in ("type", "version")} == {
        **{k: v for k, v in old.items() if k not in ("type", "version")},
        "shown": [],
        "echo": False,
    }


def test_a_v2_turn_reads_as_shown_nothing_and_a_v3_turn_keeps_what_it_was_shown_in_order() -> None:
    v2 = decode_event((GOLDEN / "v2" / "TurnCompleted.json").read_bytes())
    raw = (GOLDEN / "v3" / "TurnCompleted.json").read_bytes()
    v3 = decode_event(raw)
    assert isinstance(v2, TurnCompleted) and isinstance(v3, TurnCompleted)
    assert v2.shown == () and v3.shown == tuple(json.loads(raw)["shown"])
    assert v3.shown == (
        "f772f4ad-bef1-5a37-8df6-febb71761d6f",
        "0b0e2a44-5c1d-5f0e-9a8e-2f4c1b7d9e31",
    )
    # What a turn was shown is not part of which turn it is: same id, same memories.
    assert v3.id == v2.id and memories_of(v3) == memories_of(v2)
    assert json.loads(encode_event(v3))["shown"] == list(v3.shown)
    assert not v2.echo and not v3.echo


def test_an_echoed_answer_writes_no_memory_and_the_users_words_still_do() -> None:
    echo = decode_event((GOLDEN / "v3" / "TurnCompleted-echo.json").read_bytes())
    assert isinstance(echo, TurnCompleted) and echo.echo
    assert [m.role for m in memories_of(echo)] == ["user"]
    assert memory_ids_of(echo) == (memories_of(echo)[0].id,)
    assert echo.id == dataclasses.replace(echo, echo=False).id


def test_a_payload_without_a_version_is_the_version_its_name_was_last_written_in() -> None:
    body = json.loads((GOLDEN / "v1" / "TurnRecorded.json").read_bytes())
    del body["version"]
    assert decode_event(json.dumps(body).encode()).id == body["id"]
    with pytest.raises(EventVersionError):  # TurnRecorded was never written in version 2
        decode_event(json.dumps({**body, "version": 2}).encode())


def minimal_turn(**extra: object) -> bytes:
    body = {
        "type": "TurnCompleted",
        "tenant": "acme",
        "thread": "monday",
        "run": "run-1",
        "turn": 0,
        "query": "Which database?",
        "answer": "PostgreSQL.",
        **extra,
    }
    return json.dumps(body).encode()


def test_a_minimal_turn_takes_its_id_and_its_missing_fields_from_the_reader() -> None:
    event = decode_event(minimal_turn(), CONTEXT)
    assert event == TurnCompleted(
        "acme", "monday", "run-1", 0, "Which database?", "PostgreSQL.", AT, 0.5, "model@1", {}
    )
    # The derivation of docs/events.md gives the same id.
    assert event.id == derive_id(json.dumps(["memory.record", "acme", "monday", "run-1", 0]))


def test_what_a_producer_gives_wins_over_the_readers_defaults() -> None:
    event = decode_event(
        minimal_turn(recorded_at="2026-01-02T03:04:05+00:00", importance=0.9, metadata={"k": "v"}),
        CONTEXT,
    )
    assert isinstance(event, TurnCompleted)
    assert event.recorded_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (event.importance, dict(event.metadata)) == (0.9, {"k": "v"})


def test_without_a_reader_the_filled_fields_are_required() -> None:
    with pytest.raises(EventDecodeError, match="lacks field 'recorded_at'"):
        decode_event(minimal_turn())


def test_an_id_that_the_fields_do_not_derive_is_refused_with_that_reason() -> None:
    with pytest.raises(EventIdMismatchError, match="carries id 'mine'") as caught:
        decode_event(minimal_turn(id="mine"), CONTEXT)
    assert caught.value.code == "event_id_mismatch"
    good = decode_event(minimal_turn(), CONTEXT).id
    assert decode_event(minimal_turn(id=good), CONTEXT).id == good


@pytest.mark.parametrize("key", [b"globex", b"", b"ACME"])
def test_an_event_whose_kafka_key_is_not_its_tenant_is_refused(key: bytes) -> None:
    context = dataclasses.replace(CONTEXT, key=key)
    with pytest.raises(EventKeyMismatchError, match="key must be the tenant id") as caught:
        decode_event(minimal_turn(), context)
    assert caught.value.code == "event_key_mismatch"


def test_an_unknown_field_is_refused_and_named() -> None:
    with pytest.raises(EventDecodeError, match="has no field 'importanse'"):
        decode_event(minimal_turn(importanse=0.9), CONTEXT)


def test_a_forget_from_another_producer_needs_no_id_version_or_empty_selectors() -> None:
    raw = json.dumps(
        {
            "type": "MemoryForgotten",
            "tenant": "acme",
            "request_id": "r-1",
            "requested_at": "2026-12-03T08:00:00Z",
            "thread": "monday",
        }
    ).encode()
    event = decode_event(raw, CONTEXT)
    assert event == MemoryForgotten("acme", "r-1", AT, thread="monday")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=4,
)


@given(
    kind=st.sampled_from([*REGISTRY.names, "Nope", 3]),
    fields=st.dictionaries(
        st.sampled_from(
            [
                "tenant",
                "thread",
                "run",
                "turn",
                "query",
                "answer",
                "version",
                "id",
                "memory_ids",
                "recorded_at",
                "importance",
                "metadata",
                "before",
                "everything",
                "summary",
            ]
        ),
        json_values,
    ),
)
@settings(max_examples=examples(300))
def test_decoding_any_json_object_fails_only_with_an_event_decode_error(
    kind: object, fields: dict[str, object]
) -> None:
    body = {**json.loads(minimal_turn()), "type": kind, **fields}
    with contextlib.suppress(EventDecodeError):
        decode_event(json.dumps(body).encode(), CONTEXT)


def test_every_field_of_every_event_type_has_a_transcoding() -> None:
    check_transcodings(REGISTRY)

    @dataclasses.dataclass(frozen=True)
    class Odd:
        type: ClassVar[str] = "Odd"
        version: ClassVar[int] = 1
        tenant: str
        when: complex

        @property
        def id(self) -> str:
            return "x"

    odd = EventType(
        Odd, effect="x", applies=Applies.RECORD, memories=lambda e, _: (), origin=lambda e: WHERE
    )
    with pytest.raises(TypeError, match=r"Odd\.when is a complex"):
        check_transcodings(Registry(odd))


def test_a_row_needs_one_upcaster_per_older_version_and_names_are_unique() -> None:
    with pytest.raises(TypeError, match="needs 2 upcasters"):
        EventType(
            TurnCompleted,
            effect="memory.record",
            applies=Applies.RECORD,
            memories=memories_of,
            origin=lambda e: WHERE,
        )
    row = REGISTRY.of(decode_event(minimal_turn(), CONTEXT))
    with pytest.raises(TypeError, match="written as 'TurnCompleted'"):
        Registry(row, dataclasses.replace(row, aliases={}))


def test_a_row_that_writes_memories_says_where_they_come_from() -> None:
    row = REGISTRY.of(decode_event(minimal_turn(), CONTEXT))
    with pytest.raises(TypeError, match="TurnCompleted writes memories: say where they come"):
        dataclasses.replace(row, origin=None)
    # Every registered type that writes memories gives them their provenance (lineage).
    for path in golden():
        event = decode_event(path.read_bytes().strip())
        if memories_of(event):
            provenance = provenance_of(event)
            assert provenance is not None, path.name
            assert provenance.event_type == REGISTRY.of(event).name


def test_a_row_says_what_it_removes_exactly_when_it_applies_so() -> None:
    # What a forget or an expiry removes is read from its row by every place that applies
    # events (the Redis writer, the in-process store, the history fold), never from its class.
    forgotten = REGISTRY.of(
        MemoryForgotten(tenant="acme", request_id="r", requested_at=AT, everything=True)
    )
    with pytest.raises(TypeError, match="which memories it forgets"):
        dataclasses.replace(forgotten, selects=None)
    turn = REGISTRY.of(decode_event(minimal_turn(), CONTEXT))
    with pytest.raises(TypeError, match="which memories it forgets"):
        dataclasses.replace(turn, selects=lambda e: Selection(everything=True))
    expired = next(row for row in REGISTRY.rows if row.applies is Applies.EXPIRE)
    with pytest.raises(TypeError, match="which put it ends"):
        dataclasses.replace(expired, lapses=None)
    with pytest.raises(TypeError, match="TurnCompleted forgets nothing"):
        turn.selection(decode_event(minimal_turn(), CONTEXT))


# The parts that apply events, and the event classes each may still name (for what is no
# applying: the projector hands an erasure's key ids to its keyring as soon as it reads one).
APPLIERS = {
    "projections/writer.py": set(),
    "inmemory/writer.py": set(),
    "memory/inprocess.py": set(),
    "memory/history.py": set(),
    "streams/projector.py": {"TenantErased"},
}


def test_the_parts_that_apply_events_ask_the_row_not_the_class() -> None:
    # So a new event type that applies as an existing kind does is its class and its row.
    classes = {row.event.__name__ for row in REGISTRY.rows}
    source = ROOT / "src" / "memstream"
    for module, allowed in APPLIERS.items():
        tree = ast.parse((source / module).read_text())
        named = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        named |= {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
        assert named & classes <= allowed, f"{module} names {sorted(named & classes - allowed)}"


def test_a_selection_chooses_by_ids_or_by_thread_and_time_or_everything() -> None:
    def memory(memory_id: str, thread: str, hour: int) -> Memory:
        at = datetime(2026, 11, 1, hour, tzinfo=UTC)
        return Memory(
            id=memory_id,
            tenant="acme",
            content="x",
            memory_type=MemoryType.CONVERSATION,
            thread=thread,
            timestamp=at,
            importance=0.5,
            event_id="e",
        )

    kept = [memory("a", "t1", 9), memory("b", "t1", 11), memory("c", "t2", 9)]
    noon = datetime(2026, 11, 1, 10, tzinfo=UTC)

    def chosen(selection: Selection) -> list[str]:
        return [m.id for m in kept if selection.chooses(m)]

    assert chosen(Selection(ids=("b", "zz"))) == ["b"]
    assert chosen(Selection(thread="t1")) == ["a", "b"]
    assert chosen(Selection(before=noon)) == ["a", "c"]
    assert chosen(Selection(thread="t1", before=noon)) == ["a"]
    assert chosen(Selection(everything=True)) == ["a", "b", "c"]
    assert chosen(Selection()) == []  # a selection that names nothing chooses nothing


def test_the_checked_in_schemas_are_the_codes() -> None:
    folder = ROOT / "docs" / "events"
    on_disk = {p.name: p.read_text() for p in folder.glob("*.schema.json")}
    assert on_disk == schema_files(), "run `memstream schemas docs/events` and commit the files"


def test_the_schemas_accept_the_minimal_turn_and_refuse_a_stranger_field() -> None:
    schema = json.loads(schema_files()["TurnCompleted.v3.schema.json"])
    body = json.loads(minimal_turn())
    assert set(schema["required"]) <= set(body)
    assert schema["additionalProperties"] is False and "importanse" not in schema["properties"]
    assert set(body) <= set(schema["properties"])


def test_the_id_test_vectors_hold() -> None:
    doc = json.loads((ROOT / "docs" / "events" / "id-vectors.json").read_text())
    assert uuid.UUID(doc["namespace"]) == ID_NAMESPACE
    for vector in doc["vectors"]:
        assert json.dumps(vector["parts"], ensure_ascii=False) == vector["name"]
        assert str(uuid.uuid5(ID_NAMESPACE, vector["name"])) == vector["id"]
        fields = vector["fields"]
        if vector["type"] == "TurnCompleted":
            event: Any = TurnCompleted(
                **fields, query="q", answer="a", recorded_at=AT, importance=0.5, embedding_model="m"
            )
            assert event.id == vector["id"]
        elif vector["type"] == "MessageRecorded":
            event = MessageRecorded(
                **fields,
                content="c",
                speaker="s",
                recorded_at=AT,
                importance=0.5,
                embedding_model="m",
            )
            assert event.id == vector["id"]
        elif vector["type"] == "TenantErased":
            assert TenantErased(**fields, requested_at=AT).id == vector["id"]
        elif vector["type"] == "memory":
            assert derive_id(fields["event_id"], fields["part"]) == vector["id"]
