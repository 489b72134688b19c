"""The console at /console over the real stack, driven as a browser drives it (forms, a
cookie, redirects): signing in, the explorer, a memory's page and history, forgetting with a
confirmation, the tenant boundary, escaping and the security headers."""

from __future__ import annotations

import html
import json
import re
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from memstream.memory.events import memories_of

from .helpers import TestStack, wait_until
from .serving import tenant_key

pytestmark = pytest.mark.integration

HOSTILE = (
    "<script>alert('x')</script>",
    '"><img src=x onerror=alert(1)>',
    "**bold** <b>html</b> [link](javascript:alert(1))",
)


def signed_in(server: str, key: str) -> httpx.Client:
    browser = httpx.Client(base_url=server, follow_redirects=False)
    answer = browser.post("/console/sign-in", data={"key": key})
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == "/console"
    return browser


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page
    return found.group(1)


def remember(server: str, key: str, texts: dict[str, str]) -> None:
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as api:
        body = {"memories": [{"id": i, "text": t} for i, t in texts.items()]}
        created = api.post("/v1/long-term-memory/?wait=true", json=body)
        assert created.status_code == 200, created.text


def test_a_tenant_signs_in_searches_reads_and_forgets(server: str, env: dict[str, str]) -> None:
    tenant = f"con-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    ids = {f"m{n}-{uuid.uuid4().hex[:6]}": text for n, text in enumerate(HOSTILE)}
    office = f"office-{uuid.uuid4().hex[:6]}"
    remember(server, key, {**ids, office: "The office moved to Cork in May"})

    assert httpx.get(f"{server}/console").status_code == 303  # no session: to the sign-in

    browser = httpx.Client(base_url=server, follow_redirects=False)
    entered = browser.post("/console/sign-in", data={"key": key})
    assert entered.status_code == 303 and entered.headers["location"] == "/console"
    cookie = entered.headers["set-cookie"]
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower()
    assert "Path=/console" in cookie and key not in cookie

    page = browser.get("/console")
    assert page.status_code == 200
    assert "script-src" not in page.headers["content-security-policy"]  # no script at all
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert page.headers["x-content-type-options"] == "nosniff"
    # Every memory is listed, escaped: no tag of a memory's text reaches the page as a tag.
    for text in HOSTILE:
        assert text in html.unescape(page.text)
    assert "<script>" not in page.text and "<img" not in page.text and "<b>" not in page.text
    assert key not in page.text

    found = browser.get("/console", params={"q": "where is the office"})
    assert found.status_code == 200
    assert re.search(r"score [0-9.]+ \(words [0-9.]+, meaning [0-9.]+\)", found.text)
    assert found.text.index("The office moved to Cork") < found.text.index("alert")

    shown = browser.get(f"/console/memories/{office}")
    assert shown.status_code == 200
    assert "The office moved to Cork in May" in shown.text
    assert "MemorySaved" in shown.text and "recorded" in shown.text  # its history
    assert "partition" in shown.text and "offset" in shown.text  # where the log holds it

    asked = browser.get(f"/console/memories/{office}/forget")
    assert asked.status_code == 200 and "MemoryForgotten" in asked.text
    token = csrf_of(asked.text)
    # A form without the session's token changes nothing.
    refused = browser.post(f"/console/memories/{office}/forget", data={"csrf": "forged"})
    assert refused.status_code == 401
    assert browser.get(f"/console/memories/{office}").status_code == 200
    done = browser.post(f"/console/memories/{office}/forget", data={"csrf": token})
    assert done.status_code == 303 and done.headers["location"].startswith("/console?forgotten=")
    after = browser.get(done.headers["location"])
    assert "Forgotten" in after.text and "The office moved to Cork" not in after.text
    assert browser.get(f"/console/memories/{office}").status_code == 404

    out = browser.post("/console/sign-out", data={"csrf": csrf_of(after.text)})
    assert out.status_code == 303
    assert browser.get("/console").status_code == 303  # signed out: back to the sign-in


