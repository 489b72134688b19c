"""A key-value store's items in the projection, beyond reading them: field-by-field similarity
to a query, and refreshing their TTLs (the `ItemIndex` port the LangGraph store uses).

An item indexed on several fields is one memory whose hash also holds one vector per field
(`Fields.FACET_VECTORS`, written with the memory by apply_once.lua, not in the search index):
LangGraph scores each field apart and ranks an item by its best, which one vector of the
joined text cannot do (an exact match on one of two fields scored ~0.82). The candidates are
the items the store already filtered by namespace and value, so their vectors are read by
key in one round trip, pinned to the live generation, and scored here; a query is embedded for
the live generation's model (projections.live_model), as recall's is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import cast

import numpy as np
import redis

from memstream.memory.embeddings import Embedders, Vectors, cosines
from memstream.projections.connection import redis_errors
from memstream.projections.live_model import LiveModel
from memstream.projections.schema import Fields, Keyspace, vector_of
from memstream.projections.status import ProjectionStatus

__all__ = ["RedisItemIndex"]

# KEYS: one memory hash per lease. ARGV: for each, the event id that wrote it and the new
# deadline (epoch s). A hash that a later put replaced, or that is gone (a delete or an
# expiry: HSET would bring a husk of it back), is left alone; a deadline only moves later.
_REFRESH = """
for i = 1, #KEYS do
  local held = redis.call('HMGET', KEYS[i], 'event_id', 'expires_at')
  local event, deadline = ARGV[2 * i - 1], tonumber(ARGV[2 * i])
  if held[1] == event and held[2] and tonumber(held[2]) < deadline then
    redis.call('HSET', KEYS[i], 'expires_at', ARGV[2 * i])
  end
end
return 0
"""

_SCORED = [Fields.CONTENT, Fields.EMBEDDING, Fields.FACET_VECTORS]


class RedisItemIndex:
    def __init__(
        self, client: redis.Redis, keyspace: Keyspace, embedders: Embedders, *, url: str = ""
    ) -> None:
        self._client = client
        self._keys = keyspace
        self._live = LiveModel(client, keyspace, embedders, url=url)
        self._status = ProjectionStatus(client, keyspace, url=url)
        self._refresh = client.register_script(_REFRESH)
        self._url = url

    def similarities(self, tenant: str, memory_ids: Sequence[str], text: str) -> dict[str, float]:
        if not memory_ids:
            return {}
        generation = self._status.live_generation()

        def reads(_: Vectors) -> list[list[str]]:
            keys = self._keys.at(generation)
            return [["HMGET", keys.memory(tenant, m), *_SCORED] for m in memory_ids]

        # Pinned with a read of the live generation: a swap in between reads again.
        query, replies = self._live.search(text, reads, doing="scoring store items")
        scores: dict[str, float] = {}
        for memory_id, row in zip(memory_ids, replies or [], strict=False):
            content, vector, facets = cast(list[bytes | None], row)
            if vector is None or not content:
                continue  # not stored, or stored without text: nothing to compare
            # Facet vectors are float32 whatever the generation's type (not indexed, and few).
            if facets:
                matrix = np.frombuffer(facets, dtype=np.float32).reshape(-1, len(query))
            else:
                matrix = vector_of(vector, len(query))[np.newaxis, :]
            scores[memory_id] = float(np.max(cosines(matrix, query)))
        return scores

    def refresh(self, tenant: str, leases: Sequence[tuple[str, str, datetime]]) -> None:
        if not leases:
            return
        keys = self._status.live()
        args: list[str] = []
        for _, event_id, deadline in leases:
            args += [event_id, repr(deadline.timestamp())]
        with redis_errors(self._url, "refreshing store items' TTLs"):
            self._refresh(keys=[keys.memory(tenant, m) for m, _, _ in leases], args=args)
