"""Where the master key comes from, and what happens without one (docs/erasure.md)."""

from __future__ import annotations

import base64
import dataclasses
import os
import stat
from pathlib import Path

import pytest

from memstream import Settings
from memstream.cli.stack import LocalStack
from memstream.deployment import Deployment
from memstream.errors import ConfigurationError
from memstream.memory.cipher import MasterKeys

KEY = os.urandom(32)


def settings(tmp_path: Path, **changes: object) -> Settings:
    base = Settings.from_env({"MEMSTREAM_STATE_DIR": str(tmp_path / "state")})
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_environments_key_wins(tmp_path: Path) -> None:
    deployment = Deployment(settings(tmp_path, master_key=base64.b64encode(KEY).decode()))
    assert deployment.master_keys().kek_id == MasterKeys.fingerprint(KEY)
    assert deployment.sealer() is deployment.keyring() is not None


def test_a_key_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text(base64.b64encode(KEY).decode() + "\n")
    deployment = Deployment(settings(tmp_path, master_key_file=str(path)))
    assert deployment.master_keys().kek_id == MasterKeys.fingerprint(KEY)


def test_without_a_key_encryption_on_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="MEMSTREAM_MASTER_KEY") as caught:
        Deployment(settings(tmp_path)).keyring()
    assert "memstream up" in str(caught.value) and "MEMSTREAM_ENCRYPTION=off" in str(caught.value)


def test_encryption_off_without_a_key_writes_and_reads_plaintext(tmp_path: Path) -> None:
    deployment = Deployment(settings(tmp_path, encryption=False))
    assert deployment.keyring() is None and deployment.sealer() is None


def test_encryption_off_with_a_key_still_opens_but_does_not_seal(tmp_path: Path) -> None:
    key = base64.b64encode(KEY).decode()
    deployment = Deployment(settings(tmp_path, encryption=False, master_key=key))
    assert deployment.keyring() is not None and deployment.sealer() is None


def test_previous_master_keys_are_kept_for_a_rotation(tmp_path: Path) -> None:
    old = os.urandom(32)
    deployment = Deployment(
        settings(
            tmp_path,
            master_key=base64.b64encode(KEY).decode(),
            previous_master_keys=base64.b64encode(old).decode(),
        )
    )
    assert deployment.master_keys().previous == (old,)


def test_up_makes_a_private_development_key_once_which_deployments_then_use(
    tmp_path: Path,
) -> None:
    configured = settings(tmp_path)
    stack = LocalStack(configured, root=tmp_path)
    path = stack.ensure_master_key(say=lambda _: None)
    first = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stack.ensure_master_key(say=lambda _: None).read_text() == first  # kept, not remade
    expected = MasterKeys.fingerprint(base64.b64decode(first))
    assert Deployment(configured).master_keys().kek_id == expected
