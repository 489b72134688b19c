"""How every Kafka client reaches the brokers: the bootstrap servers and the security settings
(TLS, SASL), translated once into each client's own configuration.

memstream talks to Kafka through three libraries: librdkafka (confluent-kafka: the agent
side's background producer), aiokafka (the importer, replay, the admin calls, the CLI) and
Faust (the worker, on aiokafka underneath). Each spells the same settings differently;
`KafkaConnection` holds them once, from `Settings`, and hands each client its dialect, so a
client built anywhere else cannot miss the password or the CA. Its repr and `where` never
show the password.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka.conn import create_conn
from aiokafka.errors import KafkaConnectionError, KafkaError
from aiokafka.helpers import create_ssl_context

from memstream.config import Settings

if TYPE_CHECKING:
    import faust

__all__ = ["RIDE_OUT_S", "KafkaConnection"]

# How long a request that meets a lost broker keeps trying, on the brokers left, before it
# fails: longer than a KRaft cluster takes to fence a dead broker and move its partitions,
# coordinators and controller (broker.session.timeout.ms, 9 s by default, then an election).
RIDE_OUT_S = 30.0


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    """The brokers and how to authenticate to them. `PLAINTEXT` (the default) is the local
    stack's: no TLS, no SASL."""

    bootstrap: str
    protocol: str = "PLAINTEXT"
    mechanism: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @classmethod
    def from_settings(cls, settings: Settings) -> KafkaConnection:
        """Settings has checked that the parts fit together (`config._check_security`)."""
        return cls(
            bootstrap=settings.bootstrap_servers,
            protocol=settings.kafka_security_protocol,
            mechanism=settings.kafka_sasl_mechanism,
            username=settings.kafka_username,
            password=settings.kafka_password,
            ca_file=settings.kafka_ca_file,
            cert_file=settings.kafka_cert_file,
            key_file=settings.kafka_key_file,
        )

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def where(self) -> str:
        """Where and as whom, for messages: never the password."""
        who = f" as {self.username!r} ({self.mechanism})" if self.sasl else ""
        return f"{self.bootstrap} over {self.protocol}{who}"

    async def explain(self, exc: BaseException) -> str:
        """`exc` for a message, with what the broker refused when that is why: aiokafka says
        only "Unable to bootstrap" and logs the cause, so one connection is tried again here
        to name it (the TLS handshake or the SASL login)."""
        if not isinstance(exc, KafkaConnectionError) or self.protocol == "PLAINTEXT":
            return repr(exc)
        refusal = await self.refusal()
        return f"{exc!r}; {refusal}" if refusal else repr(exc)

    async def refusal(self) -> str | None:
        """Why the first broker refuses this client, in the driver's words; None when it does
        not (or does not answer at all)."""
        host, _, port = self.bootstrap.split(",")[0].strip().rpartition(":")
        options = self.aiokafka()
        del options["bootstrap_servers"]
        try:
            connection = await asyncio.wait_for(
                create_conn(host, int(port), request_timeout_ms=5000, **options), 10
            )
        except ssl.SSLError as exc:
            return f"the TLS handshake failed ({exc}): check MEMSTREAM_KAFKA_CA_FILE"
        except KafkaError as exc:
            if "Authentication" in type(exc).__name__ or "authentication" in str(exc):
                return (
                    f"the SASL login failed ({exc}): check MEMSTREAM_KAFKA_USERNAME and "
                    "MEMSTREAM_KAFKA_PASSWORD"
                )
            return None
        except (OSError, TimeoutError, ValueError):
            return None
        connection.close()
        return None

    # -- the three dialects -------------------------------------------------------------------

    def librdkafka(self) -> dict[str, Any]:
        """confluent-kafka's configuration entries (merge the client's own on top)."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.protocol.lower(),
        }
        if self.sasl:
            config |= {
                "sasl.mechanisms": self.mechanism,
                "sasl.username": self.username,
                "sasl.password": self.password,
            }
        if self.tls:
            config |= {
                key: value
                for key, value in (
                    ("ssl.ca.location", self.ca_file),
                    ("ssl.certificate.location", self.cert_file),
                    ("ssl.key.location", self.key_file),
                )
                if value
            }
        return config

    def aiokafka(self) -> dict[str, Any]:
        """Keyword arguments of aiokafka's producer, consumer and admin client."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap,
            "security_protocol": self.protocol,
        }
        if self.sasl:
            kwargs |= {
                "sasl_mechanism": self.mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password,
            }
        if self.tls:
            kwargs["ssl_context"] = self.ssl_context()
        return kwargs

    def faust_broker(self) -> str:
        """Faust's broker URL (one `kafka://` per bootstrap server)."""
        return ";".join(f"kafka://{host.strip()}" for host in self.bootstrap.split(","))

    def faust_credentials(self) -> faust.types.auth.CredentialsT | None:
        """Faust's `broker_credentials`; None for PLAINTEXT."""
        import faust

        if self.sasl:
            return faust.SASLCredentials(
                username=self.username,
                password=self.password,
                mechanism=self.mechanism,
                ssl_context=self.ssl_context() if self.tls else None,
            )
        if self.tls:
            return faust.SSLCredentials(self.ssl_context())
        return None

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context of the Python clients: the CA file (or the system's trust store),
        the client certificate for mutual TLS, host names checked."""
        context: ssl.SSLContext = create_ssl_context(
            cafile=self.ca_file or None,
            certfile=self.cert_file or None,
            keyfile=self.key_file or None,
        )
        return context
