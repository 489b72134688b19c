import pytest

from memstream.errors import InvalidTenantError
from memstream.eventsourced import EventSourcedMemoryStore
from memstream.memory.bounds import Bounds
from memstream.memory.inprocess import InProcessMemoryStore, InProcessStores
from memstream.memory.store import MemoryStore
from memstream.providers.minilm import MiniLMEmbedder

from ..contract.store_contract import StoreContract

_EMBEDDER = MiniLMEmbedder()


class TestInProcessStore(StoreContract):
    __test__ = True

    def create_store(self, tenant: str) -> MemoryStore:
        return InProcessMemoryStore(tenant, _EMBEDDER, bounds=Bounds(self.bound))


def test_in_process_stores_serve_the_projections_read_ports_per_tenant() -> None:
    stores = InProcessStores(_EMBEDDER)
    acme = stores("acme")
    assert stores("acme") is acme  # one store a tenant
    acme.write(StoreContract().turn(acme, 1, "Our VPN gateway is in Dublin.", "Noted."))
    # The read ports of memory.ports, as the event-sourced store uses the Redis projection's.
    store = EventSourcedMemoryStore(
        "acme",
        send=lambda event, on_durable: None,
        reader=stores,
        recaller=stores,
        embedding_model=_EMBEDDER.model_id,
    )
    assert {m.content for m in store.memories()} == {"Our VPN gateway is in Dublin.", "Noted."}
    assert store.search("where is the VPN gateway?", k=1)[0].memory.content.startswith("Our VPN")
    assert stores.memories("globex") == [] and stores.recall("globex", "VPN") == []
    with pytest.raises(InvalidTenantError):
        stores.memories("")
