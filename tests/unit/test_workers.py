"""Worker threads: results and errors come back to the awaiting coroutine, off the loop."""
import asyncio
import threading

import pytest

from app.storage.workers import WorkerThreads


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
