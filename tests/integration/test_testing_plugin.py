"""memstream's pytest plugin without a container engine: the user's suite of
tests/containers/example_suite/ (a LangChain agent, the HTTP API) run by a pytest of its own
with `--memstream-backend=local`, on the stack `memstream up` started: a fresh namespace, a
worker and a server of its own, all stopped and the namespace dropped at the end. The same
suite runs on containers in tests/containers/test_plugin.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstream import Settings
from memstream.deployment import Deployment
from tests.user_suite import run_user_suite

pytestmark = pytest.mark.integration


def test_a_users_suite_runs_on_the_local_stack_and_drops_its_namespace(
    settings: Settings, tmp_path: Path
) -> None:
    client = Deployment(settings).projection.client
    chosen = tmp_path / "namespace"
    run_user_suite(tmp_path, "--memstream-backend=local", "--memstream-server", namespace_to=chosen)
    # Its own namespace, read from the suite: the other pytest processes of `make test` make
    # namespaces of the same form meanwhile.
    namespace = chosen.read_text()
    assert namespace.startswith("test-") and namespace != settings.namespace
    left = set(client.scan_iter(match=f"{namespace}:*"))
    assert left == set(), f"the plugin left its namespace behind: {sorted(left)[:5]}"
