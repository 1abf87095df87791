"""Threads for container-engine calls, apart from the database workers.

Engine calls can take seconds (stats sample for half a second, a deploy waits for
healthchecks); on the database workers they would hold up every request queued behind
them, so they get a pool of their own.

Calls made for an HTTP request also get a deadline (``SLIPWAY_ENGINE_TIMEOUT``): an engine
that accepts connections but does not answer gives the client a 503 naming the timeout,
never a request that hangs. (The engine clients themselves wait without limit: a build
or a pull may legitimately be silent for minutes.) Requests and background jobs use
separate pools, so jobs stuck on such an engine cannot take the threads requests need.
"""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor

from ports.runtime import EngineError


class EngineCalls:
    def __init__(self, threads: int = 8, deadline: float | None = None, name: str = "slipway-engine"):
        self.deadline = deadline
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    async def run(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
        if self.deadline is None:
            return await call
        try:
            return await asyncio.wait_for(call, timeout=self.deadline)
        except asyncio.TimeoutError:
            raise EngineError(f"the container engine did not answer within {self.deadline:g} s "
                              "(SLIPWAY_ENGINE_TIMEOUT)") from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
