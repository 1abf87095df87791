"""Worker threads for blocking database work, handing results back to the event loop in
batches.

``ThreadPoolExecutor`` wakes the loop once per finished call; under load that wake-up
(a self-pipe write, a thread switch) costs more than a short query. Here each worker
takes one call at a time while any are queued and hands the finished results back with
one wake-up when the queue runs dry (or every 2 ms), so the event loop never blocks on
a query and the cost of crossing threads is shared by the requests that arrive together.
(On SQLite, the reads of ``Store.read`` run on the loop's own connection instead:
``app.storage.readpath``.)
"""
from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import threading
import time

from core import waits

#: results are handed back at least this often while a batch is still running
FLUSH_AFTER_SECONDS = 0.002


class WorkerThreads:
    def __init__(self, threads: int, name: str = "slipway-db"):
        self._queue: collections.deque = collections.deque()
        self._ready = threading.Condition()
        self._closing = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(threads)]
        for thread in self._threads:
            thread.start()

    async def run(self, fn, *args, **kwargs):
        """Run ``fn(*args, **kwargs)`` in a worker thread and await its result."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._ready:
            if self._closing:
                raise RuntimeError("worker threads are shut down")
            # the caller's context goes along (the request id of its log lines)
            self._queue.append((loop, future, functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)))
            self._ready.notify()
        return await future

    def shutdown(self) -> None:
        """Finish what is queued, then stop the threads."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        waits.database_thread()  # nothing that waits on the outside runs here (core.waits)
        done: dict = collections.defaultdict(list)
        started = time.perf_counter()
        while True:
            with self._ready:
                if not self._queue and done:
                    item = None  # nothing left to take: hand back what is finished first
                else:
                    while not self._queue and not self._closing:
                        self._ready.wait()
                    if not self._queue:
                        return
                    # one call at a time, so idle workers share a burst and nothing
                    # waits behind a slow call it was queued after
                    item = self._queue.popleft()
            if item is None:
                self._hand_back(done)
                done, started = collections.defaultdict(list), time.perf_counter()
                continue
            loop, future, call = item
            try:
                outcome = (True, call())
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, not lost
                outcome = (False, exc)
            done[loop].append((future, outcome))
            if time.perf_counter() - started > FLUSH_AFTER_SECONDS:
                self._hand_back(done)
                done, started = collections.defaultdict(list), time.perf_counter()

    @staticmethod
    def _hand_back(done: dict) -> None:
        for loop, results in done.items():
            try:
                loop.call_soon_threadsafe(_settle, results)
            except RuntimeError:  # the loop closed while we worked: nobody is waiting
                pass


def _settle(results) -> None:
    for future, (ok, value) in results:
        if future.cancelled():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
