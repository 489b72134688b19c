"""`memstream bench`: speed and quality of memstream, each figure beside a raw baseline.

The distribution memstream-bench, apart from the product: memstream finds the `bench` command
through its `memstream.commands` entry point (`cli`). One module per measurement (recall,
freshness, throughput, replay, locomo), with what they share kept once: statistics and
progress (`stats`), a fresh namespace with its own worker and its clean-up (`harness`), the
raw pipelines the speed figures are compared with (`raw`; their Redis calls: `raw_redis`), the
corpus of conversational text they send (`corpus`), the in-process retrieval baselines
(`baselines`), and the results folder (`report`). Nothing here runs in the test suite's
timing: speed is measured by the bench, never asserted.
"""
