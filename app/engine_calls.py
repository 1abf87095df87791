"""Threads for container-engine calls, apart from the database workers.

Engine calls can take seconds (stats sample for half a second, a deploy waits for
healthchecks); on the database workers they would hold up every request queued behind
them, so they get a pool of their own.
"""
from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor


class EngineCalls:
    def __init__(self, threads: int = 8):
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="slipway-engine")

    async def run(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
