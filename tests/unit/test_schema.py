from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstream import Memory, MemoryType
from memstream.memory.provenance import Provenance
from memstream.projections.schema import (
    Fields,
    Keyspace,
    VectorType,
    from_hash,
    memory_index_schema,
    order_member,
    query_blob,
    to_hash,
    vector_of,
)

ids = st.uuids().map(str)


@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 4_102_444_800_000_000), ids), min_size=2))
def test_order_members_sort_by_importance_then_time_then_id(
    rows: list[tuple[float, int, str]],
) -> None:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    memories = [
        Memory(
            memory_id,
            "t",
            "c",
            MemoryType.CONVERSATION,
            "th",
            epoch + timedelta(microseconds=us),
            importance,
            "e",
        )
        for importance, us, memory_id in rows
    ]
    members = sorted(order_member(m) for m in memories)
    expected = sorted(rows, key=lambda r: (round(r[0] * 1_000_000), r[1], r[2]))
    assert [m.rsplit(":", 1)[1] for m in members] == [r[2] for r in expected]


def test_a_memory_survives_its_hash() -> None:
    memory = Memory(
        id="m1",
        tenant="a|b",
        content="hello",
        memory_type=MemoryType.CONVERSATION,
        thread="t 1",
        timestamp=datetime(2026, 11, 2, 9, 30, 0, 123456, tzinfo=UTC),
        importance=0.25,
        event_id="e1",
        role="user",
        metadata={"dia_id": "D1:3"},
        embedding_model="m@1",
    )
    fields = to_hash(memory, np.zeros(3, dtype=np.float32))
    text = {k: v for k, v in fields.items() if isinstance(v, str)}
    assert from_hash(text) == memory
    assert fields["embedding"] == np.zeros(3, dtype=np.float32).tobytes()


@pytest.mark.parametrize(
    ("run", "turn", "replaced"), [("r|1", 7, ()), ("", None, ("m2", "m3")), ("", 0, ())]
)
def test_a_memory_keeps_its_provenance_in_its_hash_and_only_what_the_hash_lacks(
    run: str, turn: int | None, replaced: tuple[str, ...]
) -> None:
    at = datetime(2026, 11, 2, 9, 30, 0, 123456, tzinfo=UTC)
    provenance = Provenance(
        event_id="e1", event_type="TurnCompleted", event_version=3, topic="memstream.memory",
        partition=5, offset=123456789, thread="t 1", run=run, turn=turn, recorded_at=at,
        replaced=replaced,
    )  # fmt: skip
    memory = Memory(
        id="m1", tenant="acme", content="hello", memory_type=MemoryType.CONVERSATION,
        thread="t 1", timestamp=at, importance=0.5, event_id="e1", provenance=provenance,
    )  # fmt: skip
    fields = to_hash(memory, np.zeros(3, dtype=np.float32))
    text = {k: v for k, v in fields.items() if isinstance(v, str)}
    assert from_hash(text) == memory
    assert "e1" not in str(fields[Fields.LINEAGE]) and "t 1" not in str(fields[Fields.LINEAGE])
    # A memory written before lineage was kept reads as of unknown provenance.
    del text[Fields.LINEAGE]
    assert from_hash(text).provenance is None


def test_keys_carry_the_tenant_token_never_the_raw_id() -> None:
    keys = Keyspace("ns")
    assert keys.memory("a:b", "m1") == "ns:g1:mem:613a62:m1"
    assert keys.order("a:b") == "ns:g1:order:613a62"
    assert keys.applied("a:b") == "ns:g1:applied:613a62"
    assert keys.forgotten("a:b") == "ns:g1:forgotten:613a62"
    assert keys.orders_prefix("a:b") == "ns:g1:threads:613a62:"


def test_every_state_key_and_index_carries_its_generation_but_not_the_alias() -> None:
    second = Keyspace("ns").at(2)
    assert second.memory("a", "m") == "ns:g2:mem:61:m"
    assert second.positions == "ns:g2:positions" and second.meta == "ns:g2:meta"
    assert second.index_name == "ns:memories:v2:g2"
    assert second.memory_prefix == "ns:g2:mem:"
    # Prefixes of two generations never overlap (g1 vs g10).
    assert not Keyspace("ns").at(10).memory_prefix.startswith(Keyspace("ns").memory_prefix)
    assert second.alias == Keyspace("ns").alias == "ns:memories"
    assert second.generation_key == "ns:generation"


def test_a_key_a_search_returned_says_its_generation() -> None:
    keys = Keyspace("ns")
    assert keys.holding("ns:g12:mem:61:m") == keys.at(12)
    assert keys.holding(keys.at(3).memory("a:b", "x:y")).generation == 3
    for foreign in ("other:g2:mem:61:m", "ns:memories", "ns:gx:mem:61:m", "ns:g2"):
        with pytest.raises(ValueError, match="no key of a generation"):
            keys.holding(foreign)


def test_a_memory_carries_its_date_in_words_for_the_lexical_search() -> None:
    from memstream.memory.ranking.tokens import when_text
    from memstream.projections.schema import Fields

    assert when_text(datetime(2023, 5, 7, 13, 56, tzinfo=UTC)) == "7 May 2023"
    memory = Memory(
        "m", "t", "c", MemoryType.CONVERSATION, "th", datetime(2023, 5, 7, tzinfo=UTC), 0.5, "e"
    )
    assert to_hash(memory, np.zeros(2, dtype=np.float32))[Fields.WHEN] == "7 May 2023"


@given(
    st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=1, max_size=64),
    st.sampled_from(list(VectorType)),
)
def test_a_stored_vector_reads_back_as_float32_whichever_type_stored_it(
    values: list[float], vector_type: VectorType
) -> None:
    vector = np.asarray(values, dtype=np.float32)
    memory = Memory("m", "t", "c", MemoryType.CONVERSATION, "th", datetime.now(UTC), 0.5, "e")
    blob = to_hash(memory, vector, vector_type=vector_type)[Fields.EMBEDDING]
    assert isinstance(blob, bytes)
    assert len(blob) == len(values) * (2 if vector_type is VectorType.FLOAT16 else 4)
    read = vector_of(blob, len(values))
    assert read.dtype == np.float32 and read.shape == vector.shape
    # float16 keeps 11 significant bits: within 2**-11 of a value in [-1, 1].
    tolerance = 2**-11 if vector_type is VectorType.FLOAT16 else 0.0
    assert np.max(np.abs(read - vector)) <= tolerance


def test_a_query_travels_in_its_index_type() -> None:
    vector = np.asarray([0.5, -0.25, 1.0], dtype=np.float64)
    assert query_blob(vector) == vector.astype(np.float32).tobytes()  # not float64's 24 bytes
    assert query_blob(VectorType.FLOAT16.cast(vector)) == vector.astype(np.float16).tobytes()
    assert query_blob(VectorType.FLOAT32.cast(vector)) == vector.astype(np.float32).tobytes()


def test_the_index_declares_the_generation_vector_type() -> None:
    for vector_type in VectorType:
        schema = memory_index_schema(Keyspace("ns"), 8, vector_type)
        attrs = schema.fields[Fields.EMBEDDING].attrs
        assert attrs.datatype.value == vector_type.value.upper()  # type: ignore[union-attr]
    default = memory_index_schema(Keyspace("ns"), 8).fields[Fields.EMBEDDING].attrs
    assert default.datatype.value == "FLOAT32"  # type: ignore[union-attr]
