"""Container runtime ``swarm``: Slipway's containers as Docker Swarm services, through docker-py.

Selected with ``SLIPWAY_RUNTIME=swarm``; ``SLIPWAY_RUNTIME_URL`` names a manager node's
engine, e.g. ``unix:///var/run/docker.sock`` or ``tcp://manager:2376`` (without one,
docker-py's default from ``DOCKER_HOST``). Each container of the port is a one-replica
Swarm service of the same name (its id is the Swarm service id); each network is an
overlay network; images are built and tagged on the manager. Components with a volume,
and components whose image only the manager holds (``localhost/...``, what Slipway
builds), are placed on the manager node; the others go wherever Swarm schedules them.
See :mod:`plugins.runtime_swarm.runtime` for what differs from one engine.
"""
from __future__ import annotations

from plugins.runtime_common import SETTINGS, runtime_arguments
from plugins.runtime_swarm.runtime import SwarmRuntime
from ports import hookimpl

__all__ = ["SETTINGS"]  # the runtime settings (plugins.runtime_common.settings), declared there


class SwarmFactory:
    name = "swarm"

    def create(self, settings) -> SwarmRuntime:
        """The runtime on the engine of ``SLIPWAY_RUNTIME_URL``, with ``SLIPWAY_RUNTIME_ULIMITS``
        and the other runtime settings of ``settings`` (``runtime_arguments``)."""
        return SwarmRuntime(**runtime_arguments(settings))


@hookimpl
def register_runtimes():
    return [SwarmFactory()]
