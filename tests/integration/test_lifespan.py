"""The ASGI lifespan of the app (app.factory.Lifespan): start-up starts the background
jobs, shutdown stops them and, for a store the app made itself, closes it."""
import asyncio

from app.config import Config
from app.factory import create_app


async def _lifespan(app) -> list[str]:
    """Drive one lifespan (start-up, then shutdown) as an ASGI server does; the messages sent back."""
    inbox, sent = asyncio.Queue(), []
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        inbox.put_nowait({"type": kind})

    async def receive():
        return await inbox.get()

    async def send(message):
        sent.append(message["type"])

    await asyncio.wait_for(app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send), 60)
    return sent


def test_shutdown_stops_the_jobs_and_closes_the_store_it_made(store, clock):
    app = create_app(Config(database_url=store.url, clock=clock, billing_interval=0, deploy_worker=False))
    own, lifespan = app.parts.store, app.lifespan
    assert own is not store  # made by the app: the app's to close
    assert lifespan.jobs, "the bus and the realtime hub at least"
    calls = []
    for job in lifespan.jobs:
        for name in ("start", "stop"):
            method = getattr(job, name)

            def recorded(*args, _method=method, _name=name, _job=job):
                calls.append((_name, _job))
                return _method(*args)

            setattr(job, name, recorded)
    assert asyncio.run(_lifespan(app)) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert calls == [("start", job) for job in lifespan.jobs] + [("stop", job) for job in lifespan.jobs]
    assert own._workers is None and own.db.is_closed()
    assert own.closed  # what is given back from now on is closed


def test_a_store_handed_in_is_left_open(store, clock):
    app = create_app(Config(database_url=store.url, clock=clock, billing_interval=0, deploy_worker=False),
                     store=store)
    assert asyncio.run(_lifespan(app)) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert not store.closed  # still the caller's, still pooling


def test_the_jobs_follow_the_order_jobs_declares(store, clock):
    from app.composition import JOBS, Composition

    parts = Composition(Config(database_url=store.url, clock=clock, billing_interval=3600, deploy_worker=True),
                        store=store)
    try:
        jobs = parts.jobs()
        order = [name for name in JOBS if getattr(parts, name, None) is not None]
        assert jobs == [getattr(parts, name) for name in order]
        assert {"billing_recompute", "deployer", "backup_worker", "lease", "hub", "bus", "rates"} <= set(order)
        workers = [order.index(name) for name in Composition.WORKER_JOBS - {"lease"} if name in order]
        # the lease goes after every worker stopped; the hub and the bus after every job that
        # publishes; the rate store's connections last
        assert order.index("lease") > max(workers)
        assert order.index("hub") > order.index("lease") and order[-2:] == ["bus", "rates"]
    finally:
        parts.close()
