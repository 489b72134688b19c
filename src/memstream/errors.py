"""Every error memstream raises, under one root.

    MemstreamError
    ├── ConfigurationError (+ ValueError)      a setting is missing or malformed
    ├── InvalidInputError (+ ValueError)       caller passed something memstream refuses
    │   ├── InvalidTenantError                 a tenant id that cannot be used safely
    │   ├── ImportFileError                    a bad line in a `memstream import` file
    │   ├── LimitExceededError                 a request over one of the server's limits
    │   ├── MemoryIdRetiredError               a memory id that was deleted: never reused
    │   └── NamespaceTenantError               a store namespace that names no single tenant
    ├── EventDecodeError (+ ValueError)        bytes on a topic that are no memstream event
    │   ├── UnknownEventTypeError              a `type` no version of memstream wrote
    │   ├── EventVersionError                  a known event type in a version we cannot read
    │   ├── EventIdMismatchError               an `id` its fields do not derive
    │   ├── EventKeyMismatchError              a Kafka key that is not the event's tenant
    │   ├── EventUnusableError                 an event whose effects cannot be built
    │   └── SealedEventError                   encrypted content that cannot be opened
    │       ├── UnknownDataKeyError            sealed under a data key this reader lacks
    │       └── DataKeyErasedError             sealed under a key destroyed by an erasure
    ├── InfrastructureError                    a service failed at run time (retryable)
    │   ├── KafkaUnavailableError
    │   ├── RedisUnavailableError
    │   │   └── RedisLoadingError              Redis is loading its data after a restart
    │   ├── EmbeddingProviderError
    │   ├── ModelProviderError                 a chat model's API failed
    │   └── ProjectionLagError                 a write was not applied within the wait asked for
    ├── NotAuthenticatedError                  no API key, or one that is unknown or revoked
    ├── ForbiddenError                         a key that may not act for the tenant it names
    ├── MemoryNotFoundError                    no memory of the tenant has that id
    │   ├── SessionNotFoundError               no working memory of the tenant has that session
    │   ├── SummaryViewNotFoundError           no summary view of the tenant has that id
    │   ├── NamespaceNotFoundError             no namespace of the tenant has that id
    │   └── TaskNotFoundError                  no task of the tenant has that id (or it expired)
    ├── StaleSessionError                      a working-memory put of a version no longer current
    ├── NamespaceConflictError                 a namespace's name is taken, it changed meanwhile,
    │                                          or it is archived or not empty
    ├── ReplayError                            a replay stopped without swapping anything in
    ├── StackError                             `memstream up/down` could not manage a service
    ├── ExtractionOutputError                  a model's extraction that is not the JSON asked for
    └── EffectRefusedError                     a crashed run's effect may have run and its
                                               target cannot tell: it is not run again

Misuse errors also subclass the matching builtin so ordinary ``except ValueError`` works;
run-time I/O errors stay apart from them. Each error carries a stable ``code`` and a
``retryable`` flag so an agent (or an operator script) can decide what to do without parsing
the message, and each message says what happened and what to do next.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "DataKeyErasedError",
    "EffectRefusedError",
    "EmbeddingProviderError",
    "EventDecodeError",
    "EventIdMismatchError",
    "EventKeyMismatchError",
    "EventUnusableError",
    "EventVersionError",
    "ExtractionOutputError",
    "ForbiddenError",
    "ImportFileError",
    "InfrastructureError",
    "InvalidInputError",
    "InvalidTenantError",
    "KafkaUnavailableError",
    "LimitExceededError",
    "MemoryIdRetiredError",
    "MemoryNotFoundError",
    "MemstreamError",
    "ModelProviderError",
    "ModelRefusedError",
    "NamespaceConflictError",
    "NamespaceNotFoundError",
    "NamespaceTenantError",
    "NotAuthenticatedError",
    "ProjectionLagError",
    "RedisLoadingError",
    "RedisUnavailableError",
    "ReplayError",
    "SealedEventError",
    "SessionNotFoundError",
    "StackError",
    "StaleSessionError",
    "SummaryViewNotFoundError",
    "TaskNotFoundError",
    "UnknownDataKeyError",
    "UnknownEventTypeError",
]


class MemstreamError(Exception):
    """Root of every memstream error."""

    code: str = "memstream_error"
    retryable: bool = False


class ConfigurationError(MemstreamError, ValueError):
    code = "configuration"


class InvalidInputError(MemstreamError, ValueError):
    code = "invalid_input"


class InvalidTenantError(InvalidInputError):
    code = "invalid_tenant"


class ImportFileError(InvalidInputError):
    """A line of an import file is unusable; nothing from the file was sent."""

    code = "import_file"

    def __init__(self, line: int, problem: str) -> None:
        self.line = line
        self.problem = problem
        super().__init__(
            f"line {line}: {problem}. Nothing was imported; fix the line and run the import again."
        )


class NamespaceTenantError(InvalidInputError):
    """A LangGraph store namespace (or search prefix) from which no single tenant follows."""

    code = "namespace_tenant"


class EventDecodeError(MemstreamError, ValueError):
    code = "event_decode"


class UnknownEventTypeError(EventDecodeError):
    code = "unknown_event_type"


class EventIdMismatchError(EventDecodeError):
    """The payload's `id` is not the one its fields derive (altered, or a faulty producer)."""

    code = "event_id_mismatch"


