"""Feeds a reverse proxy from the proxy route records through the route provider
``SLIPWAY_ROUTES`` names (``ports.routes``; ``file``: a Traefik file, ``caddy``: Caddy's
admin API). Every ``SLIPWAY_ROUTES_INTERVAL`` seconds it reads the table and hands every
record to the provider, which changes the proxy only where it differs. Reading the
table rather than being told of changes means a route written by any Slipway process
sharing the database reaches the proxy. ``sync()`` does the same at once, blocking: the
deploy worker calls it after it switched a service's records, before it stops the old
containers (one sync at a time, from any thread)."""
from __future__ import annotations

import asyncio
import logging
import threading

from app.workers.loop import Background
from core.panel.routes import list_routes

log = logging.getLogger("slipway.routes")


class ProxyRouteSync(Background):
    def __init__(self, store, provider, interval: float = 2.0):
        self.store, self.provider, self.interval = store, provider, interval
        self._lock = threading.Lock()

    def sync(self) -> bool:
        """Bring the proxy up to date with the records now; whether it changed anything."""
        with self._lock:
            return self.provider.sync(list_routes(self.store.uow(write=False)))

    def sync_now(self) -> None:
        """``sync()`` for the deploy worker: a failure is logged, not raised (the periodic
        sync tries again)."""
        try:
            self.sync()
        except Exception:
            log.exception("could not bring %s up to date", self.provider)

    def tasks(self) -> dict:
        return {"routes": self._run}

    async def _run(self) -> None:
        while True:
            try:
                # a thread of its own, not a database thread: the push reaches the proxy's
                # admin API, which may hang (core.waits)
                if await asyncio.to_thread(self.sync):
                    log.info("%s brought up to date with the route records", self.provider)
            except asyncio.CancelledError:
                raise
            except Exception:  # Caddy down, a file not writable: tried again
                log.exception("could not bring %s up to date", self.provider)
            await asyncio.sleep(self.interval)


def reserved_hosts(config) -> tuple:
    """The hosts Slipway answers on or talks to, refused as custom domains (with the names
    under them): the host of ``SLIPWAY_PUBLIC_URL`` and the host of ``SLIPWAY_CADDY_ADMIN``."""
    from urllib.parse import urlsplit

    hosts = []
    for url in (getattr(config, "public_url", None), getattr(config, "caddy_admin", None)):
        try:
            host = urlsplit(url or "").hostname
        except ValueError:
            host = None
        if host:
            hosts.append(host.strip(".").lower())
    return tuple(hosts)
