"""Container runtime ``podman``: Slipway's containers on a Podman API service, through podman-py.

Selected with ``SLIPWAY_RUNTIME=podman`` (the default); ``SLIPWAY_RUNTIME_URL`` is the
service's socket, e.g. ``unix:///run/podman/podman.sock`` (without one, podman-py's default:
``CONTAINER_HOST`` or the user's socket). ``SLIPWAY_RUNTIME_ULIMITS`` sets ulimits on every
container (see :mod:`plugins.runtime_common`).
"""
from __future__ import annotations

from plugins.runtime_common import ulimits_from_environment
from plugins.runtime_podman.runtime import PodmanRuntime
from ports import hookimpl


class PodmanFactory:
    name = "podman"

    def create(self, url: str | None = None, *, ulimits=None) -> PodmanRuntime:
        """``ulimits``: ``"name=soft[:hard],..."`` or parsed tuples; default from the environment."""
        return PodmanRuntime(url, ulimits=ulimits_from_environment(ulimits))


@hookimpl
def register_runtimes():
    return [PodmanFactory()]
