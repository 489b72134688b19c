"""The local stack's topology: the port rule, the file `memstream up` records, and Settings
finding the brokers and Redis there when nothing names them."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from memstream.cli import stack
from memstream.config import Settings
from memstream.errors import ConfigurationError
from memstream.streams.topics import replication
from memstream.topology import TOPOLOGY_FILE, Broker, LocalTopology


def _plan(**changes: int) -> LocalTopology:
    ports = {"kafka_port": 19092, "controller_port": 19093, "redis_port": 19079}
    return LocalTopology.plan(**(ports | changes))  # type: ignore[arg-type]


def test_the_ith_instance_of_a_service_listens_on_its_port_plus_100_i() -> None:
    cluster = _plan(brokers=3, shards=3)
    assert cluster.brokers == (
        Broker(1, 19092, 19093),
        Broker(2, 19192, 19193),
        Broker(3, 19292, 19293),
    )
    assert cluster.redis_ports == (19079, 19179, 19279)
    assert cluster.bootstrap == "127.0.0.1:19092,127.0.0.1:19192,127.0.0.1:19292"
    assert cluster.redis_urls == (
        "redis://127.0.0.1:19079/0",
        "redis://127.0.0.1:19179/0",
        "redis://127.0.0.1:19279/0",
    )
    assert cluster.quorum_voters == "1@127.0.0.1:19093,2@127.0.0.1:19193,3@127.0.0.1:19293"


def test_one_broker_and_one_redis_are_todays_stack() -> None:
    alone = _plan()
    assert alone.bootstrap == "127.0.0.1:19092"
    assert alone.redis_urls == ("redis://127.0.0.1:19079/0",)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"brokers": 0}, "--brokers 0: give a number from 1 to 9"),
        ({"shards": 10}, "--shards 10: give a number from 1 to 9"),
        # Redis shard 1 would take broker 1's controller port.
        ({"shards": 2, "redis_port": 18993}, "use 19093 twice"),
        ({"brokers": 3, "kafka_port": 65400}, "pass 65535"),
    ],
)
def test_a_layout_whose_ports_meet_is_refused(changes: dict[str, int], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says.replace("+", r"\+")):
        _plan(**changes)


def test_the_other_services_ports_are_kept_free() -> None:
    with pytest.raises(ConfigurationError, match=r"use 19179 twice.*MEMSTREAM_SERVER_PORT"):
        LocalTopology.plan(
            kafka_port=19092,
            controller_port=19093,
            redis_port=19079,
            shards=2,
            reserved=(19179, 0),
        )


def test_a_recorded_topology_reads_back_and_a_missing_one_is_none(tmp_path: Path) -> None:
    assert LocalTopology.read(tmp_path) is None
    cluster = _plan(brokers=3, shards=2)
    cluster.write(tmp_path / "state")
    assert LocalTopology.read(tmp_path / "state") == cluster


def test_a_topology_file_that_does_not_parse_says_which_and_what_to_do(tmp_path: Path) -> None:
    (tmp_path / TOPOLOGY_FILE).write_text('{"brokers": [{"port": 1}]}')
    with pytest.raises(ConfigurationError, match=f"{tmp_path / TOPOLOGY_FILE}.*remove it"):
        LocalTopology.read(tmp_path)


def test_settings_reach_the_recorded_cluster_when_nothing_names_kafka_or_redis(
    tmp_path: Path,
) -> None:
    _plan(brokers=3, shards=3).write(tmp_path)
    settings = Settings.from_env({"MEMSTREAM_STATE_DIR": str(tmp_path)})
    assert settings.bootstrap_servers == "127.0.0.1:19092,127.0.0.1:19192,127.0.0.1:19292"
    # Several Redis are the projection's shards, shard 0 first (and the one `redis` names).
    assert settings.shard_urls == (
        "redis://127.0.0.1:19079/0",
        "redis://127.0.0.1:19179/0",
        "redis://127.0.0.1:19279/0",
    )
    assert settings.redis == settings.shard_urls[0]
    # A child process handed these settings reaches the same brokers.
    assert settings.environ()["MEMSTREAM_KAFKA_BOOTSTRAP"] == settings.bootstrap_servers


def test_settings_reach_the_recorded_redis_when_there_is_one(tmp_path: Path) -> None:
    _plan(brokers=3).write(tmp_path)
    settings = Settings.from_env({"MEMSTREAM_STATE_DIR": str(tmp_path)})
    assert settings.redis == "redis://127.0.0.1:19079/0"


def test_explicit_servers_win_over_the_recorded_topology(tmp_path: Path) -> None:
    _plan(brokers=3, shards=1).write(tmp_path)
    settings = Settings.from_env(
        {
            "MEMSTREAM_STATE_DIR": str(tmp_path),
            "MEMSTREAM_KAFKA_BOOTSTRAP": "k1:9092",
            "MEMSTREAM_REDIS_URL": "redis://r:1/0",
        }
    )
    assert settings.bootstrap_servers == "k1:9092"
    assert settings.redis == "redis://r:1/0"


@pytest.mark.parametrize(
    ("brokers", "expected"), [(1, (1, 1)), (2, (2, 1)), (3, (3, 2)), (6, (3, 2))]
)
def test_topics_get_min_3_brokers_replicas_and_2_in_sync_where_there_are_3(
    brokers: int, expected: tuple[int, int]
) -> None:
    assert replication(brokers) == expected


def test_a_new_cluster_id_never_reads_as_an_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """One id in 64 would start with "-", and kafka-storage would take `-t -...` for an
    option: such ids are drawn again."""
    dashed = uuid.UUID(bytes=b"\xfb" + bytes(15))  # base64 of 0xfb... starts with "-"
    drawn = iter([dashed, dashed, uuid.UUID(int=1)])
    monkeypatch.setattr(stack.uuid, "uuid4", lambda: next(drawn))
    found = stack.new_cluster_id()
    assert found == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert not found.startswith("-")
