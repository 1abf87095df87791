"""Threads for container-engine calls, apart from the database workers.

Engine calls can take seconds (stats sample for half a second, a deploy waits for
healthchecks); on the database workers they would hold up every request queued behind
them, so they get a pool of their own.

Calls made for an HTTP request also get a deadline (``SLIPWAY_ENGINE_TIMEOUT``): an engine
that accepts connections but does not answer gives the client a 503 naming the timeout,
never a request that hangs. (The engine clients themselves wait without limit: a build
or a pull may legitimately be silent for minutes.) Requests and background jobs use
separate pools, so jobs stuck on such an engine cannot take the threads requests need.

Fairness between tenants (docs/decisions.md "Tenant safety": one customer's slow engine
operations never hold up other customers' requests): :meth:`EngineCalls.run_for` runs a
call on behalf of a tenant (a customer, or an operator's key), and one tenant holds at
most ``per_tenant`` of the pool's threads at once. Its further calls wait for one of its
own to finish without holding a thread (an ``asyncio`` wait), within the same deadline.
A thread counts as held until its call returns, also when the request that made it gave
up at the deadline: a call stuck in the engine keeps counting against its tenant, never
against the others.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor

from ports.runtime import EngineError

#: threads of the request pool, by default; ``SLIPWAY_ENGINE_THREADS`` sets it
REQUEST_THREADS = 32


class _Share:
    """One tenant's threads: a semaphore, the threads it holds, and the calls of it
    waiting or running."""

    __slots__ = ("semaphore", "held", "users")

    def __init__(self, size: int):
        self.semaphore = asyncio.Semaphore(size)
        self.held = 0
        self.users = 0


class CallTimedOut(EngineError):
    """A call did not answer within its pool's deadline."""


class EngineCalls:
    def __init__(self, threads: int = 8, deadline: float | None = None, name: str = "slipway-engine",
                 per_tenant: int | None = None,
                 late: str = "the container engine did not answer within {deadline:g} s (SLIPWAY_ENGINE_TIMEOUT)"):
        """``per_tenant``: threads one tenant may hold at once in :meth:`run_for` (default
        a quarter of ``threads``, at least 1); ``late``: what a call past the deadline
        says (:class:`CallTimedOut`)."""
        self.deadline, self.late = deadline, late
        self.threads = threads
        self.per_tenant = per_tenant or max(1, threads // 4)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._shares: dict = {}

    async def run(self, fn, *args, **kwargs):
        """Run ``fn`` on the pool (no tenant: not limited to a share)."""
        loop = asyncio.get_running_loop()
        call = loop.run_in_executor(self._pool, functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
        if self.deadline is None:
            return await call
        try:
            return await asyncio.wait_for(call, timeout=self.deadline)
        except asyncio.TimeoutError:
            raise self._timed_out() from None

    def held(self, tenant) -> int:
        """Threads ``tenant`` holds now (for tests and diagnostics)."""
        share = self._shares.get(tenant)
        return share.held if share else 0

    async def run_for(self, tenant, fn, *args, **kwargs):
        """Run ``fn`` on the pool on behalf of ``tenant``, holding at most
        ``per_tenant`` threads for it at once."""
        loop = asyncio.get_running_loop()
        end = None if self.deadline is None else loop.time() + self.deadline
        share = self._shares.get(tenant)
        if share is None:
            share = self._shares[tenant] = _Share(self.per_tenant)
        share.users += 1
        try:
            if not await self._acquire(share, end, loop):
                raise self._timed_out(" (earlier calls of the same customer, key or plugin are still running)")
            share.held += 1
            try:
                future = self._pool.submit(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
            except BaseException:
                self._release(tenant, share)
                raise
            # the thread is given back when its call returns, not when the request stops
            # waiting for it
            future.add_done_callback(lambda _: _soon(loop, self._release, tenant, share))
            try:
                return await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)),
                                              timeout=None if end is None else max(0.0, end - loop.time()))
            except asyncio.TimeoutError:
                future.cancel()  # not started yet: it never runs (and gives its thread back)
                raise self._timed_out() from None
        finally:
            share.users -= 1
            self._forget(tenant, share)

    @staticmethod
    async def _acquire(share: _Share, end, loop) -> bool:
        """Wait (without a thread) for a place in ``share`` until ``end``; a place taken
        after the wait was given up (time out, request cancelled) is given back."""
        waiter = asyncio.ensure_future(share.semaphore.acquire())
        try:
            await asyncio.wait_for(asyncio.shield(waiter),
                                   timeout=None if end is None else max(0.0, end - loop.time()))
            return True
        except (asyncio.TimeoutError, asyncio.CancelledError) as exc:
            def give_back(task):
                if not task.cancelled() and task.exception() is None:
                    share.semaphore.release()

            if waiter.done():
                give_back(waiter)
            else:
                waiter.cancel()
                waiter.add_done_callback(give_back)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return False

    def _release(self, tenant, share: _Share) -> None:
        share.held -= 1
        share.semaphore.release()
        self._forget(tenant, share)

    def _forget(self, tenant, share: _Share) -> None:
        # a tenant with no call running or waiting leaves nothing behind
        if share.users == 0 and share.held == 0 and self._shares.get(tenant) is share:
            del self._shares[tenant]

    def _timed_out(self, why: str = "") -> CallTimedOut:
        return CallTimedOut(self.late.format(deadline=self.deadline) + why)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _soon(loop, fn, *args) -> None:
    """Call ``fn`` on ``loop`` from a pool thread (nothing to do once it is closed)."""
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass
