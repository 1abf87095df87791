"""Container runtime ``podman``: Slipway's containers on a Podman API service, through podman-py.

Selected with ``SLIPWAY_RUNTIME=podman`` (the default); ``SLIPWAY_RUNTIME_URL`` is the
service's socket, e.g. ``unix:///run/podman/podman.sock`` (without one, podman-py's default:
``CONTAINER_HOST`` or the user's socket). ``SLIPWAY_RUNTIME_ULIMITS`` sets ulimits on every
container; the publish address, host port range, pids, memory and CPU defaults and the pull
time limit come from :mod:`plugins.runtime_common.settings`.
"""
from __future__ import annotations

from plugins.runtime_common import SETTINGS, runtime_arguments
from plugins.runtime_podman.runtime import PodmanRuntime
from ports import hookimpl

__all__ = ["SETTINGS"]  # the runtime settings (plugins.runtime_common.settings), declared there


class PodmanFactory:
    name = "podman"

    def create(self, settings) -> PodmanRuntime:
        """The runtime on the engine of ``SLIPWAY_RUNTIME_URL``, with ``SLIPWAY_RUNTIME_ULIMITS``
        and the other runtime settings of ``settings`` (``runtime_arguments``)."""
        return PodmanRuntime(**runtime_arguments(settings))


@hookimpl
def register_runtimes():
    return [PodmanFactory()]
