"""Route provider ``file``: with ``SLIPWAY_ROUTES_FILE`` set, that file is kept equal to
the route records, in the dynamic-configuration format of Traefik's file provider (which
watches the file and reloads on change): one router and one service per hostname. The
file is written only when its content changes, atomically (a temporary file renamed over
it), so the proxy never reads a half-written file."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import yaml

from ports import hookimpl
from ports.routes import RouteProvider, RouteProviderFactory, usable


def render(routes) -> str:
    """The Traefik file for the well-formed records (``ports.routes.usable``): nothing
    but a host name goes into a ``Host(`...`)`` rule."""
    routes = usable(routes)
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


class FileRoutes(RouteProvider):
    name = "file"

    def __init__(self, path: str):
        self.path = Path(path)
        self._written: str | None = None

    def sync(self, routes) -> bool:
        text = render(routes)
        if text == self._written and self.path.exists():
            return False
        try:  # another process (or an earlier run) may have written it already
            if self.path.read_text() == text:
                self._written = text
                return False
        except (OSError, UnicodeDecodeError):
            pass
        write_atomically(self.path, text)
        self._written = text
        return True

    def __str__(self) -> str:
        return f"route file {self.path}"


class FileRoutesFactory(RouteProviderFactory):
    name = "file"

    def create(self, settings):
        path = (settings.get("SLIPWAY_ROUTES_FILE") or "").strip()
        return FileRoutes(path) if path else None


@hookimpl
def register_route_providers():
    return [FileRoutesFactory()]
