"""A data key made while Kafka is away is confirmed before anything sealed under it is
reported durable: an event whose key record never reaches the keys topic is unreadable."""

from __future__ import annotations

import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memstream.errors import KafkaUnavailableError
from memstream.eventsourced import keyed
from memstream.memory.cipher import DataKey, InProcessKeyring, MasterKeys
from memstream.processes import free_port
from memstream.streams.data_keys import KafkaKeyring
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics


class _Unconfirmed(InProcessKeyring):
    """A keyring whose keys' records have not reached the keys topic (yet)."""

    def __init__(self) -> None:
        super().__init__()
        self.durable = False

    @property  # type: ignore[override]
    def unconfirmed(self) -> bool:
        return not self.durable

    def confirm(self, timeout_s: float) -> None:
        if not self.durable:
            raise KafkaUnavailableError("the keys topic did not acknowledge the key")


def test_an_event_is_told_durable_only_once_its_key_is() -> None:
    keyring = _Unconfirmed()
    told: list[str] = []
    durable = keyed(keyring, lambda: told.append("durable"))
    assert durable is not None
    durable()  # the event acknowledged, its key not: the effect stays started
    assert told == []
    keyring.durable = True
    durable()
    assert told == ["durable"]


def test_without_a_keyring_or_a_callback_nothing_is_wrapped() -> None:
    def told() -> None: ...

    assert keyed(None, told) is told
    assert keyed(InProcessKeyring(), None) is None


def test_a_key_made_while_kafka_is_away_is_not_confirmed_until_kafka_has_it() -> None:
    # A port nothing listens on: every read and write of the keys topic fails.
    kafka = KafkaConnection(bootstrap=f"127.0.0.1:{free_port()}")
    keyring = KafkaKeyring(kafka, Topics("away"), MasterKeys(AESGCM.generate_key(bit_length=256)))
    assert not keyring.unconfirmed
    key: DataKey = keyring.current("acme")  # made here: sealing does not wait for Kafka
    assert keyring.current("acme") == key
    assert keyring.unconfirmed
    with pytest.raises(KafkaUnavailableError, match="data key made while Kafka was away"):
        keyring.confirm(0.5)


def test_a_keyring_that_made_no_key_here_confirms_at_once() -> None:
    kafka = KafkaConnection(bootstrap=f"127.0.0.1:{free_port()}")
    keyring = KafkaKeyring(kafka, Topics("none"), MasterKeys(os.urandom(32)))
    assert not keyring.unconfirmed
    keyring.confirm(0.1)  # nothing made here: nothing to wait for
