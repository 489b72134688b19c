"""A secured Kafka and Redis beside the plain local stack, as a managed service runs them: the
broker takes clients only over SASL_SSL (SCRAM-SHA-512 users, mutual TLS) with an authorizer
on, and Redis only over TLS (client certificates required) with ACL users, its default user
off. The tests start one (tests/integration/conftest.py) to run the pipe through it and to
run each component with only the rights docs/operations.md gives it.

Everything lives in one folder the caller owns (a test's temporary folder): the certificates,
made here with openssl (a CA, the servers' certificate for 127.0.0.1 and localhost, a client
certificate, and a second CA nobody trusts, for the tests that must be refused), the broker's
and Redis's data and logs. The passwords are random per start. Ports are the caller's (free
ones, so several checkouts and CI do not meet).
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from memstream.binaries import cache_dir, kafka_libs, redis_home, stack_file
from memstream.binaries import java as java_binary
from memstream.cli.stack import fill_template, kafka_answers, new_cluster_id, run_step
from memstream.errors import StackError
from memstream.processes import stop
from memstream.projections.connection import RedisConnection, redis_client
from memstream.streams.acls import KAFKA_ROLES
from memstream.streams.kafka import KafkaConnection

__all__ = ["ADMIN", "ROLES", "Certificates", "SecureStack", "make_certificates"]

ADMIN = "admin"
# The users besides the admin, one per component: what each may do is docs/operations.md's
# least-privilege table (memstream.streams.acls, memstream.projections.acl).
ROLES = KAFKA_ROLES
_MECHANISM = "SCRAM-SHA-512"
_READY_S = 120.0
_BROKER_SUBJECT = "memstream-broker"


@dataclass(frozen=True, slots=True)
class Certificates:
    """PEM files: the CA, the servers' certificate and key (and both in one file, the broker's
    keystore), a client certificate and key, and a CA that signed none of them."""

    ca: Path
    server_cert: Path
    server_key: Path
    keystore: Path
    client_cert: Path
    client_key: Path
    untrusted_ca: Path


def make_certificates(folder: Path) -> Certificates:
    """A fresh CA and the certificates signed by it, valid two days, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        run_step(["openssl", *args], f"run openssl {args[0]}")

    for ca in ("ca", "untrusted-ca"):
        openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-keyout", str(folder / f"{ca}.key"), "-out", str(folder / f"{ca}.pem"),
            "-subj", f"/CN=memstream test {ca}",
        )  # fmt: skip
    names = folder / "san.cnf"
    names.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (("server", _BROKER_SUBJECT), ("client", "memstream-client")):
        openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={subject}",
            "-keyout", str(folder / f"{name}.key"), "-out", str(folder / f"{name}.csr"),
        )  # fmt: skip
        openssl(
            "x509", "-req", "-days", "2", "-in", str(folder / f"{name}.csr"),
            "-CA", str(folder / "ca.pem"), "-CAkey", str(folder / "ca.key"),
            "-CAcreateserial", "-extfile", str(names), "-out", str(folder / f"{name}.pem"),
        )  # fmt: skip
    keystore = folder / "server-keystore.pem"
    keystore.write_text((folder / "server.key").read_text() + (folder / "server.pem").read_text())
    for path in folder.iterdir():
        path.chmod(0o600)
    return Certificates(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        keystore=keystore,
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
        untrusted_ca=folder / "untrusted-ca.pem",
    )


