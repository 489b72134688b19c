"""The cipher stage of the codec: content sealed under a tenant's data key, routing in clear,
every alteration refused, plaintext (old logs, other producers) still read, erasure final."""

from __future__ import annotations

import base64
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest

from memstream import DecodeContext, TurnCompleted, decode_event, encode_event
from memstream.errors import (
    ConfigurationError,
    DataKeyErasedError,
    EventIdMismatchError,
    InvalidTenantError,
    SealedEventError,
    UnknownDataKeyError,
)
from memstream.memory.cipher import (
    CLOCK_KEY,
    InProcessKeyring,
    KeyringState,
    MasterKeys,
    clock_tick,
    erased_marker,
    new_data_key,
    parse_master_key,
    record_key,
)
from memstream.memory.events import REGISTRY, ItemStored, MemorySaved
from memstream.memory.model import MemoryType
from memstream.memory.schemas import event_schema
from memstream.memory.tenancy import validate_tenant

ROOT = Path(__file__).resolve().parents[2]
AT = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
MARKER = "zanzibar-quokka-7731"


def turn(tenant: str = "acme", turn: int = 1, query: str = f"where is {MARKER}?") -> TurnCompleted:
    return TurnCompleted(
        tenant=tenant,
        thread="t1",
        run="r1",
        turn=turn,
        query=query,
        answer=f"{MARKER} is in the attic",
        recorded_at=AT,
        importance=0.5,
        embedding_model="model@1",
        metadata={"source": f"note {MARKER}"},
    )


def context(keyring: InProcessKeyring | None, tenant: str = "acme") -> DecodeContext:
    return DecodeContext(key=tenant.encode(), keyring=keyring)


def test_sealed_content_is_not_in_the_bytes_and_routing_is() -> None:
    keyring = InProcessKeyring()
    event = turn()
    raw = encode_event(event, keyring)
    assert MARKER.encode() not in raw
    body = json.loads(raw)
    assert (body["tenant"], body["thread"], body["run"], body["turn"]) == ("acme", "t1", "r1", 1)
    assert body["sealed"]["fields"] == ["query", "answer", "metadata"]
    assert body["sealed"]["key"] == keyring.current("acme").key_id
    assert decode_event(raw, context(keyring)) == event


def test_the_id_is_the_plaintexts_sealed_or_not() -> None:
    keyring = InProcessKeyring()
    event = turn()
    sealed, plain = json.loads(encode_event(event, keyring)), json.loads(encode_event(event))
    assert sealed["id"] == plain["id"] == event.id
    saved = MemorySaved(
        tenant="acme",
        memory_id="m-1",
        thread="t",
        content=MARKER,
        memory_type=MemoryType.KNOWLEDGE,
        role="user",
        saved_at=AT,
        importance=0.5,
        embedding_model="model@1",
    )
    assert json.loads(encode_event(saved, keyring))["id"] == saved.id
    assert decode_event(encode_event(saved, keyring), context(keyring)) == saved


def test_plaintext_events_still_decode_with_a_keyring() -> None:
    event = turn()
    assert decode_event(encode_event(event), context(InProcessKeyring())) == event


GOLDEN = sorted(
    p
    for p in (ROOT / "tests/fixtures/events").glob("v*/*.json")
    if not p.name.endswith(".memories.json")
)


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_golden_payloads_decode_through_the_cipher_stage(path: Path) -> None:
    raw = path.read_bytes().strip()
    context = DecodeContext(
        key=json.loads(raw)["tenant"].encode(),
        timestamp=AT,
        embedding_model="model@1",
        importance=0.5,
        keyring=InProcessKeyring(),
    )
    assert decode_event(raw, context).id == json.loads(raw)["id"]


def test_an_altered_ciphertext_is_refused() -> None:
    keyring = InProcessKeyring()
    body = json.loads(encode_event(turn(), keyring))
    blob = bytearray(base64.b64decode(body["answer"]))
    blob[-1] ^= 1
    body["answer"] = base64.b64encode(bytes(blob)).decode()
    with pytest.raises(SealedEventError, match="does not open"):
        decode_event(json.dumps(body).encode(), context(keyring))


def test_ciphertexts_cannot_be_swapped_between_fields_or_events() -> None:
    keyring = InProcessKeyring()
    one = json.loads(encode_event(turn(turn=1), keyring))
    two = json.loads(encode_event(turn(turn=2, query="another question"), keyring))
    swapped_fields = {**one, "query": one["answer"], "answer": one["query"]}
    with pytest.raises(SealedEventError, match="moved"):
        decode_event(json.dumps(swapped_fields).encode(), context(keyring))
    swapped_events = {**one, "query": two["query"]}
    with pytest.raises(SealedEventError, match="moved"):
        decode_event(json.dumps(swapped_events).encode(), context(keyring))
    # The id is bound too: claiming event two's id for event one's content fails to open.
    with pytest.raises(SealedEventError):
        decode_event(json.dumps({**one, "id": two["id"]}).encode(), context(keyring))


def test_moving_an_event_to_another_tenant_is_refused() -> None:
    keyring = InProcessKeyring()
    keyring.current("globex")
    body = json.loads(encode_event(turn(), keyring))
    # Relabelled in clear: acme's key id is not globex's, and the AAD names the tenant.
    with pytest.raises(UnknownDataKeyError):
        decode_event(json.dumps({**body, "tenant": "globex"}).encode(), context(keyring, "globex"))


def test_another_keyring_cannot_open_it() -> None:
    raw = encode_event(turn(), InProcessKeyring())
    with pytest.raises(UnknownDataKeyError, match="not in the keys topic"):
        decode_event(raw, context(InProcessKeyring()))


