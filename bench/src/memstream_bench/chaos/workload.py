"""A chaos run's steady load, at an offered rate whatever fails: agents recording turns through
the hook, HTTP clients writing long-term memories and working-memory sessions and forgetting
earlier memories, HTTP searches and the agent side's recalls, and now and then one tenant
erased. Each operation is logged in the run's `History` as it is answered, and what a read
shows is checked as it is read: a foreign tenant's marker, or a memory shown after its forget
or erasure was seen to be done.

The HTTP clients behave as behind a load balancer: a request that gets no answer (a server
down, a 5xx) is sent once more to the other server, with the same memory id, so a retry can
never write twice.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from memstream.agent import Agent, RunConfig, ScriptedModel
from memstream.deployment import Deployment
from memstream.errors import MemstreamError
from memstream.hooks import RecordConfig, SemanticMemoryMiddleware
from memstream.memory.tenancy import validate_tenant
from memstream_bench.chaos.history import History, Kind, marker, shown, token

__all__ = ["Rates", "Tenant", "Workload"]

_WORDS = [
    "deploy",
    "database",
    "invoice",
    "harbour",
    "violin",
    "garden",
    "sprint",
    "budget",
    "ticket",
    "lantern",
    "river",
    "compiler",
    "meadow",
    "contract",
    "ferry",
    "pottery",
    "backup",
    "orchard",
    "cluster",
    "marathon",
]
_TIMEOUT_S = 15.0
_ERASE_AGAIN_S = 1.0  # an operator's pause before running a failed erasure again


@dataclass(frozen=True, slots=True)
class Rates:
    """Offered operations a second, over all of a kind's clients."""

    turns: float = 1.5
    writes: float = 2.5
    reads: float = 5.0  # searches, recalls and reads of forgotten memories


@dataclass(slots=True)
class Tenant:
    """A tenant of the run: its id, the label its marker carries, its API key, what the
    workload may forget of it, and whether it is retired (being or been erased)."""

    id: str
    label: str
    key: str
    memories: list[tuple[str, str]] = field(default_factory=list)  # (id, token), acked
    forgotten: dict[str, tuple[str, float | None]] = field(default_factory=dict)  # id: token,
    # when a read first found it gone (None: not yet)
    retired: bool = False
    _busy: int = 0
    _quiet: threading.Condition = field(default_factory=threading.Condition)

    @property
    def marker(self) -> str:
        return marker(self.label)

    def enter(self) -> bool:
        with self._quiet:
            if self.retired:
                return False
            self._busy += 1
            return True

    def leave(self) -> None:
        with self._quiet:
            self._busy -= 1
            self._quiet.notify_all()

    def retire(self) -> None:
        """No new write starts for it; returns once those under way are answered."""
        with self._quiet:
            self.retired = True
            self._quiet.wait_for(lambda: self._busy == 0)


