"""Namespaces: a tenant's hierarchy of named places for its memories (Redis Agent Memory's
namespace resources): one created (`NamespaceCreated`), renamed or archived
(`NamespaceUpdated`), or removed (`NamespaceRemoved`).

Each applies as tenant documents, conditionally (events.DocumentChange.expect): a namespace
claims its name among its siblings, and an update or removal names the revision it replaces,
so of two requests racing for one name or one revision exactly one wins, in the projection
and in every replay, and the other is answered 409. A child counts in its parent's document,
so a namespace is removed only while it has none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    Applies,
    DocumentChange,
    EventType,
    check_time,
    derive_id,
    writes_nothing,
)
from memstream.memory.events.recorded import check_memory_id
from memstream.memory.tenancy import validate_tenant

NAMESPACES = "namespaces"
NAMESPACE_NAMES = "namespace_names"
SCOPES = ("SHARED", "PERSONAL")
ACTIVE, ARCHIVED = "ACTIVE", "ARCHIVED"
_MAX_NAME = 128


def check_name(name: str) -> str:
    """`name` if it can be one namespace segment; InvalidInputError saying why not."""
    if not 1 <= len(name) <= _MAX_NAME or "/" in name or not name.isprintable():
        raise InvalidInputError(
            f"namespace name {name[:80]!r} is not usable: 1-{_MAX_NAME} printable characters, "
            "no '/' (a path joins names with it)"
        )
    return name


def name_slot(name: str, *, parent_id: str | None, scope: str, owner_id: str | None) -> str:
    """Where a namespace's name is claimed: among its parent's children, or among the roots
    of its scope (and owner, for a personal root)."""
    among = f"child:{parent_id}" if parent_id else f"root:{scope}:{owner_id or ''}"
    return json.dumps([among, name], ensure_ascii=False)


def slot_of(document: Mapping[str, Any], name: str | None = None) -> str:
    """Where the namespace `document` claims its name (or `name`, a rename's)."""
    return name_slot(
        name if name is not None else document["name"],
        parent_id=document.get("parentId"),
        scope=document["scope"],
        owner_id=document.get("ownerId"),
    )


def _with_children(parent: str, delta: int) -> str:
    held = json.loads(parent)
    return json.dumps({**held, "children": held.get("children", 0) + delta})


@dataclass(frozen=True, slots=True)
class NamespaceCreated:
    """A namespace was created: a root of `scope` (a personal one of `owner_id`), or a child
    of `parent_id`, whose document as it was is `parent` (it counts the child)."""

    type: ClassVar[str] = "NamespaceCreated"
    version: ClassVar[int] = 1

    tenant: str
    namespace_id: str
    name: str
    scope: str
    root_id: str
    created_at: datetime
    parent_id: str | None = None
    owner_id: str | None = None
    parent: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.namespace_id)
        check_name(self.name)
        check_time(self.created_at)
        if self.scope not in SCOPES:
            raise InvalidInputError(f"a namespace's scope is one of {', '.join(SCOPES)}")
        if (self.parent_id is None) != (self.parent is None):
            raise InvalidInputError("a child namespace carries its parent's document")

    @property
    def id(self) -> str:
        return derive_id("namespace.create", self.tenant, self.namespace_id)

    def document(self) -> dict[str, Any]:
        at = self.created_at.isoformat()
        return {
            "namespaceId": self.namespace_id,
            "name": self.name,
            "rootId": self.root_id,
            "scope": self.scope,
            "state": ACTIVE,
            "revision": 1,
            "createdAt": at,
            "updatedAt": at,
            "parentId": self.parent_id,
            "ownerId": self.owner_id,
            "children": 0,
        }


