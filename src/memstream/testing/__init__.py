"""memstream for users' own test suites: a running memstream (Kafka, Redis, a worker,
optionally the server) per pytest session, in containers when an engine answers and from the
local binaries otherwise.

The pytest plugin (`memstream.testing.plugin`) registers itself through the `pytest11` entry
point `memstream`: installing memstream with the `testing` extra is all a suite needs before
asking for the `memstream_stack` fixture (docs/integrations.md).
"""

from memstream.testing.stack import Images, MemstreamStack, wait_until_recallable

__all__ = ["Images", "MemstreamStack", "wait_until_recallable"]
