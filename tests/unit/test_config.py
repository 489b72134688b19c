import pytest

from memstream import Settings
from memstream.errors import ConfigurationError


def test_defaults_point_at_the_local_stack() -> None:
    settings = Settings.from_env({})
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.redis == "redis://127.0.0.1:6379/0"
    assert settings.namespace == "memstream"


def test_ports_move_the_local_defaults_and_urls_override_them() -> None:
    moved = Settings.from_env({"MEMSTREAM_KAFKA_PORT": "19092", "MEMSTREAM_REDIS_PORT": "16379"})
    assert moved.bootstrap_servers == "127.0.0.1:19092"
    assert moved.redis == "redis://127.0.0.1:16379/0"
    external = Settings.from_env(
        {"MEMSTREAM_KAFKA_BOOTSTRAP": "k1:9092,k2:9092", "MEMSTREAM_REDIS_URL": "redis://r:1/2"}
    )
    assert external.bootstrap_servers == "k1:9092,k2:9092"
    assert external.redis == "redis://r:1/2"


@pytest.mark.parametrize(
    ("env", "value", "says"),
    [
        ("MEMSTREAM_PARTITIONS", "zero", "MEMSTREAM_PARTITIONS='zero' is not valid"),
        ("MEMSTREAM_PARTITIONS", "0", "positive integer"),
        ("MEMSTREAM_MAX_MEMORIES", "-1", "0 or more"),
        ("MEMSTREAM_DEFAULT_IMPORTANCE", "2", "between 0 and 1"),
        ("MEMSTREAM_NAMESPACE", "Bad Name", "a-z, 0-9"),
    ],
)
def test_bad_values_name_the_variable_and_the_rule(env: str, value: str, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        Settings.from_env({env: value})


def test_every_setting_is_documented_with_its_variable() -> None:
    described = Settings.describe()
    assert len(described) == len(Settings.__dataclass_fields__)
    for env, _default, doc in described:
        assert env.startswith("MEMSTREAM_") and doc