def test_a_tenant_never_sees_another_tenants_memory(server: str, env: dict[str, str]) -> None:
    mine, theirs = f"con-{uuid.uuid4().hex[:8]}", f"con-{uuid.uuid4().hex[:8]}"
    secret = f"s-{uuid.uuid4().hex[:6]}"
    remember(server, tenant_key(env, theirs), {secret: "Their launch code is 7431"})
    browser = signed_in(server, tenant_key(env, mine))
    # Naming the other tenant changes nothing: a tenant key looks at its own tenant.
    listing = browser.get("/console", params={"tenant": theirs, "q": "launch code"})
    assert listing.status_code == 200 and "7431" not in listing.text
    assert browser.get(f"/console/memories/{secret}", params={"tenant": theirs}).status_code == 404
    forged = browser.get(f"/console/memories/{secret}/forget", params={"tenant": theirs})
    assert forged.status_code == 404

    admin = signed_in(server, tenant_key(env, None))
    asks = admin.get("/console")
    assert asks.status_code == 200 and 'name="tenant"' in asks.text
    seen = admin.get("/console", params={"tenant": theirs, "q": "launch code"})
    assert "Their launch code is 7431" in seen.text
    assert admin.get(f"/console/memories/{secret}", params={"tenant": theirs}).status_code == 200


def test_the_explorer_filters_by_time_and_says_what_was_malformed(
    server: str, env: dict[str, str]
) -> None:
    tenant = f"con-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    before = datetime.now(UTC) - timedelta(minutes=1)
    remember(server, key, {f"t-{uuid.uuid4().hex[:6]}": "The standup moved to ten o'clock"})
    browser = signed_in(server, key)

    def listing(**params: str) -> str:
        page = browser.get("/console", params=params)
        assert page.status_code == 200, page.text
        return page.text

    hour = timedelta(hours=1)
    assert "standup moved" in listing(since=before.isoformat())
    # A time without a zone is UTC, as the pages show times (what a datetime field sends).
    assert "standup moved" in listing(since=before.strftime("%Y-%m-%dT%H:%M"))
    assert "standup moved" not in listing(since=(before + hour).isoformat())
    assert "standup moved" not in listing(until=(before - hour).isoformat(), q="standup")

    # A malformed time or query is said on a page (not the API's JSON), and nothing changes.
    wrong = browser.get("/console", params={"since": "last tuesday"})
    assert wrong.status_code == 422 and "since: not a time" in wrong.text
    assert wrong.headers["content-type"].startswith("text/html")
    bad_turn = browser.get("/console/turns", params={"run": "r", "turn": "-1"})
    assert bad_turn.status_code == 422 and "malformed" in bad_turn.text
    assert bad_turn.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in bad_turn.headers["content-security-policy"]


def test_a_wrong_key_signs_nobody_in(server: str) -> None:
    with httpx.Client(base_url=server) as browser:
        refused = browser.post("/console/sign-in", data={"key": "msk_not-a-key"})
        assert refused.status_code == 401
        assert "unknown or revoked" in refused.text and "msk_not-a-key" not in refused.text
        assert "set-cookie" not in refused.headers
        assert browser.get("/console").status_code == 303
        # A session cookie made up by hand is no session.
        browser.cookies.set("memstream_console", "made-up", path="/console")
        assert browser.get("/console").status_code == 303


def test_the_time_view_shows_a_memory_as_it_was_and_what_changed(
    server: str, env: dict[str, str]
) -> None:
    tenant = f"con-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    office = f"office-{uuid.uuid4().hex[:6]}"
    remember(server, key, {office: "The office is in Dublin"})
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as api:
        edited = api.patch(
            f"/v1/long-term-memory/{office}?wait=true", json={"text": "The office is in Cork"}
        )
        assert edited.status_code == 200, edited.text
        moments = [
            h["at"] for h in api.get(f"/v1/long-term-memory/{office}/history").json()["history"]
        ]
    browser = signed_in(server, key)
    page = browser.get(f"/console/memories/{office}")
    assert "The office is in Cork" in page.text
    # Each history entry links to the memory as of that entry: the first shows the old text.
    links = re.findall(r'href="(/console/memories/[^"]+\?at=[^"]+)"', page.text)
    assert len(links) == len(moments) == 2
    then = browser.get(html.unescape(links[0]))
    assert then.status_code == 200
    shown = then.text[then.text.index('id="then"') :]
    assert shown.index("The office is in Dublin") < shown.index('id="now"')
    assert "The office is in Cork" in then.text  # and as it is now, below

    moved = browser.get("/console/time", params={"at": moments[1], "since": moments[0]})
    assert moved.status_code == 200
    assert "What changed" in moved.text and "changed" in moved.text
    assert "The office is in Cork" in moved.text
    before = browser.get("/console/time", params={"at": moments[0]})
    assert "1 memory at" in before.text and "The office is in Dublin" in before.text


