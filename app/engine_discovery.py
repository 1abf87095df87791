"""Which container engine Slipway deploys on, decided in one place (``Config.from_env``),
so ``slipway serve``'s first line, its log, ``/readyz`` and ``make run`` say the same.

``SLIPWAY_RUNTIME_URL`` set (even empty: no engine) is the operator's choice and wins:
no socket is looked for. Unset, the engine is found the way the ``podman`` and ``docker``
clients find theirs, first match wins:

1. ``CONTAINER_HOST`` (Podman's client) and then ``DOCKER_HOST`` (Docker's client);
2. rootless Podman: ``$XDG_RUNTIME_DIR/podman/podman.sock``;
3. rootful Podman: ``/run/podman/podman.sock``;
4. Docker: ``/var/run/docker.sock``.

A socket counts when it is a socket this user may read and write. The runtime plugin is
``SLIPWAY_RUNTIME`` when set, else ``docker`` for Docker's socket and ``DOCKER_HOST``,
``podman`` otherwise.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from app.config_table import RUNTIME, RUNTIME_URL

#: what to do when no engine is found (printed by ``slipway serve`` and ``make run``)
START_HINT = ("deploys need a container engine: start Podman's API socket "
              "(`systemctl --user start podman.socket`, or as root `systemctl start podman.socket`) "
              "or Docker (`systemctl start docker`), or name one in SLIPWAY_RUNTIME_URL "
              "(e.g. unix:///run/user/1000/podman/podman.sock)")

ROOTFUL_PODMAN = "/run/podman/podman.sock"
DOCKER_SOCKET = "/var/run/docker.sock"


@dataclass(frozen=True)
class Engine:
    """The engine deploys run on: ``url`` None means none (deploys fail until one is set);
    ``source`` says where the URL came from, in words an operator can act on."""

    runtime: str
    url: str | None
    source: str

    def describe(self) -> dict:
        """The ``engine`` of ``slipway serve``'s first line and ``make run``'s summary."""
        if self.url is None:
            return {"runtime": self.runtime, "url": None, "source": self.source, "hint": START_HINT}
        return {"runtime": self.runtime, "url": self.url, "source": self.source}


def _usable_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode) and os.access(path, os.R_OK | os.W_OK)
    except OSError:
        return False


def find_engine(environ) -> Engine:
    """The engine of ``environ`` (see the module's docstring for the order)."""
    chosen = RUNTIME.read(environ) if RUNTIME.given(environ) else ""
    if RUNTIME_URL.given(environ):  # set, even empty: the operator's choice
        url = RUNTIME_URL.read(environ)
        source = "SLIPWAY_RUNTIME_URL" if url else "SLIPWAY_RUNTIME_URL is empty: no engine"
        return Engine(chosen or RUNTIME.default, url, source)
    for variable, plugin in (("CONTAINER_HOST", "podman"), ("DOCKER_HOST", "docker")):
        url = (environ.get(variable) or "").strip()
        if url:
            return Engine(chosen or plugin, url, variable)
    candidates = []
    runtime_dir = (environ.get("XDG_RUNTIME_DIR") or "").strip()
    if runtime_dir:
        candidates.append((os.path.join(runtime_dir, "podman", "podman.sock"), "podman",
                           "the rootless Podman socket in $XDG_RUNTIME_DIR"))
    candidates += [(ROOTFUL_PODMAN, "podman", "the rootful Podman socket"),
                   (DOCKER_SOCKET, "docker", "the Docker socket")]
    for path, plugin, source in candidates:
        if _usable_socket(path):
            return Engine(chosen or plugin, f"unix://{path}", source)
    return Engine(chosen or RUNTIME.default, None, "no SLIPWAY_RUNTIME_URL, and no engine found")