def test_a_reader_without_a_keyring_says_so() -> None:
    raw = encode_event(turn(), InProcessKeyring())
    with pytest.raises(SealedEventError, match="no keyring"):
        decode_event(raw, context(None))


def test_an_erased_tenant_is_unreadable_for_good_and_others_are_not() -> None:
    keyring = InProcessKeyring()
    acme, globex = encode_event(turn(), keyring), encode_event(turn("globex"), keyring)
    destroyed = keyring.erase("acme")
    assert len(destroyed) == 1
    with pytest.raises(DataKeyErasedError) as caught:
        decode_event(acme, context(keyring))
    assert caught.value.code == "erased"
    assert decode_event(globex, context(keyring, "globex")) == turn("globex")
    # Recording again afterwards starts a new key; the old content stays gone.
    again = encode_event(turn(turn=9), keyring)
    assert json.loads(again)["sealed"]["key"] not in destroyed
    assert decode_event(again, context(keyring)).turn == 9
    with pytest.raises(DataKeyErasedError):
        decode_event(acme, context(keyring))


def test_items_seal_their_value_and_texts() -> None:
    keyring = InProcessKeyring()
    item = ItemStored(
        tenant="acme",
        namespace=("memories", "u1"),
        key="k",
        put_id="p1",
        value=json.dumps({"note": MARKER, "also": "the second field"}),
        texts=(MARKER, "the second field"),
        recorded_at=AT,
        importance=0.5,
        embedding_model="model@1",
    )
    raw = encode_event(item, keyring)
    assert MARKER.encode() not in raw and b"the second field" not in raw
    assert decode_event(raw, context(keyring)) == item


def test_a_sealed_payload_fits_the_published_schema() -> None:
    keyring = InProcessKeyring()
    schema = event_schema(REGISTRY.of(turn()))
    jsonschema.validate(json.loads(encode_event(turn(), keyring)), schema)
    jsonschema.validate(json.loads(encode_event(turn())), schema)


def test_an_altered_id_of_a_sealed_event_is_still_caught_after_opening() -> None:
    keyring = InProcessKeyring()
    body = json.loads(encode_event(turn(), keyring))
    body["turn"] = 2  # a routing field changed in clear: the id no longer derives
    with pytest.raises(EventIdMismatchError):
        decode_event(json.dumps(body).encode(), context(keyring))


# -- the keyring's state and the master key -------------------------------------------------


def masters() -> MasterKeys:
    return MasterKeys(os.urandom(32))


def test_racing_first_keys_both_survive_and_every_reader_seals_with_the_first() -> None:
    kek = masters()
    first, second = kek.wrap(new_data_key("acme")), kek.wrap(new_data_key("acme"))
    reader = KeyringState(kek)
    for record in (first, second):
        reader.apply(record.record_key, record.encode())
    chosen = reader.first("acme")
    assert chosen is not None and chosen.key_id == first.key_id
    # The loser's key still opens what its writer sealed before it read the winner.
    assert reader.find("acme", second.key_id) is not None
    assert reader.key_ids("acme") == [first.key_id, second.key_id]


def test_an_erasure_marker_outlives_the_compacted_tombstones() -> None:
    kek = masters()
    record = kek.wrap(new_data_key("acme"))
    # A reader arriving after compaction sees neither the key nor its tombstone: the marker.
    late = KeyringState(kek)
    late.apply(record_key("acme", "erased"), erased_marker("acme", [record.key_id]))
    with pytest.raises(DataKeyErasedError):
        late.find("acme", record.key_id)
    assert late.find("acme", "some-other-key") is None


def test_the_keys_topic_clock_names_no_tenant_and_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kek = masters()
    record = kek.wrap(new_data_key("acme"))
    reader = KeyringState(kek)
    for key, value in ((record.record_key, record.encode()), (CLOCK_KEY, clock_tick())):
        reader.apply(key, value)
    assert reader.key_ids("acme") == [record.key_id]
    assert [t for t, _ in reader.records()] == ["acme"]
    assert "ignored" not in caplog.text  # a record memstream wrote, not a stranger's
    with pytest.raises(InvalidTenantError):
        validate_tenant(json.loads(CLOCK_KEY)[0])  # no tenant can own the clock's key


def test_rotation_previous_master_keys_still_unwrap() -> None:
    old, new = os.urandom(32), os.urandom(32)
    record = MasterKeys(old).wrap(new_data_key("acme"))
    assert MasterKeys(new, (old,)).unwrap(record).key_id == record.key_id
    rewrapped = MasterKeys(new, (old,)).wrap(MasterKeys(old).unwrap(record))
    assert rewrapped.kek_id == MasterKeys(new).kek_id
    assert MasterKeys(new).unwrap(rewrapped).secret == MasterKeys(old).unwrap(record).secret
    with pytest.raises(SealedEventError, match="PREVIOUS_MASTER_KEYS"):
        MasterKeys(new).unwrap(record)


def test_secrets_are_not_in_reprs() -> None:
    key, kek = new_data_key("acme"), masters()
    assert key.secret.hex() not in repr(key) and str(key.secret) not in repr(key)
    assert str(kek.current) not in repr(kek)


@pytest.mark.parametrize("raw", ["", "short", base64.b64encode(b"x" * 16).decode(), "!!!!"])
def test_a_malformed_master_key_says_how_to_make_one(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="32 random bytes"):
        parse_master_key(raw, "MEMSTREAM_MASTER_KEY")
