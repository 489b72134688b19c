"""Which tenant a LangGraph store namespace belongs to.

A namespace is a tuple of labels; its tenant is the labels at the configured positions, joined
with "." (LangGraph forbids "." in labels, so two namespaces with different tenant labels never
join to the same id). The default takes the first two labels, which keeps users apart under
both common conventions: LangMem's ("memories", "{langgraph_user_id}") and LangGraph's
(user_id, "memories"). With the positions set to (1,), LangMem's namespaces belong to the user's
own tenant, the same one a LangChain middleware keyed by the user id records into.

A namespace that does not reach every tenant label is refused, and so is a wildcard in a tenant
label: "*" matches any label when namespaces are listed, so as a tenant it would stand for all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstream.errors import NamespaceTenantError
from memstream.memory.tenancy import TenantId, validate_tenant

__all__ = ["NamespaceTenants"]

WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class NamespaceTenants:
    labels: tuple[int, ...] = (0, 1)

    def __post_init__(self) -> None:
        if not self.labels or min(self.labels) < 0 or len(set(self.labels)) != len(self.labels):
            raise NamespaceTenantError(
                f"tenant label positions {self.labels!r} are not usable; give one or more "
                "distinct positions, 0 or more (MEMSTREAM_LANGGRAPH_TENANT_LABELS)"
            )

    @property
    def depth(self) -> int:
        """How many labels a namespace needs before it names a tenant."""
        return max(self.labels) + 1

    def tenant_of(self, namespace: Sequence[str]) -> TenantId:
        """The tenant of an item's namespace; NamespaceTenantError saying why there is none."""
        if len(namespace) < self.depth:
            raise NamespaceTenantError(
                f"namespace {tuple(namespace)!r} has {len(namespace)} label(s), but its tenant is "
                f"read from label(s) {list(self.labels)} (0-based), so it needs at least "
                f"{self.depth}. Put the tenant (say, the user id) in the namespace, or set "
                "MEMSTREAM_LANGGRAPH_TENANT_LABELS to where it is."
            )
        parts = [namespace[i] for i in self.labels]
        if WILDCARD in parts:
            raise NamespaceTenantError(
                f"namespace {tuple(namespace)!r} has '*' where its tenant is read; '*' matches "
                "every label when namespaces are listed, so it cannot name a tenant"
            )
        return validate_tenant(".".join(parts))

    def pinned(self, prefix: Sequence[str]) -> TenantId | None:
        """The one tenant every namespace starting with `prefix` belongs to, if there is one."""
        if len(prefix) < self.depth or any(prefix[i] == WILDCARD for i in self.labels):
            return None
        return self.tenant_of(prefix)

    def search_tenant(self, prefix: Sequence[str]) -> TenantId:
        """The tenant a search under `prefix` reads; a search never spans tenants."""
        tenant = self.pinned(prefix)
        if tenant is None:
            raise NamespaceTenantError(
                f"a search under {tuple(prefix)!r} would span tenants: its tenant is read from "
                f"label(s) {list(self.labels)} (0-based), so the prefix needs at least "
                f"{self.depth} labels, without '*' there. Search within one tenant's namespace."
            )
        return tenant
