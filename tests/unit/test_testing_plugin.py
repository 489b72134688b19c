"""The pytest plugin's choices, in pytests of their own (pytester): a wrong backend and a
missing engine are refused before any test runs, saying what to do; tenants are fresh."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(autouse=True)
def _ini(pytester: pytest.Pytester) -> None:
    # pytest-asyncio, loaded in the inner pytests too, warns when this is unset.
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")


def test_an_unknown_backend_is_refused_naming_the_known_ones(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_it(memstream_stack):\n    pass\n")
    result = pytester.runpytest("--memstream-backend=cloud")
    assert result.ret != 0
    result.stdout.re_match_lines(
        [".*--memstream-backend='cloud': use one of auto, containers, local"]
    )


def test_containers_without_an_engine_are_refused_saying_so(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")
    pytester.makepyfile("def test_it(memstream_stack):\n    pass\n")
    result = pytester.runpytest("--memstream-backend=containers")
    assert result.ret != 0
    result.stdout.re_match_lines(
        [".*--memstream-backend=containers: no container engine answers.*"]
    )


def test_each_test_gets_a_tenant_of_its_own(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        seen = []

        def test_one(memstream_tenant):
            seen.append(memstream_tenant)

        def test_two(memstream_tenant):
            seen.append(memstream_tenant)
            assert len(set(seen)) == 2 and all(t.startswith("tenant-") for t in seen)
        """
    )
    pytester.runpytest().assert_outcomes(passed=2)
