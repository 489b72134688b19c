"""Summary views: a tenant's memories partitioned by some of their fields, each partition
summarised (agent-memory-server's summary views, derived here from the log). Pure: no I/O.

A view (`ViewSpec`) names its group fields and filters by label (`user_id`, `session_id`, ...)
and says where a memory keeps each label (`Facet`: the tenant, the thread, the coarse kind of
its type, or a metadata key), so this module needs no API's vocabulary. A run partitions the
memories it covers (`partitions`), and each partition's summary is one model call
(`summary_request`), or, with no chat model, the memories listed (`unsummarised`), saying so.

A partition's inputs have a digest (`inputs_digest`: the memories' ids and texts, the
instructions, the model): a run whose partition's digest is the one stored reuses the stored
summary instead of asking the model again, unless it is forced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

from memstream.llm import Message, ModelRequest
from memstream.memory.model import Memory

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "FACETS",
    "MAX_LISTED",
    "MAX_PROMPTED",
    "WHOLE_VIEW",
    "Partition",
    "ViewSpec",
    "check_facet",
    "covered",
    "facet_value",
    "inputs_digest",
    "nothing_found",
    "partition_key",
    "partitions",
    "result_key",
    "spec_json",
    "spec_of",
    "summary_request",
    "unsummarised",
]

# Where a memory keeps a view's label: besides these, "meta:<key>" is a metadata value.
FACETS = ("tenant", "thread", "kind")
_META = "meta:"

# AMS's instructions, so a view defined without its own reads the same summaries there and here.
DEFAULT_INSTRUCTIONS = (
    "You are a summarization assistant. Given a set of long-term memories, produce a concise "
    "summary that highlights key facts, stable preferences, and important events relevant to "
    "the group."
)
MAX_PROMPTED = 200  # memories one model call reads, oldest first (AMS's cap)
MAX_LISTED = 50  # memories a summary without a model lists
_SUMMARY_TOKENS = 512


def facet_value(memory: Memory, facet: str) -> str | None:
    """What `memory` keeps where `facet` says (None: nothing, so no group takes it)."""
    if facet == "tenant":
        return memory.tenant
    if facet == "thread":
        return memory.thread or None
    if facet == "kind":
        return memory.memory_type.kind
    if facet.startswith(_META):
        return memory.metadata.get(facet.removeprefix(_META)) or None
    raise ValueError(f"no memory keeps a facet {facet!r}")


def check_facet(facet: str) -> str:
    if facet not in FACETS and not (facet.startswith(_META) and len(facet) > len(_META)):
        raise ValueError(f"no memory keeps a facet {facet!r}")
    return facet


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """What a view covers and how it is summarised: its group labels, the value each filter
    label must have, where a memory keeps each label (`facets`), the window (days back from
    the run) and the model's instructions and model (None: the defaults)."""

    view_id: str
    group_by: tuple[str, ...] = ()
    filters: Mapping[str, str] = field(default_factory=dict)
    facets: Mapping[str, str] = field(default_factory=dict)
    window_days: int | None = None
    prompt: str | None = None
    model_name: str | None = None

    def __post_init__(self) -> None:
        unplaced = (set(self.group_by) | set(self.filters)) - set(self.facets)
        if unplaced:
            raise ValueError(f"the view does not say where memories keep {sorted(unplaced)}")
        for facet in self.facets.values():
            check_facet(facet)

    def admits(self, memory: Memory, group: Mapping[str, str], now: datetime) -> bool:
        """Whether the view covers `memory` in `group` (its values over the filters')."""
        wanted = {**self.filters, **group}
        if any(facet_value(memory, self.facets[k]) != v for k, v in wanted.items()):
            return False
        return self.window_days is None or memory.timestamp >= now - timedelta(
            days=self.window_days
        )


@dataclass(frozen=True, slots=True)
class Partition:
    """One group's values (label -> value) and its memories, oldest first."""

    group: Mapping[str, str]
    memories: tuple[Memory, ...]

    @property
    def key(self) -> str:
        return result_key(self.group)


def partition_key(group: Mapping[str, str]) -> str:
    """A group as one text: its labels sorted, each `label=value` percent-encoded, joined by
    `|` (AMS's encoding, so the same group has the same key there and here)."""
    return "|".join(f"{quote(k, safe='')}={quote(group[k], safe='')}" for k in sorted(group))


