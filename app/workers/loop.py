"""Background work inside the server: tasks on its event loop, started by the ASGI
lifespan and cancelled at shutdown (the deploy and backup workers, the billing
recompute, the route file).

A subclass names its tasks in ``tasks()``. Queue workers wait with ``idle(seconds)``,
which returns early when ``wake()`` is called (from any thread) because a job was queued.
"""
from __future__ import annotations

import asyncio
import contextlib
import threading


class Background:
    _tasks: list = []
    _wake: asyncio.Event | None = None
    _loop = None

    def tasks(self) -> dict:
        """``{task name: coroutine function}`` to run while the server runs."""
        raise NotImplementedError

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._tasks = [self._loop.create_task(run(), name=name) for name, run in self.tasks().items()]

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass

    def wake(self) -> None:
        """Work was queued: the waiting worker looks now rather than at its next poll."""
        if self._wake is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def idle(self, seconds: float) -> None:
        """Wait ``seconds``, or less if ``wake()`` is called meanwhile."""
        self._wake.clear()
        try:
            await asyncio.wait_for(self._wake.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass


class WorkerLease(Background):
    """This process's worker lease (``core.panel.leases``): touched every ``HEARTBEAT_S``
    seconds while the server runs, dropped at a clean shutdown. The job workers claim jobs
    under its id and, every ``RECOVER_S`` seconds, take back jobs whose owner's lease
    went stale."""

    RECOVER_S = 30.0

    def __init__(self, store, clock):
        from core.panel import leases

        self.store, self.clock, self.leases = store, clock, leases
        self.id = leases.new_worker_id()
        self._held = False
        self._working = 0  # jobs running in engine threads right now
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def working(self):
        """Around a job, in the thread that runs it (a cancelled await does not stop it)."""
        with self._lock:
            self._working += 1
        try:
            yield
        finally:
            with self._lock:
                self._working -= 1

    def tasks(self) -> dict:
        return {"worker-lease": self._beat}

    async def hold(self) -> str:
        """Make sure the lease is written before the first job is claimed; returns the id."""
        if not self._held:
            await self.store.run(self.leases.beat, self.store.uow(), self.clock, self.id)
            self._held = True
        return self.id

    async def _beat(self) -> None:
        import logging

        while True:
            try:
                await self.store.run(self.leases.beat, self.store.uow(), self.clock, self.id)
                self._held = True
            except asyncio.CancelledError:
                raise
            except Exception:  # the next beat tries again; STALE_S leaves room for a few misses
                logging.getLogger("slipway.workers").exception("could not renew the worker lease")
            await asyncio.sleep(self.leases.HEARTBEAT_S)

    async def stop(self) -> None:
        await super().stop()
        with self._lock:
            busy = self._working
        if self._held and not busy:  # a job still running in a thread keeps the lease until it goes stale
            try:
                await self.store.run(self.leases.retire, self.store.uow(), self.id)
            except Exception:  # noqa: BLE001 - it goes stale on its own
                pass
            self._held = False


class JobWorker(Background):
    """A queue of jobs worked up to ``concurrency`` at a time: under the process's worker
    lease it takes back jobs stopped processes left (at start-up and every
    ``RECOVER_S``), claims the oldest queued job while it has a free slot and runs it on
    the engine-call threads (``calls``), off the event loop (the pool must have at least
    ``concurrency`` threads). Subclasses give ``recover()`` and ``claim(owner)``
    (database work, blocking; ``claim`` may pass a job over, e.g. a customer at its
    limit) and ``work(job)`` (blocking, in an engine thread); ``starting()`` runs once
    before the first claim."""

    name = "jobs"
    poll_s = 1.0
    concurrency = 1
    store = clock = calls = lease = None  # calls: the EngineCalls pool jobs run on

    def tasks(self) -> dict:
        return {f"{self.name}-jobs": self._jobs}

    def recover(self) -> list:
        raise NotImplementedError

    def claim(self, owner):
        raise NotImplementedError

    def work(self, job) -> None:
        raise NotImplementedError

    async def starting(self) -> None:
        pass

    async def _recover(self) -> None:
        import logging

        try:
            # on the job threads: a recovery may reach the outside (a stopped backup's partial
            # upload aborted at its destination), never on a database thread (core.waits)
            taken = await (self.calls.run(self.recover) if self.calls is not None else self.store.run(self.recover))
            if taken:
                logging.getLogger(f"slipway.{self.name}").warning(
                    "took back %d %s job(s) a stopped process left: %s", len(taken), self.name, ", ".join(taken))
        except Exception:  # the next round tries again
            logging.getLogger(f"slipway.{self.name}").exception("could not recover interrupted %s jobs", self.name)

    def _work(self, job) -> None:
        with self.lease.working() if self.lease is not None else contextlib.nullcontext():
            self.work(job)

    async def _run(self, job) -> None:
        import logging

        try:
            await self.calls.run(self._work, job)
        except asyncio.CancelledError:  # shutdown: the thread finishes the job; the lease stays meanwhile
            raise
        except Exception:
            logging.getLogger(f"slipway.{self.name}").exception("%s job %s failed", self.name,
                                                                getattr(job, "id", job))

    async def _pause(self, running: set) -> None:
        """Until a job is queued (``wake``), a running one ends, or ``poll_s`` passed."""
        self._wake.clear()
        woken = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({woken, *running}, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            woken.cancel()

    async def _jobs(self) -> None:
        import logging

        loop = asyncio.get_running_loop()
        owner = await self.lease.hold() if self.lease is not None else None
        await self._recover()
        recovered_at = loop.time()
        await self.starting()
        running: set = set()
        try:
            while True:
                try:
                    if self.lease is not None and loop.time() - recovered_at > self.lease.RECOVER_S:
                        recovered_at = loop.time()
                        await self._recover()  # jobs of another process that stopped meanwhile
                    while len(running) < self.concurrency:
                        job = await self.store.run(self.claim, owner)
                        if job is None:
                            break
                        task = loop.create_task(self._run(job), name=f"{self.name}-job")
                        running.add(task)
                        task.add_done_callback(running.discard)
                    await self._pause(running)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logging.getLogger(f"slipway.{self.name}").exception("%s worker round failed", self.name)
                    await asyncio.sleep(self.poll_s)
        finally:
            for task in list(running):
                task.cancel()