class SecureStack:
    """The secured broker and Redis in `folder`, on the given ports."""

    def __init__(
        self, folder: Path, *, kafka_port: int, controller_port: int, redis_port: int
    ) -> None:
        self.folder = folder
        self.kafka_port = kafka_port
        self.controller_port = controller_port
        self.redis_port = redis_port
        self.passwords = {user: secrets.token_hex(16) for user in (ADMIN, *ROLES)}
        self._processes: list[subprocess.Popen[bytes]] = []
        self._certificates: Certificates | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    @property
    def redis_url(self) -> str:
        return f"rediss://127.0.0.1:{self.redis_port}/0"

    def environ(self, kafka_user: str, redis_user: str | None = None) -> dict[str, str]:
        """The MEMSTREAM_* variables of a process that connects as these users (the same name
        on both sides unless `redis_user` is given)."""
        certs = self.certificates
        redis_user = redis_user or kafka_user
        return {
            "MEMSTREAM_KAFKA_BOOTSTRAP": self.bootstrap,
            "MEMSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "MEMSTREAM_KAFKA_SASL_MECHANISM": _MECHANISM,
            "MEMSTREAM_KAFKA_USERNAME": kafka_user,
            "MEMSTREAM_KAFKA_PASSWORD": self.passwords[kafka_user],
            "MEMSTREAM_KAFKA_CA_FILE": str(certs.ca),
            "MEMSTREAM_KAFKA_CERT_FILE": str(certs.client_cert),
            "MEMSTREAM_KAFKA_KEY_FILE": str(certs.client_key),
            "MEMSTREAM_REDIS_URL": self.redis_url,
            "MEMSTREAM_REDIS_USERNAME": redis_user,
            "MEMSTREAM_REDIS_PASSWORD": self.passwords[redis_user],
            "MEMSTREAM_REDIS_CA_FILE": str(certs.ca),
            "MEMSTREAM_REDIS_CERT_FILE": str(certs.client_cert),
            "MEMSTREAM_REDIS_KEY_FILE": str(certs.client_key),
        }

    def kafka(self, user: str = ADMIN) -> KafkaConnection:
        certs = self.certificates
        return KafkaConnection(
            self.bootstrap,
            "SASL_SSL",
            _MECHANISM,
            user,
            self.passwords[user],
            str(certs.ca),
            str(certs.client_cert),
            str(certs.client_key),
        )

    def redis(self, user: str = ADMIN) -> RedisConnection:
        certs = self.certificates
        return RedisConnection(
            self.redis_url,
            user,
            self.passwords[user],
            str(certs.ca),
            str(certs.client_cert),
            str(certs.client_key),
        )

    # -- starting and stopping ----------------------------------------------------------------

    def start(self) -> None:
        """Make the certificates, start Redis and the broker, and return once both answer
        (StackError with the end of the log if one does not)."""
        self._certificates = make_certificates(self.folder / "certs")
        self._start("redis", self._redis_command(), self._redis_ready)
        self._start("kafka", self._kafka_command(), self._kafka_ready)

    def stop(self) -> None:
        """Stop what `start` started (its data stays in the folder)."""
        for process in reversed(self._processes):
            stop(process)
        self._processes.clear()

    def _start(self, name: str, command: list[str], ready: Callable[[], bool]) -> None:
        log = self.folder / f"{name}.log"
        with log.open("ab") as out:
            process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self._processes.append(process)
        deadline = time.monotonic() + _READY_S
        while not ready():
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise StackError(f"the secured {name} did not get ready:\n{tail}")
            time.sleep(0.2)

    @property
    def certificates(self) -> Certificates:
        if self._certificates is None:
            raise StackError("the secured stack has not been started")
        return self._certificates

    # -- Kafka --------------------------------------------------------------------------------

    def _kafka_command(self) -> list[str]:
        certs = self.certificates
        libs = kafka_libs(cache_dir())
        data = self.folder / "kafka-data"
        config = self.folder / "kafka.properties"
        fill_template(
            stack_file("kafka/secure.properties"),
            config,
            port=self.kafka_port,
            controller_port=self.controller_port,
            data_dir=data,
            keystore=certs.keystore,
            truststore=certs.ca,
            admin_user=ADMIN,
            admin_password=self.passwords[ADMIN],
            broker_principal=f"CN={_BROKER_SUBJECT}",
        )
        java = [
            java_binary(),
            "-Xms128m",
            "-Xmx512m",
            f"-Dlog4j2.configurationFile={stack_file('kafka/log4j2.yaml')}",
            "-cp",
            f"{libs}/*",
        ]
        # The SCRAM users exist from the start: the broker's own inter-broker login needs the
        # admin's before anything could add it.
        users = [
            arg
            for user, password in self.passwords.items()
            for arg in ("--add-scram", f"{_MECHANISM}=[name={user},password={password}]")
        ]
        run_step(
            [*java, "kafka.tools.StorageTool", "format", "--standalone", "-t", new_cluster_id(),
             "-c", str(config), *users],
            "format the secured Kafka's storage",
        )  # fmt: skip
        return [*java, "kafka.Kafka", str(config)]

    def _kafka_ready(self) -> bool:
        return kafka_answers(self.kafka())

    # -- Redis --------------------------------------------------------------------------------

    def _redis_command(self) -> list[str]:
        certs = self.certificates
        home = redis_home(cache_dir())
        data = self.folder / "redis-data"
        data.mkdir(parents=True, exist_ok=True)
        users: list[str] = []
        for user in (ADMIN, *ROLES):
            # The components' users exist but may do nothing until `ACL SETUSER` gives them
            # their namespace's rights (memstream.projections.acl).
            rights = ["~*", "&*", "+@all"] if user == ADMIN else ["resetkeys", "-@all"]
            users += ["--user", user, "on", f">{self.passwords[user]}", *rights]
        return [
            str(home / "bin" / "redis-server"),
            "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(self.redis_port),
            "--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key),
            "--tls-ca-cert-file", str(certs.ca), "--tls-auth-clients", "yes",
            "--dir", str(data), "--save", "", "--appendonly", "no",
            "--loadmodule", str(home / "lib" / "redisearch.so"),
            "--loadmodule", str(home / "lib" / "rejson.so"),
            "--user", "default", "off",
            *users,
        ]  # fmt: skip

    def _redis_ready(self) -> bool:
        client = redis_client(self.redis())
        try:
            return bool(client.ping())
        except Exception:  # noqa: BLE001 - any failure means "not ready yet"
            return False
        finally:
            with suppress(Exception):
                client.close()
