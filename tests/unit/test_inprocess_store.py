from memstream.memory.bounds import Bounds
from memstream.memory.inprocess import InProcessMemoryStore
from memstream.memory.store import MemoryStore
from memstream.providers.minilm import MiniLMEmbedder

from ..contract.store_contract import StoreContract

_EMBEDDER = MiniLMEmbedder()


class TestInProcessStore(StoreContract):
    __test__ = True

    def create_store(self, tenant: str) -> MemoryStore:
        return InProcessMemoryStore(tenant, _EMBEDDER, bounds=Bounds(self.bound))
