"""docs/operations.md shows the commands `memstream acls` prints, word for word: the rights
the tests run each component with are the ones an operator is told to grant."""

from __future__ import annotations

from pathlib import Path

from memstream import Settings
from memstream.cli.acls import acl_commands
from memstream.deployment import Deployment

DOCS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_the_documented_acl_commands_are_the_ones_memstream_acls_prints() -> None:
    deployment = Deployment(Settings(kafka_bootstrap="kafka.example.com:9094"))
    documented = DOCS.read_text()
    missing = [line for line in acl_commands(deployment) if line not in documented]
    assert not missing, "docs/operations.md lacks (run `memstream acls`):\n" + "\n".join(missing)
