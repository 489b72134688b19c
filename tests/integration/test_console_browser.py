"""The console in a real browser: Debian's Chromium, driven by Playwright for Python (the
system's browser, launched headless; nothing downloaded). A person signs in, searches, opens
a memory and its history, forgets it through the confirmation and watches it go; memories
written to attack the page (a script, an image's onerror) show as text and run nothing; a
second tenant sees none of it.

Set MEMSTREAM_CONSOLE_SCREENSHOTS to a folder to keep a screenshot of each page there (how
docs/console.md's were made)."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .helpers import TestStack, wait_until
from .serving import tenant_key

pytestmark = pytest.mark.integration

CHROMIUM = Path("/usr/bin/chromium")
# As root, without a sandbox; and without the background traffic a closed network refuses.
_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        message = "no Chromium at /usr/bin/chromium: `make install-dev` installs Debian's"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=_ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _shot(page: object, name: str) -> None:
    folder = os.environ.get("MEMSTREAM_CONSOLE_SCREENSHOTS")
    if folder:
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]


def test_sign_in_search_open_forget_in_a_browser(
    browser: object, server: str, env: dict[str, str], stack: TestStack
) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    tenant = f"web-{uuid.uuid4().hex[:8]}"
    key = tenant_key(env, tenant)
    office, attack = f"office-{uuid.uuid4().hex[:6]}", f"attack-{uuid.uuid4().hex[:6]}"
    texts = {
        office: "The office moved to Cork in May; the lease runs to 2031.",
        attack: '<script>alert("pwned")</script> "><img src=x onerror=alert(2)> **notes**',
        f"deploy-{uuid.uuid4().hex[:6]}": "We deploy on Tuesdays after the standup.",
    }
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as api:
        body = {"memories": [{"id": i, "text": t} for i, t in texts.items()]}
        assert api.post("/v1/long-term-memory/?wait=true", json=body).status_code == 200

    context = browser.new_context(viewport={"width": 1100, "height": 800})
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(f"{server}/console")
    expect(page).to_have_url(f"{server}/console/sign-in")
    _shot(page, "sign-in")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(f"{server}/console")
    # The attack is shown as the text it is, and nothing ran.
    expect(page.get_by_text('<script>alert("pwned")</script>', exact=False)).to_be_visible()
    assert page.locator("main img").count() == 0

    page.get_by_label("search").fill("where is the office?")
    page.get_by_role("button", name="Search").click()
    first = page.locator("ol.hits li").first
    expect(first).to_contain_text("The office moved to Cork")
    _shot(page, "explorer")

    first.get_by_role("link").click()
    expect(page.locator("h1")).to_have_text(f"Memory {office}")
    expect(page.locator("table").last).to_contain_text("recorded")  # its history
    expect(page.locator("table").first).to_contain_text("MemorySaved")
    _shot(page, "memory")

    # Live: a memory written now appears at the top, as text, with how long it took.
    page.get_by_role("link", name="Live").click()
    expect(page.locator("#state")).to_have_text("following")
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as api:
        news = {"memories": [{"id": f"news-{uuid.uuid4().hex[:6]}", "text": "<i>Fresh</i> news"}]}
        assert api.post("/v1/long-term-memory/", json=news).status_code == 200
    expect(page.locator("#live li").first).to_contain_text("<i>Fresh</i> news")
    expect(page.locator("#live li").first).to_contain_text("ms after its event")
    _shot(page, "live")
    page.go_back()

    # The time picker: the memory as its first history entry left it, before an edit.
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {key}"}) as api:
        edit = {"text": "The office moved to Galway in June."}
        assert api.patch(f"/v1/long-term-memory/{office}?wait=true", json=edit).status_code == 200
    page.reload()
    expect(page.locator("#now")).to_have_text("The office moved to Galway in June.")
    page.get_by_role("link", name="as of then").first.click()
    expect(page.locator("#then")).to_contain_text("The office moved to Cork in May")
    _shot(page, "as-of")
    page.get_by_role("link", name="Now").click()

    page.get_by_role("link", name="Forget this memory…").click()
    expect(page.get_by_text("MemoryForgotten")).to_be_visible()
    _shot(page, "forget")
    page.get_by_role("button", name="Forget it").click()
    expect(page.get_by_role("status")).to_contain_text(f"Forgotten: memory {office}")
    expect(page.locator("ol.hits")).not_to_contain_text("The office moved to")
    assert dialogs == []

    # The cookie is not for scripts, and a second tenant's session sees none of this.
    (cookie,) = [c for c in context.cookies() if c["name"] == "memstream_console"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["value"] != key
    context.close()
    stranger = browser.new_context()
    other = stranger.new_page()
    other.goto(f"{server}/console/sign-in")
    other.get_by_label("API key").fill(tenant_key(env, f"x{tenant}"))
    other.get_by_role("button", name="Sign in").click()
    other.goto(f"{server}/console?q=deploy+Tuesdays&tenant={tenant}")
    expect(other.locator("main")).not_to_contain_text("We deploy on Tuesdays")
    other.goto(f"{server}/console/memories/{attack}?tenant={tenant}")
    expect(other.locator("main")).to_contain_text("no memory with id")
    expect(other.get_by_role("link", name="Operations")).to_have_count(0)
    stranger.close()

    # An admin's session has the operations page: processes, shards, dead letters, keys.
    operator = browser.new_context(viewport={"width": 1100, "height": 800})
    ops = operator.new_page()
    ops.goto(f"{server}/console/sign-in")
    ops.get_by_label("API key").fill(tenant_key(env, None))
    ops.get_by_role("button", name="Sign in").click()
    ops.get_by_role("link", name="Operations").click()
    expect(ops.locator("table.shards")).to_contain_text("yes")
    expect(ops.locator("table.keys")).to_contain_text(f"tenant {tenant}")
    # A foreign producer's junk, dead-lettered, and retried with the button.
    # (From a thread of its own: Playwright's sync API holds this thread's event loop.)
    junk = threading.Thread(target=stack.publish_raw, args=(tenant.encode(), b"\x00 junk"))
    junk.start()
    junk.join()
    retry = ops.get_by_role("button", name="Retry event_decode")

    def listed() -> bool:
        ops.reload()
        return retry.count() > 0

    wait_until(listed, "the junk to be dead-lettered")
    _shot(ops, "operations")
    retry.click()
    expect(ops.get_by_role("status")).to_contain_text("retried")
    operator.close()
