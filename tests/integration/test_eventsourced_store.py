from collections.abc import Iterator

import pytest

from memstream.eventsourced import EventSourcedStores
from memstream.memory.store import MemoryStore

from ..contract.store_contract import StoreContract
from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


class TestEventSourcedStore(StoreContract):
    __test__ = True

    @pytest.fixture(autouse=True)
    def _stores(self, stack: TestStack) -> Iterator[None]:
        self.stack = stack
        self.stores = EventSourcedStores(stack.settings)
        yield
        self.stores.close()

    def create_store(self, tenant: str) -> MemoryStore:
        return self.stores(tenant)

    def settle(self, store: MemoryStore, expected: int) -> None:
        assert self.stores.publisher.flush(30)
        wait_until(lambda: len(store.memories()) == expected, f"{expected} memories projected")
