"""The local stack's topology: which Kafka brokers and Redis instances `memstream up` started,
on which ports, recorded in `topology.json` in the state folder so that every process on the
machine (commands, workers, servers, adapters) reaches them with no further settings.

The port rule: the i-th instance (0-based) of a service listens on its setting's port plus
100·i. Broker i (node id i+1) on MEMSTREAM_KAFKA_PORT + 100·i with its controller listener on
MEMSTREAM_KAFKA_CONTROLLER_PORT + 100·i; Redis i on MEMSTREAM_REDIS_PORT + 100·i. With the
defaults: brokers 9092, 9192, 9292, controllers 9093, 9193, 9293, Redis 6379, 6479, 6579. A
stride of 100 keeps neighbouring settings (a broker on 9092 and its controller on 9093, Redis
on P79 and the server on P80) apart; `plan` refuses a layout whose ports meet anyway.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from memstream.errors import ConfigurationError
from memstream.processes import project_root

__all__ = ["MAX_NODES", "PORT_STRIDE", "TOPOLOGY_FILE", "Broker", "LocalTopology", "state_folder"]

TOPOLOGY_FILE = "topology.json"
PORT_STRIDE = 100
MAX_NODES = 9


def state_folder(state_dir: str) -> Path:
    """The local stack's state folder: MEMSTREAM_STATE_DIR, relative to the project root."""
    return (project_root() / state_dir).resolve()


@dataclass(frozen=True, slots=True)
class Broker:
    """One combined KRaft broker and controller of the local cluster."""

    node_id: int
    port: int
    controller_port: int


@dataclass(frozen=True, slots=True)
class LocalTopology:
    """The brokers (each also a controller: the quorum is all of them) and the Redis instances
    (the projection's shards, in shard order) of a local stack."""

    brokers: tuple[Broker, ...]
    redis_ports: tuple[int, ...]

    @classmethod
    def plan(
        cls,
        *,
        kafka_port: int,
        controller_port: int,
        redis_port: int,
        brokers: int = 1,
        shards: int = 1,
        reserved: tuple[int, ...] = (),
    ) -> LocalTopology:
        """The layout of `brokers` brokers and `shards` Redis instances by the port rule; a
        ConfigurationError when a count is out of range or two ports (or one of `reserved`,
        the other services' ports) meet."""
        for what, count in (("--brokers", brokers), ("--shards", shards)):
            if not 1 <= count <= MAX_NODES:
                raise ConfigurationError(f"{what} {count}: give a number from 1 to {MAX_NODES}")
        topology = cls(
            tuple(
                Broker(i + 1, kafka_port + PORT_STRIDE * i, controller_port + PORT_STRIDE * i)
                for i in range(brokers)
            ),
            tuple(redis_port + PORT_STRIDE * i for i in range(shards)),
        )
        ports = [*topology.ports(), *(port for port in reserved if port)]
        clashing = sorted({port for port in ports if ports.count(port) > 1})
        if clashing or max(ports) > 65535:
            raise ConfigurationError(
                f"the local stack's ports {', '.join(map(str, topology.ports()))} (the i-th "
                f"instance of a service on its port + {PORT_STRIDE}·i) "
                + (f"use {', '.join(map(str, clashing))} twice" if clashing else "pass 65535")
                + ": move MEMSTREAM_KAFKA_PORT, MEMSTREAM_KAFKA_CONTROLLER_PORT, "
                "MEMSTREAM_REDIS_PORT or MEMSTREAM_SERVER_PORT apart"
            )
        return topology

    @property
    def bootstrap(self) -> str:
        """Every broker, as a client's bootstrap list."""
        return ",".join(f"127.0.0.1:{broker.port}" for broker in self.brokers)

    @property
    def redis_urls(self) -> tuple[str, ...]:
        """The Redis instances' URLs, shard 0 first."""
        return tuple(f"redis://127.0.0.1:{port}/0" for port in self.redis_ports)

    @property
    def quorum_voters(self) -> str:
        """The KRaft quorum, as `controller.quorum.voters` names it."""
        return ",".join(f"{b.node_id}@127.0.0.1:{b.controller_port}" for b in self.brokers)

    def ports(self) -> list[int]:
        return [
            *(port for b in self.brokers for port in (b.port, b.controller_port)),
            *self.redis_ports,
        ]

    def write(self, state: Path) -> None:
        state.mkdir(parents=True, exist_ok=True)
        document = {
            "brokers": [
                {"node_id": b.node_id, "port": b.port, "controller_port": b.controller_port}
                for b in self.brokers
            ],
            "redis": [{"shard": i, "port": port} for i, port in enumerate(self.redis_ports)],
        }
        temporary = state / f"{TOPOLOGY_FILE}.tmp"
        temporary.write_text(json.dumps(document, indent=2) + "\n")
        temporary.replace(state / TOPOLOGY_FILE)  # readers never see half a file

    @classmethod
    def read(cls, state: Path) -> LocalTopology | None:
        """The topology `memstream up` recorded in `state`; None when it recorded none (no
        stack, or `memstream down` ran). A file that does not parse is a ConfigurationError
        naming it."""
        path = state / TOPOLOGY_FILE
        try:
            document = json.loads(path.read_text())
            return cls(
                tuple(
                    Broker(int(b["node_id"]), int(b["port"]), int(b["controller_port"]))
                    for b in document["brokers"]
                ),
                tuple(int(r["port"]) for r in document["redis"]),
            )
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(
                f"{path} does not describe a local stack ({type(exc).__name__}: {exc}); "
                "remove it (`memstream up` writes it again)"
            ) from None