def test_a_turns_page_shows_what_it_was_shown_each_memory_linked(
    server: str, env: dict[str, str], stack: TestStack
) -> None:
    tenant = f"con-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    first = stack.turn(tenant, "Which database do we use?", "PostgreSQL 16.")
    (question, answer) = memories_of(first)
    second = replace(
        stack.turn(tenant, "And the version?", "16, as said."),
        run=first.run,
        turn=1,
        shown=(answer.id, question.id),
    )
    stack.publish([first, second])
    stack.wait_applied([first, second])

    browser = signed_in(server, key)
    page = browser.get("/console/turns", params={"run": first.run, "turn": 1})
    assert page.status_code == 200, page.text
    assert "PostgreSQL 16." in page.text and "Which database do we use?" in page.text
    assert f'href="/console/memories/{answer.id}"' in page.text
    assert "recorded by run" in page.text  # each shown memory traced to its turn
    # A memory's page links to the turn that recorded it.
    shown = browser.get(f"/console/memories/{answer.id}")
    assert f"/console/turns?run={first.run}&amp;turn=0" in shown.text
    unknown = browser.get("/console/turns", params={"run": "never-ran"})
    assert unknown.status_code == 200 and "No recorded run never-ran" in unknown.text
    # Another tenant's key finds no such run in its own log.
    other = signed_in(server, tenant_key(env, f"x{tenant}"))
    foreign = other.get("/console/turns", params={"run": first.run, "tenant": tenant})
    assert "PostgreSQL" not in foreign.text and "No recorded" in foreign.text


def test_the_operations_page_is_the_admins_keys_dead_letters_and_erasure(
    server: str, env: dict[str, str], stack: TestStack
) -> None:
    tenant = f"con-{uuid.uuid4().hex[:8]}"
    assert signed_in(server, tenant_key(env, tenant)).get("/console/ops").status_code == 403
    admin = signed_in(server, tenant_key(env, None))
    page = admin.get("/console/ops")
    assert page.status_code == 200, page.text
    assert "Workers and servers" in page.text and "Projection shards" in page.text
    assert re.search(r"<td>(worker|server)</td>", page.text)  # their heartbeats
    # The one broker: answering, the controller, leading every partition, all in sync.
    assert re.search(r"<tr><td>\d+</td><td>[^<]+:\d+</td><td>yes</td><td>yes</td>", page.text)
    assert "every partition fully in sync" in page.text
    # The worker's lag over the last hour, as an SVG plot (its heartbeats report it).
    wait_until(
        lambda: '<svg class="lag"' in admin.get("/console/ops").text, "the worker's lag to plot"
    )
    assert re.search(r'<polyline fill="none" stroke="#[0-9a-f]{6}"', admin.get("/console/ops").text)
    token = csrf_of(page.text)

    # A key made here is shown once, signs in, and once revoked ends its session.
    made = admin.post("/console/ops/keys", data={"csrf": token, "tenant": tenant})
    assert made.status_code == 200
    key = html.unescape(re.search(r'id="key">([^<]+)<', made.text).group(1))  # type: ignore[union-attr]
    assert key.startswith("msk_") and f"for tenant {tenant}" in made.text
    holder = signed_in(server, key)
    assert holder.get("/console").status_code == 200
    key_id = key.split("_")[1]
    assert admin.post(f"/console/ops/keys/{key_id}/revoke", data={"csrf": "x"}).status_code == 401
    revoked = admin.post(f"/console/ops/keys/{key_id}/revoke", data={"csrf": token})
    assert revoked.status_code == 303
    assert holder.get("/console").status_code == 303  # its session ended with the key
    assert "revoked key" in admin.get(revoked.headers["location"]).text

    # A foreign producer's junk is a dead letter with its code; a retry says what became of it.
    stack.publish_raw(tenant.encode(), b"{not json")
    wait_until(
        lambda: "event_decode" in admin.get("/console/ops").text, "the junk to be dead-lettered"
    )
    retried = admin.post(
        "/console/ops/dead-letters/retry", data={"csrf": token, "code": "event_decode"}
    )
    assert retried.status_code == 303 and "retried" in admin.get(retried.headers["location"]).text

    # Erasure needs the tenant typed twice, exactly.
    doomed = f"con-{uuid.uuid4().hex[:8]}"
    remember(server, tenant_key(env, doomed), {"doomed-1": "Erase me entirely"})
    wrong = admin.post(
        "/console/ops/erase", data={"csrf": token, "tenant": doomed, "confirm": doomed + "x"}
    )
    assert wrong.status_code == 422 and "type its id again" in wrong.text
    assert "Erase me" in admin.get("/console", params={"tenant": doomed}).text
    # Each tenant's memories, on the operations page, linked to its explorer.
    listed = admin.get("/console/ops").text
    assert f'href="/console?tenant={doomed}">{doomed}</a>' in listed
    row = re.search(rf"{doomed}</a></td><td>\d+</td><td>1</td><td>([0-9.]+) (K|M)?i?B</td>", listed)
    assert row is not None and float(row.group(1)) > 0  # its share of its shard's bytes
    erased = admin.post(
        "/console/ops/erase", data={"csrf": token, "tenant": doomed, "confirm": doomed}
    )
    assert erased.status_code == 303, erased.text
    assert f"erased tenant {doomed}" in admin.get(erased.headers["location"]).text
    assert "Erase me" not in admin.get("/console", params={"tenant": doomed}).text


