"""Tenant scope: one cell per tenant holding that tenant's store, whose writes are serialised.

The resolver (`stores`) is asked once per tenant; what it returns — a store, or None for "no
memory for this tenant" — is kept in the tenant's cell and shared by every thread of the
tenant. A resolution that raised is not kept, so the next turn asks again. A store must be
scoped to the tenant it was resolved for, and no two tenants may share a store instance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from memstream.errors import ConfigurationError
from memstream.memory.store import MemoryStore
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["StoreResolver", "TenantCell", "TenantCells"]

T = TypeVar("T")
StoreResolver = Callable[[str], MemoryStore | None]


@dataclass(frozen=True, slots=True)
class TenantCell:
    tenant: TenantId
    store: MemoryStore | None
    lock: threading.RLock = field(default_factory=threading.RLock)


class TenantCells:
    def __init__(self, resolver: StoreResolver) -> None:
        self._resolver = resolver
        self._cells: dict[str, TenantCell] = {}
        self._lock = threading.Lock()

    def cell(self, tenant: str) -> TenantCell:
        """The tenant's cell, resolving its store on first use (errors are not kept). The
        hooks' entry: the tenant is validated here, and carried as a TenantId from here on."""
        known = self._cells.get(tenant)
        if known is not None:
            return known  # its key passed validation when the cell was made
        tenant = validate_tenant(tenant)
        with self._lock:
            cell = self._cells.get(tenant)
            if cell is None:
                cell = TenantCell(tenant, self._resolve(tenant))
                self._cells[tenant] = cell
            return cell

    def with_store(self, tenant: str, f: Callable[[MemoryStore | None], T]) -> T:
        """`f` on the tenant's store under the tenant's lock, so it never overlaps a turn's
        read or write of that store."""
        cell = self.cell(tenant)
        with cell.lock:
            return f(cell.store)

    def _resolve(self, tenant: TenantId) -> MemoryStore | None:
        store = self._resolver(tenant)
        if store is None:
            return None
        if store.tenant != tenant:
            raise ConfigurationError(
                f"the store resolved for tenant {tenant!r} is scoped to {store.tenant!r}; "
                "the resolver must return each tenant's own store"
            )
        for other in self._cells.values():
            if other.store is store:
                raise ConfigurationError(
                    f"the resolver returned the same store instance for tenants "
                    f"{other.tenant!r} and {tenant!r}; no two tenants may share a store"
                )
        return store
