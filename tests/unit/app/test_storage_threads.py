"""Worker threads: results and errors come back to the awaiting coroutine, off the loop."""
import asyncio
import threading

import pytest

from app.storage.threads import WorkerThreads


def test_results_errors_and_threads():
    workers = WorkerThreads(2)
    loop_thread = threading.get_ident()

    def square(x):
        assert threading.get_ident() != loop_thread  # never on the event loop's thread
        return x * x

    def fail():
        raise ValueError("boom")

    async def main():
        results = await asyncio.gather(*(workers.run(square, i) for i in range(200)))
        assert results == [i * i for i in range(200)]
        with pytest.raises(ValueError, match="boom"):
            await workers.run(fail)

    try:
        asyncio.run(main())
    finally:
        workers.shutdown()


def test_shutdown_refuses_new_work():
    workers = WorkerThreads(1)
    workers.shutdown()

    async def main():
        with pytest.raises(RuntimeError):
            await workers.run(lambda: 1)

    asyncio.run(main())


def test_a_slow_call_does_not_hold_up_calls_queued_after_it():
    import time

    workers = WorkerThreads(2)

    async def main():
        slow = asyncio.ensure_future(workers.run(time.sleep, 1.0))
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        assert await asyncio.gather(*(workers.run(lambda i=i: i) for i in range(20))) == list(range(20))
        waited = time.perf_counter() - started
        await slow
        return waited

    try:
        assert asyncio.run(main()) < 0.5  # served by the other worker, not after the sleep
    finally:
        workers.shutdown()