def test_live_events_bring_each_new_memory_of_the_tenant_only(
    server: str, env: dict[str, str]
) -> None:
    tenant, other = f"con-{uuid.uuid4().hex[:8]}", f"con-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    remember(server, key, {"before-1": "Said before the page opened"})
    browser = signed_in(server, key)
    page = browser.get("/console/live")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert browser.get("/console").headers["content-security-policy"].count("script-src") == 0
    names: list[str] = []
    found: list[dict[str, object]] = []
    with browser.stream("GET", "/console/live/events", timeout=30) as events:
        assert events.headers["content-type"].startswith("text/event-stream")
        remember(server, tenant_key(env, other), {"theirs-1": "Another tenant's news"})
        remember(server, key, {"after-1": "<b>Said</b> after the page opened"})
        name = ""
        for line in events.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
                names.append(name)
            elif line.startswith("data: ") and name == "memory":
                found.append(json.loads(line.removeprefix("data: ")))
                break
    assert [m["content"] for m in found] == ["<b>Said</b> after the page opened"]
    assert found[0]["id"] == "after-1" and isinstance(found[0]["lag_ms"], int)
    assert "lag" in names  # the workers' lag, beside the memories


def test_editing_writes_the_apis_edit_and_keeps_the_old_text_in_the_past(
    server: str, env: dict[str, str]
) -> None:
    tenant = f"con-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    remember(server, key, {"plan-1": "We ship on Friday"})
    browser = signed_in(server, key)
    form = browser.get("/console/memories/plan-1/edit")
    assert (
        form.status_code == 200 and "MemorySaved" in form.text and "We ship on Friday" in form.text
    )
    token = csrf_of(form.text)
    assert browser.post("/console/memories/plan-1/edit", data={"text": "x"}).status_code == 401
    empty = browser.post("/console/memories/plan-1/edit", data={"csrf": token, "text": "  "})
    assert empty.status_code == 422 and "cannot be empty" in empty.text
    saved = browser.post(
        "/console/memories/plan-1/edit", data={"csrf": token, "text": "We ship on <Monday>"}
    )
    assert saved.status_code == 303 and saved.headers["location"] == "/console/memories/plan-1"
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as api:
        assert api.get("/v1/long-term-memory/plan-1").json()["text"] == "We ship on <Monday>"
    page = browser.get("/console/memories/plan-1")
    assert "We ship on &lt;Monday&gt;" in page.text
