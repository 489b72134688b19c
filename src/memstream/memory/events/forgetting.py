"""Memories forgotten: by id, filter or all (`MemoryForgotten`), and a whole tenant
crypto-shredded (`TenantErased`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from memstream.errors import InvalidInputError
from memstream.memory.events.base import (
    Applies,
    EventType,
    Selection,
    check_time,
    derive_id,
    writes_nothing,
)
from memstream.memory.tenancy import validate_tenant


@dataclass(frozen=True, slots=True)
class MemoryForgotten:
    """A tenant asked to forget memories: by id, by filter, or all of them.

    Selection, one of: `memory_ids`; a filter (`thread`, recorded `before`, or both: the
    memories matching both); or `everything`. Which stored memories match is decided when the
    event is applied, at its place in the log, so a replay forgets exactly the same ones.
    Forgotten ids are tombstoned: no later event can write them again. `request_id` is decided
    once by the requester (the effect key is tenant + request), so a retried request forgets
    once."""

    type: ClassVar[str] = "MemoryForgotten"
    version: ClassVar[int] = 1

    tenant: str
    request_id: str
    requested_at: datetime
    memory_ids: tuple[str, ...] = ()
    thread: str | None = None
    before: datetime | None = None
    everything: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_time(self.requested_at)
        if self.before is not None:
            check_time(self.before)
        object.__setattr__(self, "memory_ids", tuple(sorted(set(self.memory_ids))))
        filtered = self.thread is not None or self.before is not None
        if [bool(self.memory_ids), filtered, self.everything].count(True) != 1:
            raise InvalidInputError(
                "say what to forget, one of: memory ids; a thread and/or a time (before); "
                "or everything of the tenant"
            )
        if not self.request_id:
            raise InvalidInputError("a forget request needs a request id, decided once")

    @property
    def id(self) -> str:
        return derive_id("memory.forget", self.tenant, self.request_id)


MEMORY_FORGOTTEN = EventType(
    MemoryForgotten,
    effect="memory.forget",
    applies=Applies.FORGET,
    memories=writes_nothing,
    selects=lambda e: Selection(e.memory_ids, e.thread, e.before, e.everything),
)


@dataclass(frozen=True, slots=True)
class TenantErased:
    """A tenant was erased (`memstream forget --tenant T --erase`): its data keys `key_ids`
    were destroyed, so every event of it sealed under them is unreadable for good, and the
    projection deletes the tenant: its memories and tombstones (applied markers, which hold
    ids only, stay, so nothing earlier is applied twice). Applied at its place in the log, so
    a replay erases exactly the same. The tenant may record again
    afterwards (under a new key). `request_id` is decided once by the requester."""

    type: ClassVar[str] = "TenantErased"
    version: ClassVar[int] = 1

    tenant: str
    request_id: str
    requested_at: datetime
    key_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "tenant", validate_tenant(self.tenant))  # carried as checked
        check_time(self.requested_at)
        object.__setattr__(self, "key_ids", tuple(sorted(set(self.key_ids))))
        if not self.request_id:
            raise InvalidInputError("an erasure needs a request id, decided once")

    @property
    def id(self) -> str:
        return derive_id("tenant.erase", self.tenant, self.request_id)


TENANT_ERASED = EventType(
    TenantErased, effect="tenant.erase", applies=Applies.ERASE, memories=writes_nothing
)


# This family's types: the registry's rows and the `MemoryEvent` union take them from here, so
# a new type of the family is its class, its row and its place in these two.
Forgetting = MemoryForgotten | TenantErased
ROWS = (MEMORY_FORGOTTEN, TENANT_ERASED)
