from collections.abc import Callable, Iterator

import pytest

from memstream.deployment import Deployment
from memstream.memory.store import MemoryStore

from ..contract.store_contract import StoreContract
from .conftest import MAX_MEMORIES
from .helpers import TestStack, wait_until

pytestmark = pytest.mark.integration


class TestEventSourcedStore(StoreContract):
    __test__ = True

    @pytest.fixture(autouse=True)
    def _stores(self, stack: TestStack) -> Iterator[None]:
        self.stack = stack
        with Deployment(stack.settings) as deployment:
            self.stores = deployment.stores()
            yield

    def create_store(self, tenant: str) -> MemoryStore:
        return self.stores(tenant)

    bound = MAX_MEMORIES  # the session worker's
    logged = True

    def settle_until(self, store: MemoryStore, condition: Callable[[], bool], what: str) -> None:
        assert self.stores.publisher.flush(30)
        wait_until(condition, f"{what} projected")
