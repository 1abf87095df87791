"""Container runtime ``podman``: Slipway's containers on a Podman API service, through podman-py.

Selected with ``SLIPWAY_RUNTIME=podman`` (the default); ``SLIPWAY_RUNTIME_URL`` is the
service's socket, e.g. ``unix:///run/podman/podman.sock`` (without one, podman-py's default:
``CONTAINER_HOST`` or the user's socket). ``SLIPWAY_RUNTIME_ULIMITS`` sets ulimits on every
container; the publish address, host port range, pids, memory and CPU defaults and the pull
time limit come from :mod:`plugins.runtime_common.settings`.
"""
from __future__ import annotations

from plugins.runtime_common import ulimits_from_environment
from plugins.runtime_common.settings import RuntimeSettings
from plugins.runtime_podman.runtime import PodmanRuntime
from ports import hookimpl


class PodmanFactory:
    name = "podman"

    def create(self, url: str | None = None, *, ulimits=None, settings=None) -> PodmanRuntime:
        """``ulimits``: ``"name=soft[:hard],..."`` or parsed tuples; default from the environment.
        ``settings``: the mapping the ``SLIPWAY_*`` runtime variables are read from (default
        the environment); a bad value is a ``ValueError`` naming the variable."""
        return PodmanRuntime(url, ulimits=ulimits_from_environment(ulimits), settings=RuntimeSettings.read(settings))


@hookimpl
def register_runtimes():
    return [PodmanFactory()]
