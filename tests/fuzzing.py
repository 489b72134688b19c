"""The two ways property-based and schema fuzz tests run (docs/operations.md, "Fuzzing").

`make test` loads the `gate` profile: derandomised, so every run tries the same examples and
the gate never turns on chance. `make fuzz` sets MEMSTREAM_FUZZ=1, which loads the `fuzz`
profile: fresh random examples every run, FUZZ_FACTOR times as many, failures kept in
`.hypothesis/` and printed with a seed to reproduce. A failure it finds is fixed and then added
to the test as an explicit `@example`, so the gate tries it on every run from then on.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["FUZZING", "examples", "load_profile"]

FUZZING = os.environ.get("MEMSTREAM_FUZZ", "") not in ("", "0")
# How many times more examples each test tries under `make fuzz` than in the gate.
FUZZ_FACTOR = int(os.environ.get("MEMSTREAM_FUZZ_FACTOR", "20"))

settings.register_profile(
    "gate",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "fuzz",
    derandomize=False,
    # For tests that do not set their own count (hypothesis's default is 100).
    max_examples=100 * FUZZ_FACTOR,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def load_profile() -> str:
    """Loads this run's profile (tests/conftest.py does, before any test is collected)."""
    name = "fuzz" if FUZZING else "gate"
    settings.load_profile(name)
    return name


def examples(gate: int) -> int:
    """How many examples a test tries: `gate` in `make test`, FUZZ_FACTOR times that in
    `make fuzz`."""
    return gate * FUZZ_FACTOR if FUZZING else gate
