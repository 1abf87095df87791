"""The request pool's fairness (``app.engine_calls.EngineCalls.run_for``): a tenant holds
at most its share of the threads, also past the deadline, and waits for more without
holding one; other tenants run meanwhile."""
from __future__ import annotations

import asyncio
import threading

import pytest

from app.engine_calls import EngineCalls
from ports.runtime import EngineError


def test_one_tenant_holds_at_most_its_share_and_others_run_meanwhile():
    engine = EngineCalls(threads=4, deadline=30, per_tenant=2)
    release = threading.Event()
    running = []

    def slow(i):
        running.append(i)
        release.wait(20)
        return i

    async def scenario():
        hogs = [asyncio.ensure_future(engine.run_for("a", slow, i)) for i in range(6)]
        while len(running) < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert sorted(running) == [0, 1] and engine.held("a") == 2  # the rest wait without a thread
        # another tenant gets a thread at once, and again, while "a" is stuck
        assert await engine.run_for("b", lambda: "b") == "b"
        assert await asyncio.gather(*(engine.run_for("c", lambda i=i: i) for i in range(5))) == [0, 1, 2, 3, 4]
        release.set()
        assert await asyncio.gather(*hogs) == [0, 1, 2, 3, 4, 5]
        await asyncio.sleep(0.05)
        assert engine._shares == {}  # nothing is kept for tenants that are done

    try:
        asyncio.run(scenario())
    finally:
        engine.close()


def test_a_call_past_the_deadline_keeps_its_thread_until_it_returns():
    engine = EngineCalls(threads=4, deadline=0.3, per_tenant=1)
    release = threading.Event()
    calls = []

    def stuck():
        calls.append("stuck")
        release.wait(20)

    async def scenario():
        with pytest.raises(EngineError, match="SLIPWAY_ENGINE_TIMEOUT"):
            await engine.run_for("a", stuck)
        assert engine.held("a") == 1  # the request gave up, the thread did not
        # the tenant's next call waits for that thread and gives up at its own deadline,
        # without ever running
        with pytest.raises(EngineError, match="still running"):
            await engine.run_for("a", lambda: calls.append("never"))
        assert await engine.run_for("b", lambda: "other") == "other"
        release.set()
        while engine.held("a"):
            await asyncio.sleep(0.01)
        assert await engine.run_for("a", lambda: "again") == "again"

    try:
        asyncio.run(scenario())
    finally:
        engine.close()
    assert calls == ["stuck"]


def test_a_cancelled_waiter_gives_its_place_back():
    engine = EngineCalls(threads=2, deadline=None, per_tenant=1)
    release = threading.Event()

    async def scenario():
        first = asyncio.ensure_future(engine.run_for("a", release.wait, 20))
        await asyncio.sleep(0.1)
        waiting = asyncio.ensure_future(engine.run_for("a", lambda: "never"))
        await asyncio.sleep(0.1)
        waiting.cancel()  # the client went away
        with pytest.raises(asyncio.CancelledError):
            await waiting
        release.set()
        await first
        assert await engine.run_for("a", lambda: "free") == "free"

    try:
        asyncio.run(scenario())
    finally:
        engine.close()


def test_the_default_share_is_a_quarter_of_the_pool():
    assert EngineCalls(threads=32).per_tenant == 8 and EngineCalls(threads=2).per_tenant == 1
