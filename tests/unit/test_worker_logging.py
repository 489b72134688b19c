"""What a worker's log level lets through: nothing below it is even built."""

from __future__ import annotations

import logging

import faust

from memstream.streams.worker import _DeadlinedWorker


def test_a_quiet_worker_leaves_the_root_loggers_level_where_it_was_set() -> None:
    # faust's terminal spinner set the root logger to DEBUG at --loglevel warning, so every
    # library built its debug records (aiokafka's, a few a fetch) for the spinner to drop.
    worker = _DeadlinedWorker(faust.App("probe", broker="kafka://127.0.0.1:1"), loglevel="warning")
    root = logging.Logger("root", logging.WARNING)
    root.addHandler(logging.NullHandler())
    worker.on_setup_root_logger(root, logging.WARNING)
    assert root.level == logging.WARNING
    assert not root.isEnabledFor(logging.DEBUG)
    assert len(root.handlers) == 1
