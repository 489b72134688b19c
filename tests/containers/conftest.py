"""The container tests (`make test-containers`, CI's step after `make test`): a container
engine must answer (podman's socket here, set up by infra/images/podman.sh) and `make images`
must have built the images; otherwise every test fails saying so, never skips.

`example_suite/` is a user's test suite, which the plugin test runs in a pytest of its own.
"""

from __future__ import annotations

import pytest

from memstream.testing.containers import engine_problem

collect_ignore = ["example_suite"]

IMAGES = (
    "localhost/memstream:latest",
    "localhost/memstream-kafka:latest",
    "localhost/memstream-redis:latest",
)


@pytest.fixture(scope="session")
def engine() -> object:
    """The Docker API client of the engine that answers (DOCKER_HOST)."""
    problem = engine_problem()
    if problem:
        pytest.fail(
            f"{problem}: `make test-containers` sets up podman's socket (infra/images/podman.sh)"
        )
    import docker
    from docker.errors import ImageNotFound

    client = docker.from_env()
    for image in IMAGES:
        try:
            client.images.get(image)
        except ImageNotFound:
            pytest.fail(f"{image} is missing: build the images with `make images`")
    return client
