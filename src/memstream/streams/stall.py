"""A worker whose stream stopped delivering: alive, its projection idle, and Kafka holding
records for it that never arrive.

faust-streaming's consumer can stop handing over messages after a broker comes back: the
worker rejoined its group, said nothing was wrong, and projected nothing for as long as it
ran (tests/integration/test_crash.py met it about once in seven full runs; faust-streaming
issues 175 and 523 report the same in production). The lag it reported of itself did not
even grow, since that is measured from the consumer's own fetches. `StallWatch` tells when
it has happened, and the worker then exits as it does when its stream ends: a supervisor
starts a fresh one, which reads on from the last commit (apply-once makes the redelivery
harmless).

A stall is: no batch handed over, none in flight, for `after_s`; then Kafka, read by a
consumer of the worker's own (`first_waiting`), holds records past what the projection has,
and still does one look later (`after_s / 4`), the stream having delivered none of them in
between. A Kafka that does not answer is not a stall (the stream could not read either), nor
is a projection busy for long (a Redis outage, a data key waited for): those are someone
else's to report.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from memstream.streams.heal import LogSource

__all__ = ["PROBE_OFFSETS", "Stall", "StallWatch", "StreamStalled", "first_waiting"]

# How far past the projection's position a look reads: a few offsets may hold no message
# (an old log's transaction markers), a hundred in a row cannot.
PROBE_OFFSETS = 100


@dataclass(frozen=True, slots=True)
class Stall:
    """Records the stream never delivered: partition -> the first such offset."""

    waiting: Mapping[str, int]
    quiet_s: float

    def __str__(self) -> str:
        where = ", ".join(f"{field} from offset {offset}" for field, offset in self.waiting.items())
        return (
            f"the memory topic's stream delivered nothing for {self.quiet_s:.0f}s while Kafka "
            f"holds records for it ({where}): its consumer has stalled; the worker exits, and "
            "the next one reads on from the last acknowledged message"
        )


class StreamStalled(RuntimeError):
    """The memory topic's stream stopped delivering while Kafka holds records for it."""


class StallWatch:
    """Keeps track of the projection's work and says when the stream has stalled.

    The agent calls `began` and `ended` around each piece of work (a batch, from hand-over to
    applied; preparing the index), and a timer asks `due` every `after_s / 4`: when due, it
    looks in Kafka for records past what the projection holds and tells `found`."""

    def __init__(self, after_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.after_s = after_s
        self._clock = clock
        self._working = 0
        self._quiet_since = clock()
        self._seen: tuple[dict[str, int], float] | None = None  # what a look found, and when

    def began(self) -> None:
        self._working += 1
        self._moved()

    def ended(self) -> None:
        self._working -= 1
        self._moved()

    @property
    def due(self) -> bool:
        """Whether to look in Kafka: nothing in flight, and nothing moved, for `after_s`."""
        return self._working == 0 and self._clock() - self._quiet_since >= self.after_s

    def found(self, waiting: Mapping[str, int]) -> Stall | None:
        """What a look found past the projection (partition -> first offset there): a Stall
        when the same records waited at a look at least `after_s / 4` before, the stream
        quiet since."""
        now = self._clock()
        if not waiting:  # nothing waits: the stream is just quiet; look again in `after_s`
            self._seen, self._quiet_since = None, now
            return None
        if self._seen is None:
            self._seen = (dict(waiting), now)
            return None
        before, at = self._seen
        still = {f: o for f, o in waiting.items() if f in before and o <= before[f]}
        if not still:
            self._seen = (dict(waiting), now)
            return None
        if now - at < self.after_s / 4:
            return None
        return Stall(still, now - self._quiet_since)

    def _moved(self) -> None:
        self._quiet_since = self._clock()
        self._seen = None


async def first_waiting(source: LogSource, projected: Mapping[str, int]) -> dict[str, int]:
    """Per partition (`topic/partition` -> the last offset the projection has), the first
    offset Kafka holds past it, where it holds one; KafkaUnavailableError from `source`."""
    waiting: dict[str, int] = {}
    for field, last in projected.items():
        topic, _, partition = field.rpartition("/")
        async for chunk in source.read(topic, int(partition), last + 1, last + PROBE_OFFSETS):
            waiting.setdefault(field, chunk[0].offset)
    return waiting
