"""The in-memory projection backend (MEMSTREAM_BACKEND=memory): the whole projection in this
process's memory, for tests and for embedding memstream without Redis.

`backend.InMemoryProjection` implements `memstream.backends.ProjectionBackend` with the Redis
projection's semantics (the backend contract suite, tests/contract/backend_contract.py, runs
on both). Its state is per namespace in this process: two deployments of one namespace in one
process share it, as two clients of one Redis do, but another process sees none of it, so a
worker in another process cannot feed it (`memstream.testing.memory` applies events in the
process instead).
"""
