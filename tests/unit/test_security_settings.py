"""Kafka and Redis security: the settings checked together, translated once into each client's
dialect, and never shown (the secured servers themselves: tests/integration/test_security.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import faust
import pytest

from memstream import Settings
from memstream.errors import ConfigurationError
from memstream.projections.acl import redis_acl, redis_acl_command
from memstream.projections.connection import RedisConnection
from memstream.projections.schema import Keyspace
from memstream.streams.acls import kafka_grants
from memstream.streams.kafka import KafkaConnection
from memstream.streams.topics import Topics

SECRET = "s3cret-Pa55"


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    """Paths that exist (the settings check existence, not content)."""
    paths = {}
    for name in ("ca", "cert", "key"):
        path = tmp_path / f"{name}.pem"
        path.write_text("-")
        paths[name] = str(path)
    return paths


def sasl_ssl(pem: dict[str, str], **more: str) -> dict[str, str]:
    return {
        "MEMSTREAM_KAFKA_BOOTSTRAP": "k1:9094,k2:9094",
        "MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "sasl_ssl",
        "MEMSTREAM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
        "MEMSTREAM_KAFKA_USERNAME": "worker",
        "MEMSTREAM_KAFKA_PASSWORD": SECRET,
        "MEMSTREAM_KAFKA_CA_FILE": pem["ca"],
        **more,
    }


def test_plaintext_without_credentials_is_the_default() -> None:
    settings = Settings.from_env({})
    kafka = KafkaConnection.from_settings(settings)
    assert settings.kafka_security_protocol == "PLAINTEXT"
    assert kafka.librdkafka() == {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "plaintext",
    }
    assert kafka.aiokafka() == {
        "bootstrap_servers": "127.0.0.1:9092",
        "security_protocol": "PLAINTEXT",
    }
    assert kafka.faust_credentials() is None
    assert RedisConnection.from_settings(settings).options() == ("redis://127.0.0.1:6379/0", {})


K = "MEMSTREAM_KAFKA_"


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({f"{K}SECURITY_PROTOCOL": "SASL_SSL"}, f"{K}SASL_MECHANISM"),
        (
            {
                f"{K}SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                f"{K}SASL_MECHANISM": "PLAIN",
                f"{K}USERNAME": "u",
            },
            f"{K}PASSWORD",
        ),
        ({f"{K}USERNAME": "u"}, f"{K}SECURITY_PROTOCOL"),
        ({f"{K}SECURITY_PROTOCOL": "TLS"}, f"{K}SECURITY_PROTOCOL='TLS'"),
        ({f"{K}SASL_MECHANISM": "GSSAPI"}, f"{K}SASL_MECHANISM='GSSAPI'"),
        (
            {f"{K}SECURITY_PROTOCOL": "SSL", f"{K}CA_FILE": "/no/such/ca.pem"},
            f"{K}CA_FILE: /no/such/ca.pem is not a readable file",
        ),
        ({"MEMSTREAM_REDIS_CA_FILE": "/etc/hostname"}, "MEMSTREAM_REDIS_URL: must start"),
    ],
)
def test_security_settings_that_do_not_fit_name_the_variable(
    env: dict[str, str], names: str
) -> None:
    with pytest.raises(ConfigurationError, match=names):
        Settings.from_env(env)


def test_a_client_certificate_needs_its_key(pem: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match="MEMSTREAM_KAFKA_KEY_FILE"):
        Settings.from_env(sasl_ssl(pem, MEMSTREAM_KAFKA_CERT_FILE=pem["cert"]))


def test_sasl_ssl_is_translated_once_into_each_clients_dialect(
    pem: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    env = sasl_ssl(pem, MEMSTREAM_KAFKA_CERT_FILE=pem["cert"], MEMSTREAM_KAFKA_KEY_FILE=pem["key"])
    kafka = KafkaConnection.from_settings(Settings.from_env(env))

    assert kafka.librdkafka() == {
        "bootstrap.servers": "k1:9094,k2:9094",
        "security.protocol": "sasl_ssl",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "worker",
        "sasl.password": SECRET,
        "ssl.ca.location": pem["ca"],
        "ssl.certificate.location": pem["cert"],
        "ssl.key.location": pem["key"],
    }
    # The TLS context itself needs real PEM files: what it is asked for is checked here, the
    # real files in tests/integration/test_security.py.
    asked: list[tuple[str | None, str | None, str | None]] = []

    def fake_context(**kw: str | None) -> ssl.SSLContext:
        asked.append((kw["cafile"], kw["certfile"], kw["keyfile"]))
        return ssl.create_default_context()

    monkeypatch.setattr("memstream.streams.kafka.create_ssl_context", fake_context)
    kwargs = kafka.aiokafka()
    credentials = kafka.faust_credentials()
    assert {k: v for k, v in kwargs.items() if k != "ssl_context"} == {
        "bootstrap_servers": "k1:9094,k2:9094",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "worker",
        "sasl_plain_password": SECRET,
    }
    assert isinstance(kwargs["ssl_context"], ssl.SSLContext)
    assert isinstance(credentials, faust.SASLCredentials)
    assert (credentials.username, credentials.password) == ("worker", SECRET)
    assert credentials.mechanism.value == "SCRAM-SHA-512"
    assert credentials.protocol.value == "SASL_SSL"
    assert asked == [(pem["ca"], pem["cert"], pem["key"])] * 2
    assert kafka.faust_broker() == "kafka://k1:9094;kafka://k2:9094"


def test_redis_users_and_tls_files_are_redis_py_options(pem: dict[str, str]) -> None:
    settings = Settings.from_env(
        {
            "MEMSTREAM_REDIS_URL": "rediss://old:oldpass@r.example:6380/2",
            "MEMSTREAM_REDIS_USERNAME": "agent",
            "MEMSTREAM_REDIS_PASSWORD": SECRET,
            "MEMSTREAM_REDIS_CA_FILE": pem["ca"],
            "MEMSTREAM_REDIS_CERT_FILE": pem["cert"],
            "MEMSTREAM_REDIS_KEY_FILE": pem["key"],
        }
    )
    url, options = RedisConnection.from_settings(settings).options()
    # The variables win over the URL's user: redis-py would let the URL's win.
    assert url == "rediss://r.example:6380/2"
    assert options == {
        "username": "agent",
        "password": SECRET,
        "ssl_ca_certs": pem["ca"],
        "ssl_certfile": pem["cert"],
        "ssl_keyfile": pem["key"],
    }
    # A user and password in the URL alone are used as they are.
    alone = RedisConnection("rediss://agent:pw@r.example:6380/0")
    assert alone.options() == ("rediss://agent:pw@r.example:6380/0", {})
    assert alone.where == "rediss://***@r.example:6380/0"


def test_no_password_is_shown(pem: dict[str, str]) -> None:
    settings = Settings.from_env(
        {
            **sasl_ssl(pem),
            "MEMSTREAM_REDIS_URL": "redis://r:6379/0",
            "MEMSTREAM_REDIS_PASSWORD": SECRET,
            "MEMSTREAM_EMBEDDING_API_KEY": SECRET,
            "MEMSTREAM_CHAT_API_KEY": SECRET,
        }
    )
    kafka = KafkaConnection.from_settings(settings)
    redis = RedisConnection.from_settings(settings)
    for shown in (repr(settings), repr(kafka), kafka.where, repr(redis), redis.where):
        assert SECRET not in shown
    assert "k1:9094,k2:9094" in kafka.where and "worker" in kafka.where
    # ...yet a child process started with the settings gets them.
    assert settings.environ()["MEMSTREAM_KAFKA_PASSWORD"] == SECRET


def test_each_role_is_confined_to_its_namespace() -> None:
    topics, keys = Topics("acme"), Keyspace("acme")
    agent = kafka_grants("agent", topics)
    assert {(g.name, g.operations) for g in agent} == {
        ("acme.memory", ("Write", "Describe")),
        ("acme.monitoring", ("Write", "Describe")),
        ("acme.keys", ("Read", "Write", "Describe")),  # it seals turns under tenants' keys
        ("acme-keys", ("Describe",)),  # the keys reader's group: librdkafka looks it up
    }
    # The agent never reads the log: the keys topic is the only one it reads.
    assert [g.name for g in agent if "Read" in g.operations] == ["acme.keys"]
    worker = {g.name: g for g in kafka_grants("worker", topics)}
    assert worker["acme-projector"].resource == "group"
    assert all(
        g.name.startswith(("acme.", "acme-")) for r in ("agent", "worker", "importer", "server")
        for g in kafka_grants(r, topics)
    )  # fmt: skip
    assert agent[0].command("b:9094") == (
        "kafka-acls.sh --bootstrap-server b:9094 --command-config admin.properties --add "
        "--allow-principal User:agent --operation Write --operation Describe --topic acme.memory"
    )
    for role in ("agent", "worker", "importer"):
        rules = redis_acl(role, keys)
        assert [r for r in rules if r.startswith("~")] == ["~acme:*"]
        assert "-@all" in rules and "+@admin" not in rules and "+@all" not in rules
    # The server reads its namespace and writes only its own state (sessions, heartbeat, keys).
    server = redis_acl("server", keys)
    assert [r for r in server if "~" in r] == [
        "%R~acme:*",
        "~acme:memories*",
        "~acme:wm:*",
        "~acme:process:*",
        "~acme:apikeys",
    ]
    assert "-@all" in server and "-@dangerous" in server and "+evalsha" in server
    assert {g.name: g.operations for g in kafka_grants("server", topics)} == {
        **{g.name: g.operations for g in agent},
        "acme.dead-letters": ("Describe",),
    }
    assert "+@write" not in redis_acl("agent", keys)
    assert redis_acl_command("agent", keys).startswith("ACL SETUSER agent on >PASSWORD resetkeys")
    with pytest.raises(ValueError, match="unknown role"):
        kafka_grants("admin", topics)