# The key of the one result of a view without `group_by`, whose group is empty: a document
# needs a key (an empty one names the whole collection), and no group's key is this one,
# since each holds a `=`.
WHOLE_VIEW = "*"


def result_key(group: Mapping[str, str]) -> str:
    """The key of a partition's result among its view's results."""
    return partition_key(group) or WHOLE_VIEW


def _oldest_first(memories: Iterable[Memory]) -> tuple[Memory, ...]:
    return tuple(sorted(memories, key=lambda m: (m.timestamp, m.id)))


def covered(
    spec: ViewSpec, memories: Iterable[Memory], group: Mapping[str, str], now: datetime
) -> Partition:
    """The partition of `group`: the memories the view covers with those values."""
    return Partition(dict(group), _oldest_first(m for m in memories if spec.admits(m, group, now)))


def partitions(spec: ViewSpec, memories: Iterable[Memory], now: datetime) -> list[Partition]:
    """Every group the covered memories make, by key; a memory without a value for one of the
    group labels is in none."""
    groups: dict[str, tuple[dict[str, str], list[Memory]]] = {}
    for memory in memories:
        if not spec.admits(memory, {}, now):
            continue
        values = {label: facet_value(memory, spec.facets[label]) for label in spec.group_by}
        if any(v is None for v in values.values()):
            continue
        group = {k: v for k, v in sorted(values.items()) if v is not None}
        groups.setdefault(partition_key(group), (group, []))[1].append(memory)
    return [
        Partition(group, _oldest_first(members)) for _, (group, members) in sorted(groups.items())
    ]


def inputs_digest(spec: ViewSpec, partition: Partition, model: str) -> str:
    """What a partition's summary depends on, as one digest: equal digests, equal summaries."""
    inputs: list[Any] = [spec.prompt or DEFAULT_INSTRUCTIONS, model]
    inputs += [[m.id, m.content] for m in partition.memories[:MAX_PROMPTED]]
    inputs.append(len(partition.memories))
    return hashlib.sha256(json.dumps(inputs, ensure_ascii=False).encode()).hexdigest()


def summary_request(spec: ViewSpec, partition: Partition) -> ModelRequest:
    """The one model call that summarises `partition` (AMS's prompt: the instructions, the
    group, the memories as bullets, oldest first, at most MAX_PROMPTED)."""
    bullets = "\n".join(f"- {m.content}" for m in partition.memories[:MAX_PROMPTED])
    shown = min(len(partition.memories), MAX_PROMPTED)
    if shown < len(partition.memories):
        bullets += (
            f"\n\n[Memories truncated to fit token budget: used {shown} of "
            f"{len(partition.memories)} entries]"
        )
    group = json.dumps(dict(partition.group), sort_keys=True)
    text = (
        f"{spec.prompt or DEFAULT_INSTRUCTIONS}\n\nGROUP: {group}\n\nMEMORIES:\n{bullets}"
        "\n\nSUMMARY:"
    )
    return ModelRequest("", (Message("user", text),), max_tokens=_SUMMARY_TOKENS, temperature=0.0)


def nothing_found(group: Mapping[str, str]) -> str:
    return f"No memories found for group {dict(group)!r}."


def unsummarised(partition: Partition) -> str:
    """A partition's summary with no chat model: it says so, and lists the memories."""
    listed = "\n".join(f"- {m.content}" for m in partition.memories[:MAX_LISTED])
    return (
        "LLM summarization disabled (no chat model configured: set MEMSTREAM_CHAT_BASE_URL "
        f"and MEMSTREAM_CHAT_MODEL). Concatenated up to {MAX_LISTED} memories:\n{listed}"
    )


def spec_json(spec: ViewSpec) -> dict[str, Any]:
    """The parts of a view's document this module reads (`spec_of` reads them back)."""
    return {
        "id": spec.view_id,
        "group_by": list(spec.group_by),
        "filters": dict(spec.filters),
        "facets": dict(spec.facets),
        "time_window_days": spec.window_days,
        "prompt": spec.prompt,
        "model_name": spec.model_name,
    }


def spec_of(document: Mapping[str, Any]) -> ViewSpec:
    return ViewSpec(
        view_id=document["id"],
        group_by=tuple(document.get("group_by") or ()),
        filters=dict(document.get("filters") or {}),
        facets=dict(document.get("facets") or {}),
        window_days=document.get("time_window_days"),
        prompt=document.get("prompt"),
        model_name=document.get("model_name"),
    )
