"""Kafka admin requests that reach a broker which answers, and `KafkaAdmin`, the one way
memstream opens an admin client.

aiokafka's admin client sends a request that may go anywhere (metadata, find-coordinator) to a
broker picked at random from its metadata, and a controller request to the node the metadata
names. For the seconds after a broker dies and before the cluster fences it (KRaft's
`broker.session.timeout.ms`, 9 s by default), the metadata still lists it: one request in
three then failed at once with NodeNotReadyError on a cluster of three, failing whatever
command had sent it. Here such a request goes to each broker in turn, those that last failed
last, and every call is retried while the cluster settles (a coordinator or a controller on
the dead broker), up to a deadline, after which the error names the brokers tried.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, KafkaTimeoutError

from memstream.errors import KafkaUnavailableError
from memstream.streams.kafka import RIDE_OUT_S, KafkaConnection

__all__ = ["KafkaAdmin", "until_settled"]

T = TypeVar("T")

# One request to one broker: a broker that accepts the connection and then says nothing
# (hung, or cut off) is given up for the next one after this.
_REQUEST_TIMEOUT_MS = 5000
_BACKOFF_S = 0.25


class _ReachingClient(AIOKafkaAdminClient):  # type: ignore[misc]
    """aiokafka's admin client, sending a request meant for any broker (or for the
    controller) to each broker of the metadata in turn until one answers."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.unreachable: dict[int, str] = {}  # node id -> why it was not reached, last time

    async def _send_request(self, request: Any, node_id: int | None = None) -> Any:
        if node_id is not None:
            return await super()._send_request(request, node_id)
        return await self._to_first_answering(request, first=None)

    async def _send_to_controller(self, request: Any) -> Any:
        # Any KRaft broker forwards a controller request to the active controller (KIP-590),
        # so the node the metadata names goes first and the others after it.
        controller = self._client.cluster.controller
        return await self._to_first_answering(
            request, first=controller.nodeId if controller is not None else None
        )

    async def _to_first_answering(self, request: Any, *, first: int | None) -> Any:
        nodes = [broker.nodeId for broker in self._client.cluster.brokers()]
        random.shuffle(nodes)  # spread the load, as aiokafka does
        # Brokers that failed last come last; the named one (the controller) first.
        nodes.sort(key=lambda node: (node != first, node in self.unreachable))
        failure: KafkaError | None = None
        for node in nodes:
            try:
                response = await self._client.send(node, request)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                self.unreachable[node] = repr(exc)
                failure = exc
                continue
            self.unreachable.pop(node, None)
            return response
        if failure is None:  # no broker in the metadata: the next try asks again
            raise KafkaUnavailableError("the cluster's metadata lists no broker")
        raise failure

    def where(self, node: int) -> str:
        broker = self._client.cluster.broker_metadata(node)
        return f"{broker.host}:{broker.port}" if broker is not None else f"node {node}"


class KafkaAdmin:
    """An admin client of `kafka` for one task, `doing` ("create memstream's topics"), whose
    calls ride out one broker's loss: `async with KafkaAdmin(kafka, doing) as admin`.

    `admin.call(what, lambda client: client.describe_topics([...]))` runs the request on
    aiokafka's admin client, sending it to a broker that answers, and tries the whole call
    again while the error is one Kafka calls retriable (a broker down, a coordinator moving),
    for up to `deadline_s`; then it raises KafkaUnavailableError saying what could not be
    done, which brokers were not reached, and why.
    """

    def __init__(
        self, kafka: KafkaConnection, doing: str, *, deadline_s: float = RIDE_OUT_S
    ) -> None:
        self._kafka = kafka
        self._doing = doing
        self._deadline_s = deadline_s
        self._client = _ReachingClient(**kafka.aiokafka(), request_timeout_ms=_REQUEST_TIMEOUT_MS)

    async def __aenter__(self) -> KafkaAdmin:
        # Not retried: aiokafka has tried every bootstrap server, and none answered.
        try:
            await self._client.start()
        except KafkaError as exc:
            await self._client.close()
            raise await self._unavailable(await self._kafka.explain(exc)) from exc
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._client.close()

    async def call(self, what: str, request: Callable[[AIOKafkaAdminClient], Awaitable[T]]) -> T:
        """`request(client)`, retried while the cluster settles; `what` names it for the error
        ("describe topic X")."""
        try:
            return await until_settled(
                lambda: request(self._client),
                deadline_s=self._deadline_s,
                # The next try asks a broker that answers what the cluster looks like now.
                between=self._client._client.force_metadata_update,
            )
        except (KafkaError, KafkaUnavailableError) as exc:
            unreachable = ", ".join(
                f"{self._client.where(node)} ({why})"
                for node, why in sorted(self._client.unreachable.items())
            )
            raise await self._unavailable(
                f"{what} failed for {self._deadline_s:.0f}s: {await self._kafka.explain(exc)}"
                + (f"; brokers not reached: {unreachable}" if unreachable else "")
            ) from exc

    async def _unavailable(self, why: str) -> KafkaUnavailableError:
        return KafkaUnavailableError(
            f"could not {self._doing} on Kafka at {self._kafka.where}: {why}. Check that the "
            "brokers run (`memstream status`), MEMSTREAM_KAFKA_BOOTSTRAP points at them and "
            "the MEMSTREAM_KAFKA_* security settings are the brokers'."
        )


async def until_settled(
    attempt: Callable[[], Awaitable[T]],
    *,
    deadline_s: float = RIDE_OUT_S,
    between: Callable[[], Awaitable[object]] | None = None,
) -> T:
    """`attempt()`, tried again while it fails with an error Kafka calls retriable (a broker
    down, a leader or coordinator moving) and `deadline_s` has not passed; `between()` runs
    before each new try. The last error is raised as it is."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return await attempt()
        except (KafkaError, KafkaUnavailableError) as exc:
            # A request timed out while the cluster moves a leader is worth another one.
            retriable = isinstance(exc, KafkaUnavailableError | KafkaTimeoutError) or exc.retriable
            if not retriable or time.monotonic() + _BACKOFF_S >= deadline:
                raise
        await asyncio.sleep(_BACKOFF_S)
        if between is not None:
            with contextlib.suppress(KafkaError):  # the next try says what is wrong
                await between()
