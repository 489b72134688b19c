"""`memstream worker` whose Faust consumer stops handing over messages once it has handed over
MEMSTREAM_TEST_STALL_AFTER of them: the stall faust-streaming's consumer can have after a
broker comes back (streams.stall), made to happen. Run as a script, with the worker's
arguments."""

import asyncio
import os
import sys
from typing import Any

import faust.transport.consumer

from memstream.cli.main import main

_STALL_AFTER = int(os.environ["MEMSTREAM_TEST_STALL_AFTER"])
_consumer: Any = faust.transport.consumer.Consumer
_wait_next_records = _consumer._wait_next_records
_handed = 0


async def _stalling(self: Any, timeout: float) -> Any:  # noqa: ASYNC109 - faust's signature
    global _handed
    if _handed >= _STALL_AFTER:
        await asyncio.Event().wait()  # as faust's fetcher waits for a flow nobody resumes
    records, active = await _wait_next_records(self, timeout)
    _handed += sum(len(batch) for batch in (records or {}).values())
    return records, active


_consumer._wait_next_records = _stalling
sys.exit(main())
