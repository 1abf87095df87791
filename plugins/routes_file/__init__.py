"""Route provider ``file``: with ``SLIPWAY_ROUTES_FILE`` set, that file is kept equal to
the route records, in the dynamic-configuration format of Traefik's file provider (which
watches the file and reloads on change): one router and one service per hostname. The
file is written only when its content changes, atomically (a temporary file renamed over
it), so the proxy never reads a half-written file."""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import yaml

from ports import hookimpl
from ports.routes import RouteProvider, RouteProviderFactory, usable

_HOST_CHARACTERS = re.compile(r"[a-z0-9.-]+")


def key(hostname: str) -> str:
    """The router and service name of ``hostname``: ``slw-`` and the host name with each
    ``.`` written ``_``. A host name is ``a-z``, ``0-9``, ``-`` and ``.`` only
    (``ports.routes.well_formed``), so ``_`` stands for the dot alone and two different
    host names never get one key: ``my.shop-apps.example.com`` is
    ``slw-my_shop-apps_example_com``, ``my-shop.apps.example.com``
    ``slw-my-shop_apps_example_com``. (Traefik refuses only ``@`` in a name.) Anything
    else is a ``ValueError``."""
    if not isinstance(hostname, str) or not _HOST_CHARACTERS.fullmatch(hostname):
        raise ValueError(f"not a host name: {hostname!r}")
    return "slw-" + hostname.replace(".", "_")


def render(routes) -> str:
    """The Traefik file for the well-formed records (``ports.routes.usable``): nothing
    but a host name goes into a ``Host(`...`)`` rule, each under a name of its own
    (``key``). The whole file is written each time, so routers of another naming (an
    earlier version's) are gone with the next write."""
    routes = usable(routes)
    routers, services = {}, {}
    for route in routes:
        name = key(route.hostname)
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
