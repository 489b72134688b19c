"""The container stack's start of one container (memstream.testing.containers): a failure on
the engine's side (a 5xx: podman's "write child: broken pipe") is tried again with a new
container, the failed one removed; a refused request (a 4xx) is not."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import requests
from docker.errors import APIError
from testcontainers.core import container as testcontainers

from memstream.testing.containers import ContainerStack


def _failure(status: int) -> APIError:
    response = requests.Response()
    response.status_code = status
    return APIError("start", response=response, explanation="write child: broken pipe")


class _Fake:
    """A container whose starts fail with `failures` in turn, then succeed."""

    failures: ClassVar[list[APIError]] = []
    made: ClassVar[list[_Fake]] = []

    def __init__(self, image: str) -> None:
        self.image, self.started, self.stopped = image, False, False
        _Fake.made.append(self)

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self  # the with_* builders

    def start(self) -> _Fake:
        if _Fake.failures:
            raise _Fake.failures.pop(0)
        self.started = True
        return self

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def stack(monkeypatch: pytest.MonkeyPatch) -> ContainerStack:
    monkeypatch.setattr(testcontainers, "DockerContainer", _Fake)
    _Fake.made = []
    made = ContainerStack.__new__(ContainerStack)
    made._network = object()  # type: ignore[assignment]
    made._containers = []
    return made


def test_an_engine_failure_is_tried_again_and_the_failed_container_removed(
    stack: ContainerStack,
) -> None:
    _Fake.failures = [_failure(500), _failure(500)]
    started = stack._run("img", "kafka", {})
    assert [(c.started, c.stopped) for c in _Fake.made] == [
        (False, True), (False, True), (True, False)
    ]  # fmt: skip
    assert stack._containers == [started]


def test_a_refused_request_or_a_third_engine_failure_is_raised(stack: ContainerStack) -> None:
    _Fake.failures = [_failure(404)]
    with pytest.raises(APIError):
        stack._run("img", "kafka", {})
    assert len(_Fake.made) == 1
    _Fake.failures = [_failure(500)] * 3
    with pytest.raises(APIError):
        stack._run("img", "kafka", {})
    assert len(_Fake.made) == 4 and stack._containers == []