class EventKeyMismatchError(EventDecodeError):
    """The message's Kafka key is not the event's tenant, so its order is not the tenant's."""

    code = "event_key_mismatch"


class EventUnusableError(EventDecodeError):
    """An event that decodes but names an effect that cannot be built (a memory or a
    document without a usable key): its producer's defect, or this memstream's. Dead-lettered
    like unreadable bytes, so one such event never stops a worker."""

    code = "event_unusable"


class EventVersionError(EventDecodeError):
    """An event type we know, in a schema version this build cannot read."""

    code = "event_version"

    def __init__(self, event_type: str, expected: int, actual: object) -> None:
        self.event_type = event_type
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"{event_type} has schema version {actual!r}; this memstream reads versions 1 to "
            f"{expected}. Upgrade the worker before producers that write newer events."
        )


class SealedEventError(EventDecodeError):
    """The event's content is encrypted (docs/erasure.md) and could not be opened: no keyring
    was given, the ciphertext was altered, or it names a key the keyring cannot unwrap."""

    code = "sealed"


class UnknownDataKeyError(SealedEventError):
    """Sealed under a tenant data key that is not in the keys topic this reader follows."""

    code = "unknown_data_key"


class DataKeyErasedError(SealedEventError):
    """Sealed under a tenant data key that `memstream forget --erase` destroyed: its content
    is gone for good. Readers skip such events and count them as erased, not as failures."""

    code = "erased"


class InfrastructureError(MemstreamError):
    code = "infrastructure"
    retryable = True


class KafkaUnavailableError(InfrastructureError):
    code = "kafka_unavailable"


class RedisUnavailableError(InfrastructureError):
    code = "redis_unavailable"


class RedisLoadingError(RedisUnavailableError):
    """Redis answers LOADING: it is replaying its data after a restart and serves nothing
    until done (seconds to minutes, by the size of its files). Retry later."""

    code = "redis_loading"


class EmbeddingProviderError(InfrastructureError):
    code = "embedding_provider"


class ModelProviderError(InfrastructureError):
    code = "model_provider"


class ModelRefusedError(ModelProviderError):
    """The model's API answered, finally, that it will not do this request (a 4xx other than
    429: a refused content, a prompt over its context): asking again gets the same answer."""

    code = "model_refused"
    retryable = False


class ExtractionOutputError(MemstreamError):
    """A chat model answered an extraction with something that is not the JSON it was asked
    for, twice: the turn is set aside (a dead letter) rather than asked about forever."""

    code = "extraction_output"


class ProjectionLagError(InfrastructureError):
    """A write reached the log but no worker applied it within the time a caller waits for."""

    code = "projection_lag"


class ReplayError(MemstreamError):
    """A replay could not finish; the live projection was left as it was."""

    code = "replay"


class ReshardError(MemstreamError):
    """A reshard could not finish; the message says which step and what to do."""

    code = "reshard"


class StackError(MemstreamError):
    code = "stack"


class EffectRefusedError(MemstreamError):
    """Replaying a crashed run found an effect that may have run, on a target that cannot tell."""

    code = "effect_refused"

    def __init__(self, run_id: str, name: str, key: str) -> None:
        self.run_id = run_id
        self.name = name
        self.key = key
        super().__init__(
            f"effect {name} ({key}) of run {run_id} was started before a crash and may have "
            "run; its target cannot tell whether it did, so it is not run again. Check the "
            "target by hand, or use a transactional (idempotent) target for this effect."
        )


class LimitExceededError(InvalidInputError):
    """A request goes over one of the server's limits; `limit` names which one."""

    code = "limit_exceeded"

    def __init__(self, limit: str, message: str) -> None:
        self.limit = limit
        super().__init__(message)


class MemoryIdRetiredError(InvalidInputError):
    """The memory id was deleted (tombstoned); a new memory needs a new id."""

    code = "memory_id_retired"


class NotAuthenticatedError(MemstreamError):
    code = "not_authenticated"


class ForbiddenError(MemstreamError):
    code = "forbidden"


class MemoryNotFoundError(MemstreamError):
    code = "memory_not_found"


class SessionNotFoundError(MemoryNotFoundError):
    """No working memory of the tenant has that session id (never put, deleted or expired)."""

    code = "session_not_found"


class SummaryViewNotFoundError(MemoryNotFoundError):
    """The tenant has no summary view of that id (never defined, or removed)."""

    code = "summary_view_not_found"


class TaskNotFoundError(MemoryNotFoundError):
    """The tenant has no task of that id (never run, or older than a week)."""

    code = "task_not_found"


class NamespaceNotFoundError(MemoryNotFoundError):
    """The tenant has no namespace of that id (never created, or removed)."""

    code = "namespace_not_found"


class NamespaceConflictError(MemstreamError):
    """A namespace change that cannot be made as asked: the name is taken among its siblings,
    the namespace changed meanwhile, it is archived, or it is not empty."""

    code = "namespace_conflict"


class StaleSessionError(MemstreamError):
    """A put of a session's working memory named a version that is no longer current."""

    code = "stale_session"

    def __init__(self, message: str, *, current: int) -> None:
        self.current = current
        super().__init__(message)