class Workload:
    """The load's threads; `start`, then `stop` (joins them)."""

    def __init__(
        self,
        deployment: Deployment,
        tenants: Sequence[Tenant],
        servers: Sequence[str],
        history: History,
        rates: Rates,
        seed: int,
    ) -> None:
        self._deployment, self._tenants, self._servers = deployment, tenants, servers
        self._recaller = deployment.recaller()
        self._history = history
        self._numbers = itertools.count()
        self._count_lock = threading.Lock()
        self._stopping = threading.Event()
        self._erased: dict[str, float] = {}  # tenant id: when its erasure returned
        jobs: list[tuple[str, Callable[[random.Random], None], float]] = [
            ("turns", self._turn, rates.turns / 2),
            ("turns", self._turn, rates.turns / 2),
            ("writes", self._write, rates.writes / 2),
            ("writes", self._write, rates.writes / 2),
            ("reads", self._read, rates.reads / 2),
            ("reads", self._read, rates.reads / 2),
        ]
        self.offered: dict[str, int] = {}
        self._threads = [
            threading.Thread(
                target=self._paced,
                args=(name, job, rate, random.Random(seed * 100 + n)),
                name=f"chaos-{name}-{n}",
                daemon=True,
            )
            for n, (name, job, rate) in enumerate(jobs)
        ]
        self._middleware = threading.local()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopping.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()

    def erase(self, tenant: Tenant, erase: Callable[[], object], deadline_s: float) -> None:
        """Retire `tenant`, then erase it, again until it succeeds (it is idempotent) or the
        deadline passes; the erasure counts from when it returned."""
        tenant.retire()
        until = time.monotonic() + deadline_s
        while not self._stopping.is_set():
            started = time.monotonic()
            try:
                erase()
            except MemstreamError as exc:  # an outage: an operator runs it again
                self._history.answered("erase", started, False, exc.code)
                if time.monotonic() > until:
                    self._history.saw(f"the erasure of {tenant.id} never succeeded: {exc}")
                    return
                self._stopping.wait(_ERASE_AGAIN_S)
                continue
            self._history.answered("erase", started, True)
            self._history.erased_tenant(tenant.id)
            self._erased[tenant.id] = time.monotonic()
            return

    # -- pacing ----------------------------------------------------------------------------

    def _paced(
        self, name: str, job: Callable[[random.Random], None], rate: float, rng: random.Random
    ) -> None:
        interval = 1.0 / rate
        next_at = time.monotonic()
        while not self._stopping.is_set():
            wait = next_at - time.monotonic()
            if wait > 0 and self._stopping.wait(wait):
                return
            next_at += interval
            with self._count_lock:
                self.offered[name] = self.offered.get(name, 0) + 1
            try:
                job(rng)
            except Exception as exc:  # noqa: BLE001 - not an outage's error: a defect to report
                self._history.saw(f"{name} raised {exc!r}")

    def _number(self) -> int:
        with self._count_lock:
            return next(self._numbers)

    def _words(self, rng: random.Random) -> str:
        return " ".join(rng.sample(_WORDS, 3))

    # -- the hook ----------------------------------------------------------------------------

    def _turn(self, rng: random.Random) -> None:
        tenant = rng.choice(self._tenants)
        if not tenant.enter():
            return
        try:
            n = self._number()
            asked, answered = token("u", n), token("a", n)
            model = ScriptedModel([f"{tenant.marker} noted {answered}"])
            agent = Agent(model, middleware=[self._hook()])
            started = time.monotonic()
            try:
                result = agent.run(
                    f"{tenant.marker} remember {self._words(rng)} {asked}",
                    RunConfig(f"{tenant.label}-thread-{n % 5}", tenant.id),
                )
                ok, why = result.status == "completed", str(result.status)
            except MemstreamError as exc:
                ok, why = False, str(exc.code)
            self._history.answered("turn", started, ok, why)
            self._history.wrote(tenant.id, (asked, answered), Kind.TURN, ok)
            for request in model.requests:
                for section in request.sections:
                    self._check_shown(tenant, section.content, "the hook's recall", started)
        finally:
            tenant.leave()

    def _hook(self) -> SemanticMemoryMiddleware:
        hook = getattr(self._middleware, "hook", None)
        if hook is None:
            hook = SemanticMemoryMiddleware(
                stores=self._deployment.stores(), client=ScriptedModel([]), record=RecordConfig()
            )
            self._middleware.hook = hook
        return hook

    # -- HTTP writes -------------------------------------------------------------------------

    def _write(self, rng: random.Random) -> None:
        tenant = rng.choice(self._tenants)
        if not tenant.enter():
            return
        try:
            roll = rng.random()
            if roll < 0.25 and len(tenant.memories) > len(tenant.forgotten) + 2:
                self._forget(tenant, rng)
            elif roll < 0.45:
                self._session(tenant, rng)
            else:
                self._memory(tenant, rng)
        finally:
            tenant.leave()

    def _memory(self, tenant: Tenant, rng: random.Random) -> None:
        n = self._number()
        memory_id, written = f"{tenant.label}-m{n}", token("m", n)
        body = {
            "memories": [{"id": memory_id, "text": f"{tenant.marker} {self._words(rng)} {written}"}]
        }
        ok = (
            self._send("memory", tenant, rng, "POST", "/v1/long-term-memory/", json=body)
            is not None
        )
        self._history.wrote(tenant.id, (written,), Kind.MEMORY, ok)
        if ok:
            tenant.memories.append((memory_id, written))

    def _session(self, tenant: Tenant, rng: random.Random) -> None:
        n = self._number()
        said, reply = token("s", n), token("r", n)
        texts = (f"{tenant.marker} {self._words(rng)} {said}", f"{tenant.marker} ok {reply}")
        body = {
            "messages": [
                {"role": "user", "content": texts[0]},
                {"role": "assistant", "content": texts[1]},
            ]
        }
        session = f"{tenant.label}-s{n}"
        ok = (
            self._send("session", tenant, rng, "PUT", f"/v1/working-memory/{session}", json=body)
            is not None
        )
        self._history.wrote(tenant.id, (said, reply), Kind.SESSION, ok)
        if ok:
            self._history.put_session(tenant.id, session, texts)

    def _forget(self, tenant: Tenant, rng: random.Random) -> None:
        memory_id, written = rng.choice(
            [m for m in tenant.memories if m[0] not in tenant.forgotten]
        )
        ok = (
            self._send(
                "forget",
                tenant,
                rng,
                "DELETE",
                "/v1/long-term-memory",
                params={"memory_ids": memory_id},
            )
            is not None
        )
        self._history.forgot(tenant.id, written, ok)
        if ok:
            tenant.forgotten[memory_id] = (written, None)

    # -- reads -------------------------------------------------------------------------------

    def _read(self, rng: random.Random) -> None:
        tenant = rng.choice(self._tenants)
        roll = rng.random()
        if roll < 0.3 and tenant.forgotten and tenant.id not in self._erased:
            self._confirm_forgotten(tenant, rng)
            return
        if roll > 0.7:
            self._recall(tenant, rng)
            return
        started = time.monotonic()
        body = {"text": self._words(rng), "limit": 10}
        answer = self._send("search", tenant, rng, "POST", "/v1/long-term-memory/search", json=body)
        if answer is None:
            return
        for memory in answer.json().get("memories", []):
            self._check_shown(tenant, str(memory.get("text", "")), "a search", started)

    def _recall(self, tenant: Tenant, rng: random.Random) -> None:
        """The agent side's recall, in this process, as the hook runs it before a turn."""
        started = time.monotonic()
        try:
            hits = self._recaller.recall(validate_tenant(tenant.id), self._words(rng), k=10)
        except MemstreamError as exc:
            self._history.answered("recall", started, False, exc.code)
            return
        self._history.answered("recall", started, True)
        for hit in hits:
            self._check_shown(tenant, hit.memory.content, "a recall", started)

    def _confirm_forgotten(self, tenant: Tenant, rng: random.Random) -> None:
        memory_id = rng.choice(list(tenant.forgotten))
        written, gone_at = tenant.forgotten[memory_id]
        started = time.monotonic()
        answer = self._send(
            "get", tenant, rng, "GET", f"/v1/long-term-memory/{memory_id}", absent_ok=True
        )
        if answer is None:
            return
        if answer.status_code == 404 and gone_at is None:
            tenant.forgotten[memory_id] = (written, time.monotonic())
        elif answer.status_code == 200 and gone_at is not None and gone_at < started:
            self._history.saw(
                f"forgotten {written} of {tenant.id} came back (GET) after it was gone"
            )

    def _check_shown(self, tenant: Tenant, text: str, where: str, started: float) -> None:
        for defect in shown(
            text,
            tenant.id,
            tenant.label,
            asked_at=started,
            erased_at=self._erased.get(tenant.id),
            forgotten=list(tenant.forgotten.values()),
        ):
            self._history.saw(f"{where} {defect}")

    def _send(
        self,
        op: str,
        tenant: Tenant,
        rng: random.Random,
        method: str,
        path: str,
        *,
        absent_ok: bool = False,
        **kwargs: object,
    ) -> httpx.Response | None:
        """The answer of the first server to answer (the next one after a failure), or None."""
        started = time.monotonic()
        first = rng.randrange(len(self._servers))
        headers = {"Authorization": f"Bearer {tenant.key}"}
        reason = ""
        for attempt in range(2):
            url = self._servers[(first + attempt) % len(self._servers)] + path
            try:
                answer = httpx.request(method, url, headers=headers, timeout=_TIMEOUT_S, **kwargs)  # type: ignore[arg-type]
            except httpx.HTTPError as exc:
                reason = type(exc).__name__
                continue
            reason = f"{answer.status_code} {_code(answer)}"
            if answer.status_code == 500:
                self._history.saw(f"HTTP 500 on {op} {path}: {answer.text[:300]}")
            if answer.status_code < 300 or (absent_ok and answer.status_code == 404):
                self._history.answered(op, started, True)
                return answer
            if answer.status_code < 500:
                self._history.saw(
                    f"{op} {path} refused with {answer.status_code}: {answer.text[:300]}"
                )
                break
        self._history.answered(op, started, False, reason)
        return None


def _code(answer: httpx.Response) -> str:
    """The error code of an API error's body (`code`), or its absence."""
    try:
        body = answer.json()
    except ValueError:
        return "(no JSON)"
    code = body.get("code") if isinstance(body, dict) else None
    return str(code) if code else "(no code)"
