"""Redis Agent Memory's namespace resources on memstream: a store's (a tenant's) hierarchy of
named places for its memories and sessions, kept as events (memory.events.namespaces).

Every change is one event whose documents are conditional: a new namespace claims its name
among its siblings and counts in its parent, an update or removal names the revision it
replaces. The request waits until the event is applied and reads the outcome back: the
namespace as this request made it, or a 409 where a racing request won (a change that lost
only to a change of its parent is tried again, up to three times). A namespace's `path` is
derived from the live hierarchy when it is read, so renaming a parent renames every path
below it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memstream.errors import InvalidInputError, NamespaceConflictError, NamespaceNotFoundError
from memstream.memory.events import (
    ARCHIVED,
    NAMESPACES,
    MemoryEvent,
    NamespaceCreated,
    NamespaceRemoved,
    NamespaceUpdated,
    check_name,
    name_slot,
    slot_of,
)
from memstream.memory.model import RESERVED_PREFIX
from memstream.memory.tenancy import TenantId
from memstream.server.service import MemoryService
from memstream.server.store_models import (
    CreateNamespaceRequest,
    Namespace,
    NamespaceList,
    NamespaceScope,
    PlacedIn,
    UpdateNamespaceRequest,
    page_offset,
    page_token_at,
)

__all__ = ["PLACED", "Hierarchy", "Namespaces"]

PLACED = f"{RESERVED_PREFIX}namespace_ref"  # a memory's metadata: the namespace it is in
_TRIES = 3
_MAX_PAGE = 1000


@dataclass(frozen=True, slots=True)
class Hierarchy:
    """A tenant's namespaces as stored (id -> the document's text, which a change names as
    the one it replaces) and the name each claims among its siblings (slot -> id)."""

    raw: Mapping[str, str]
    names: Mapping[str, str]

    @classmethod
    def of(cls, raw: Mapping[str, str]) -> Hierarchy:
        # The claimed names follow from the documents: the events claim and free them together.
        return cls(raw, {slot_of(json.loads(body)): nid for nid, body in raw.items()})

    def get(self, namespace_id: str) -> dict[str, Any] | None:
        raw = self.raw.get(namespace_id)
        return None if raw is None else dict(json.loads(raw))

    def path(self, namespace_id: str) -> str:
        names: list[str] = []
        seen: set[str] = set()
        current: str | None = namespace_id
        while current is not None and current not in seen:
            seen.add(current)
            held = self.get(current)
            if held is None:
                break
            names.append(held["name"])
            current = held.get("parentId")
        return "/".join(reversed(names))

    def answer(self, document: Mapping[str, Any]) -> Namespace:
        shown = {k: v for k, v in document.items() if k != "children" and v is not None}
        return Namespace.model_validate({**shown, "path": self.path(document["namespaceId"])})

    def placed(self, namespace_id: str | None) -> PlacedIn | None:
        """Where something placed in `namespace_id` is (None: nowhere, or it is gone)."""
        held = None if namespace_id is None else self.get(namespace_id)
        if namespace_id is None or held is None:
            return None
        return PlacedIn(namespace_id=namespace_id, name=held["name"], path=self.path(namespace_id))

    def placement(self, namespace_id: str) -> PlacedIn:
        """Where a write may place something: an active namespace of the store (404, 409)."""
        held = self.get(namespace_id)
        if held is None:
            raise NamespaceNotFoundError(f"no namespace {namespace_id[:80]!r} in this store")
        path = self.path(namespace_id)
        if held["state"] == ARCHIVED:
            raise NamespaceConflictError(
                f"namespace {path!r} is archived: it takes no new children or placements"
            )
        return PlacedIn(namespace_id=namespace_id, name=held["name"], path=path)


class Namespaces:
    def __init__(self, memories: MemoryService) -> None:
        self._memories = memories

    async def hierarchy(self, tenant: TenantId) -> Hierarchy:
        return Hierarchy.of(await self._memories.documents(tenant, NAMESPACES))

    async def _held(self, tenant: TenantId, namespace_id: str) -> tuple[Hierarchy, dict[str, Any]]:
        hierarchy = await self.hierarchy(tenant)
        held = hierarchy.get(namespace_id)
        if held is None:
            raise NamespaceNotFoundError(f"no namespace {namespace_id[:80]!r} in this store")
        return hierarchy, held

    async def _applied(self, event: MemoryEvent) -> Hierarchy:
        await self._memories.write([event], self._memories.limits.max_wait_s)
        return await self.hierarchy(TenantId(event.tenant))

    # -- reading ------------------------------------------------------------------------------

    async def get(self, tenant: TenantId, namespace_id: str) -> Namespace:
        hierarchy, held = await self._held(tenant, namespace_id)
        return hierarchy.answer(held)

    async def listed(
        self,
        tenant: TenantId,
        *,
        parent_id: str | None,
        scope: NamespaceScope | None,
        owner_id: str | None,
        limit: int,
        page_token: str | None,
    ) -> NamespaceList:
        if parent_id is not None and (scope is not None or owner_id is not None):
            raise InvalidInputError("parentId lists children: scope and ownerId list roots")
        if not 1 <= limit <= _MAX_PAGE:
            raise InvalidInputError(f"limit must be between 1 and {_MAX_PAGE}")
        hierarchy = await self.hierarchy(tenant)
        if parent_id is not None:
            await self._held(tenant, parent_id)
        chosen = []
        for raw in hierarchy.raw.values():
            held = json.loads(raw)
            if held.get("parentId") != parent_id:
                continue
            if parent_id is None and scope is not None and held["scope"] != scope.value:
                continue
            personal = held["scope"] == NamespaceScope.PERSONAL.value
            if (
                parent_id is None
                and owner_id is not None
                and personal
                and held.get("ownerId") != owner_id
            ):
                continue
            chosen.append(held)
        chosen.sort(key=lambda n: (n["name"], n["namespaceId"]))
        start = page_offset(page_token)
        page = chosen[start : start + limit]
        more = page_token_at(start + limit) if start + limit < len(chosen) else None
        return NamespaceList(items=[hierarchy.answer(n) for n in page], next_page_token=more)

    async def placement(self, tenant: TenantId, namespace_id: str) -> PlacedIn:
        """Where a write may place something: an active namespace of the store (404, 409)."""
        return (await self.hierarchy(tenant)).placement(namespace_id)

    # -- changing -----------------------------------------------------------------------------

    async def create(self, tenant: TenantId, request: CreateNamespaceRequest) -> Namespace:
        scope = request.scope
        if request.path is not None:
            if request.name is not None or request.parent_id is not None:
                raise InvalidInputError("path excludes name and parentId: send one or the other")
            segments = request.path.strip("/").split("/")
            return await self._path(tenant, [check_name(s) for s in segments], request)
        if request.name is None:
            raise InvalidInputError("name a namespace (with scope or parentId), or send a path")
        name = check_name(request.name)
        if request.parent_id is not None:
            if scope is not None or request.owner_id is not None:
                raise InvalidInputError("a child takes its scope and owner from its root")
            shared = NamespaceScope.SHARED.value  # the parent's, once read
            return await self._create(tenant, name, shared, None, request.parent_id, last=True)
        return await self._create(tenant, name, *_root_scope(request), None, last=True)

    async def _path(
        self, tenant: TenantId, segments: list[str], request: CreateNamespaceRequest
    ) -> Namespace:
        scope, owner = _root_scope(request)
        parent: str | None = None
        for segment in segments[:-1]:
            made = await self._create(tenant, segment, scope, owner, parent, last=False)
            parent = made.namespace_id
        return await self._create(tenant, segments[-1], scope, owner, parent, last=True)

    async def _create(
        self,
        tenant: TenantId,
        name: str,
        scope: str,
        owner: str | None,
        parent_id: str | None,
        *,
        last: bool,
    ) -> Namespace:
        """Create `name` (as a root of `scope` and `owner`, or under `parent_id`, whose scope
        and owner it takes); where it exists, a path's segment before the `last` is used as it
        is, and the last one is a 409."""
        for _ in range(_TRIES):
            hierarchy = await self.hierarchy(tenant)
            parent = None
            if parent_id is not None:
                parent = hierarchy.get(parent_id)
                if parent is None:
                    raise NamespaceNotFoundError(f"no namespace {parent_id[:80]!r} in this store")
                if parent["state"] == ARCHIVED:
                    raise NamespaceConflictError(
                        f"namespace {hierarchy.path(parent_id)!r} is archived: it takes no new "
                        "children"
                    )
                scope, owner = parent["scope"], parent.get("ownerId")
            slot = name_slot(name, parent_id=parent_id, scope=scope, owner_id=owner)
            taken = hierarchy.names.get(slot)
            if taken is not None:
                existing = hierarchy.get(taken)
                if last or existing is None:
                    raise NamespaceConflictError(
                        f"a namespace named {name!r} is already there "
                        f"({hierarchy.path(taken) or name!r}); pick another name"
                    )
                if existing["state"] == ARCHIVED:
                    raise NamespaceConflictError(f"namespace {hierarchy.path(taken)!r} is archived")
                return hierarchy.answer(existing)
            namespace_id = uuid.uuid4().hex
            event = NamespaceCreated(
                tenant=tenant,
                namespace_id=namespace_id,
                name=name,
                scope=scope,
                root_id=parent["rootId"] if parent is not None else namespace_id,
                created_at=datetime.now(UTC),
                parent_id=parent_id,
                owner_id=owner,
                parent=hierarchy.raw[parent_id] if parent_id is not None else None,
            )
            after = await self._applied(event)
            held = after.get(namespace_id)
            if held is not None:
                return after.answer(held)
        raise NamespaceConflictError(
            f"namespace {name!r} could not be created: its parent kept changing; try again"
        )

    async def update(
        self, tenant: TenantId, namespace_id: str, request: UpdateNamespaceRequest
    ) -> Namespace:
        if request.name is None and request.state is None:
            raise InvalidInputError("send a new name, or state ARCHIVED, or both")
        if request.state is not None and request.state.value != ARCHIVED:
            raise InvalidInputError("a namespace can only be archived (state ARCHIVED)")
        hierarchy, held = await self._held(tenant, namespace_id)
        if held["state"] == ARCHIVED:
            raise NamespaceConflictError(
                f"namespace {hierarchy.path(namespace_id)!r} is archived: it is kept as it is"
            )
        name = check_name(request.name) if request.name is not None else held["name"]
        if name != held["name"]:
            slot = name_slot(
                name,
                parent_id=held.get("parentId"),
                scope=held["scope"],
                owner_id=held.get("ownerId"),
            )
            if slot in hierarchy.names:
                raise NamespaceConflictError(
                    f"a sibling of {hierarchy.path(namespace_id)!r} is named {name!r} already"
                )
        event = NamespaceUpdated(
            tenant=tenant,
            namespace_id=namespace_id,
            previous=hierarchy.raw[namespace_id],
            name=name,
            state=request.state.value if request.state is not None else held["state"],
            updated_at=datetime.now(UTC),
        )
        after = await self._applied(event)
        if after.raw.get(namespace_id) != json.dumps(event.document()):
            raise NamespaceConflictError(
                f"namespace {namespace_id!r} changed while this update was made; read it again"
            )
        return after.answer(event.document())

    async def remove(self, tenant: TenantId, namespace_id: str) -> None:
        """Remove an empty leaf: no children, no memory or session placed in it (409)."""
        for _ in range(_TRIES):
            hierarchy, held = await self._held(tenant, namespace_id)
            path = hierarchy.path(namespace_id)
            if held.get("children", 0):
                raise NamespaceConflictError(f"namespace {path!r} has children: remove them first")
            memories = await self._memories.placed(tenant, PLACED, namespace_id)
            if memories:
                raise NamespaceConflictError(
                    f"namespace {path!r} holds {memories} memories: move or delete them first"
                )
            parent_id = held.get("parentId")
            event = NamespaceRemoved(
                tenant=tenant,
                namespace_id=namespace_id,
                previous=hierarchy.raw[namespace_id],
                removed_at=datetime.now(UTC),
                parent=hierarchy.raw.get(parent_id) if parent_id else None,
            )
            after = await self._applied(event)
            if namespace_id not in after.raw:
                return
            if after.raw[namespace_id] != event.previous:
                raise NamespaceConflictError(
                    f"namespace {path!r} changed while it was being removed; read it again"
                )
        raise NamespaceConflictError(
            f"namespace {namespace_id!r} could not be removed: its parent kept changing"
        )


def _root_scope(request: CreateNamespaceRequest) -> tuple[str, str | None]:
    scope = request.scope or NamespaceScope.SHARED
    if scope is NamespaceScope.PERSONAL and request.owner_id is None:
        raise InvalidInputError("a personal root needs its ownerId")
    if scope is NamespaceScope.SHARED and request.owner_id is not None:
        raise InvalidInputError("a shared root has no owner: leave ownerId out")
    return scope.value, request.owner_id