def _created(event: NamespaceCreated) -> tuple[DocumentChange, ...]:
    document = event.document()
    changes = [
        DocumentChange(NAMESPACE_NAMES, slot_of(document), event.namespace_id, expect=""),
        DocumentChange(NAMESPACES, event.namespace_id, json.dumps(document), expect=""),
    ]
    if event.parent_id is not None and event.parent is not None:
        grown = _with_children(event.parent, +1)
        changes.append(DocumentChange(NAMESPACES, event.parent_id, grown, expect=event.parent))
    return tuple(changes)


NAMESPACE_CREATED = EventType(
    NamespaceCreated,
    effect="namespace.create",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    sealed=("name", "owner_id", "parent"),
    documents=_created,
)


@dataclass(frozen=True, slots=True)
class NamespaceUpdated:
    """A namespace was renamed and/or archived, from the document `previous` (its revision
    goes up by one)."""

    type: ClassVar[str] = "NamespaceUpdated"
    version: ClassVar[int] = 1

    tenant: str
    namespace_id: str
    previous: str
    name: str
    state: str
    updated_at: datetime

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.namespace_id)
        check_name(self.name)
        check_time(self.updated_at)
        if self.state not in (ACTIVE, ARCHIVED):
            raise InvalidInputError(f"a namespace is {ACTIVE} or {ARCHIVED}")

    @property
    def id(self) -> str:
        revision = json.loads(self.previous)["revision"]
        return derive_id("namespace.update", self.tenant, self.namespace_id, revision)

    def document(self) -> dict[str, Any]:
        held = json.loads(self.previous)
        return {
            **held,
            "name": self.name,
            "state": self.state,
            "revision": held["revision"] + 1,
            "updatedAt": self.updated_at.isoformat(),
        }


def _updated(event: NamespaceUpdated) -> tuple[DocumentChange, ...]:
    held = json.loads(event.previous)
    changes = [
        DocumentChange(
            NAMESPACES, event.namespace_id, json.dumps(event.document()), expect=event.previous
        )
    ]
    if event.name != held["name"]:
        changes += [
            DocumentChange(NAMESPACE_NAMES, slot_of(held), expect=event.namespace_id),
            DocumentChange(
                NAMESPACE_NAMES, slot_of(held, event.name), event.namespace_id, expect=""
            ),
        ]
    return tuple(changes)


NAMESPACE_UPDATED = EventType(
    NamespaceUpdated,
    effect="namespace.update",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    sealed=("previous", "name"),
    documents=_updated,
)


@dataclass(frozen=True, slots=True)
class NamespaceRemoved:
    """An empty leaf namespace was removed, from the document `previous`; a child's parent,
    whose document was `parent`, counts one child less."""

    type: ClassVar[str] = "NamespaceRemoved"
    version: ClassVar[int] = 1

    tenant: str
    namespace_id: str
    previous: str
    removed_at: datetime
    parent: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_memory_id(self.namespace_id)
        check_time(self.removed_at)

    @property
    def id(self) -> str:
        return derive_id("namespace.remove", self.tenant, self.namespace_id)


def _removed(event: NamespaceRemoved) -> tuple[DocumentChange, ...]:
    held = json.loads(event.previous)
    changes = [
        DocumentChange(NAMESPACES, event.namespace_id, expect=event.previous),
        DocumentChange(NAMESPACE_NAMES, slot_of(held), expect=event.namespace_id),
    ]
    parent_id = held.get("parentId")
    if parent_id and event.parent is not None:
        shrunk = _with_children(event.parent, -1)
        changes.append(DocumentChange(NAMESPACES, parent_id, shrunk, expect=event.parent))
    return tuple(changes)


NAMESPACE_REMOVED = EventType(
    NamespaceRemoved,
    effect="namespace.remove",
    applies=Applies.DOCUMENT,
    memories=writes_nothing,
    sealed=("previous", "parent"),
    documents=_removed,
)


# This family's types: the registry's rows and the `MemoryEvent` union take them from here.
NamespaceEvent = NamespaceCreated | NamespaceUpdated | NamespaceRemoved
ROWS = (NAMESPACE_CREATED, NAMESPACE_UPDATED, NAMESPACE_REMOVED)
