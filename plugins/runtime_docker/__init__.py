"""Container runtime ``docker``: Slipway's containers on a Docker API engine, through docker-py.

Selected with ``SLIPWAY_RUNTIME=docker``; ``SLIPWAY_RUNTIME_URL`` is the engine's socket, e.g.
``unix:///var/run/docker.sock`` (without one, docker-py's default from ``DOCKER_HOST``).
Podman's Docker-compatible API works too (the runtime notices and uses Podman's own
endpoint to run healthchecks it would otherwise never run). ``SLIPWAY_RUNTIME_ULIMITS``
sets ulimits on every container; the publish address, host port range, pids, memory and
CPU defaults and the pull time limit come from :mod:`plugins.runtime_common.settings`.
"""
from __future__ import annotations

from plugins.runtime_common import SETTINGS, runtime_arguments
from plugins.runtime_common.docker_api import DockerRuntime
from ports import hookimpl

__all__ = ["SETTINGS"]  # the runtime settings (plugins.runtime_common.settings), declared there


class DockerFactory:
    name = "docker"

    def create(self, settings) -> DockerRuntime:
        """The runtime on the engine of ``SLIPWAY_RUNTIME_URL``, with ``SLIPWAY_RUNTIME_ULIMITS``
        and the other runtime settings of ``settings`` (``runtime_arguments``)."""
        return DockerRuntime(**runtime_arguments(settings))


@hookimpl
def register_runtimes():
    return [DockerFactory()]
