"""Feeds a reverse proxy from the route records: with ``SLIPWAY_ROUTES_FILE`` set, the
server keeps that file equal to the route table, in the dynamic-configuration format of
Traefik's file provider (which watches the file and reloads on change). Every
``SLIPWAY_ROUTES_INTERVAL`` seconds it reads the table and, when the content changed,
writes the file atomically (a temporary file renamed over it), so the proxy never reads
a half-written file. Reading the table rather than being told of changes means a route
written by any Slipway process sharing the database reaches the file."""
from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from pathlib import Path

import yaml

from app.workers.loop import Background
from core.panel.routes import list_routes

log = logging.getLogger("slipway.routes")


def render(routes) -> str:
    routers, services = {}, {}
    for route in routes:
        name = "slw-" + route.hostname.replace(".", "-")
        routers[name] = {"rule": f"Host(`{route.hostname}`)", "service": name, "tls": {}}
        services[name] = {"loadBalancer": {"servers": [{"url": route.target}]}}
    document = {"http": {"routers": routers, "services": services}} if routes else {}
    return "# written by Slipway from its route records; do not edit\n" + yaml.safe_dump(document, sort_keys=True)


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class RouteFile(Background):
    def __init__(self, store, path: str, interval: float = 2.0):
        self.store, self.path, self.interval = store, Path(path), interval
        self._written: str | None = None

    def sync(self) -> bool:
        """Write the file if the table changed; returns whether it wrote (blocking)."""
        text = render(list_routes(self.store.uow(write=False)))
        if text == self._written and self.path.exists():
            return False
        write_atomically(self.path, text)
        self._written = text
        return True

    def tasks(self) -> dict:
        return {"route-file": self._run}

    async def _run(self) -> None:
        while True:
            try:
                if await self.store.run(self.sync):
                    log.info("route file %s rewritten", self.path)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("could not write the route file %s", self.path)
            await asyncio.sleep(self.interval)
