"""memstream for users' own test suites: a running memstream (Kafka, Redis, a worker,
optionally the server) per pytest session, in containers when an engine answers and from the
local binaries otherwise.

The pytest plugin (`memstream.testing.plugin`) registers itself through the `pytest11` entry
point `memstream`: installing memstream with the `testing` extra is all a suite needs before
asking for the `memstream_stack` fixture (docs/integrations.md). A suite without services asks
for `memstream_memory` instead, a deployment whose projection lives in the test's process
(MEMSTREAM_BACKEND=memory), and `project`s events into it as the worker would
(`memstream.testing.memory`).
"""

from memstream.testing.memory import aproject, memory_deployment, project
from memstream.testing.stack import Images, MemstreamStack, wait_until_recallable

__all__ = [
    "Images",
    "MemstreamStack",
    "aproject",
    "memory_deployment",
    "project",
    "wait_until_recallable",
]
