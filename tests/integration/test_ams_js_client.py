"""agent-memory-server's JavaScript client (0.3.2), built from its source with Node and npm as
its users build it (`tests/clients/agent-memory-client-js/ORIGIN.md`), drives every one of its
methods against a running `memstream serve` on the real stack, with a second tenant's key that
must see none of it (`tests/clients/ams_js_client.mjs` holds the calls and their checks).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .serving import new_tenant, tenant_key

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parents[1] / "clients"
SOURCE = CLIENTS / "agent-memory-client-js"


def _run(command: list[str], cwd: Path, what: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def built_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client built from its source: `npm ci` (the pinned dependencies) and `npm run
    build`, in a copy of its folder. Node 20 and npm are part of the machine (README)."""
    npm = shutil.which("npm")
    if npm is None and os.environ.get("CI") != "true":
        pytest.skip("npm is not installed here (it is on every CI machine)")
    assert npm is not None, "npm is missing on a CI machine"
    folder = tmp_path_factory.mktemp("js") / "agent-memory-client-js"
    shutil.copytree(SOURCE, folder)
    _run([npm, "ci", "--no-audit", "--no-fund"], folder, "npm ci")
    _run([npm, "run", "build"], folder, "npm run build")
    entry = folder / "dist" / "index.mjs"
    assert entry.is_file()
    return entry


def test_every_method_of_the_javascript_client_against_memstream(
    built_client: Path, server: str, env: dict[str, str]
) -> None:
    tenant, other = new_tenant("acme-js"), new_tenant("globex-js")
    out = _run(
        ["node", str(CLIENTS / "ams_js_client.mjs")],
        CLIENTS,
        "the JavaScript client's calls",
        env={
            **os.environ,
            "CLIENT": built_client.as_uri(),
            "MEMSTREAM_URL": server,
            "KEY": tenant_key(env, tenant),
            "TENANT": tenant,
            "OTHER_KEY": tenant_key(env, other),
            "OTHER": other,
        },
    )
    checked = json.loads(out.strip().splitlines()[-1])["checked"]
    assert checked == [
        "healthCheck",
        "createLongTermMemory",
        "searchLongTermMemory",
        "searchAllLongTermMemories",
        "getLongTermMemory",
        "editLongTermMemory",
        "memoryPrompt",
        "bulkCreateLongTermMemories",
        "deleteLongTermMemories",
        "forgetLongTermMemories",
        "putWorkingMemory",
        "getWorkingMemory",
        "getOrCreateWorkingMemory",
        "listSessions",
        "deleteWorkingMemory",
        "createSummaryView",
        "listSummaryViews",
        "getSummaryView",
        "runSummaryViewPartition",
        "runSummaryView",
        "getTask",
        "listSummaryViewPartitions",
        "deleteSummaryView",
        "a second tenant's key sees none of it",
    ]
