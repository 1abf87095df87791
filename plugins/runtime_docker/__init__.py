"""Container runtime ``docker``: Slipway's containers on a Docker API engine, through docker-py.

Selected with ``SLIPWAY_RUNTIME=docker``; ``SLIPWAY_RUNTIME_URL`` is the engine's socket, e.g.
``unix:///var/run/docker.sock`` (without one, docker-py's default from ``DOCKER_HOST``).
Podman's Docker-compatible API works too (the runtime notices and uses Podman's own
endpoint to run healthchecks it would otherwise never run). ``SLIPWAY_RUNTIME_ULIMITS``
sets ulimits on every container; the publish address, host port range, pids, memory and
CPU defaults and the pull time limit come from :mod:`plugins.runtime_common.settings`.
"""
from __future__ import annotations

from plugins.runtime_common import ulimits_from_environment
from plugins.runtime_common.settings import RuntimeSettings
from plugins.runtime_common.docker_api import DockerRuntime
from ports import hookimpl


class DockerFactory:
    name = "docker"

    def create(self, url: str | None = None, *, ulimits=None, settings=None) -> DockerRuntime:
        """``ulimits``: ``"name=soft[:hard],..."`` or parsed tuples; default from the environment.
        ``settings``: the mapping the ``SLIPWAY_*`` runtime variables are read from (default
        the environment); a bad value is a ``ValueError`` naming the variable."""
        return DockerRuntime(url, ulimits=ulimits_from_environment(ulimits), settings=RuntimeSettings.read(settings))


@hookimpl
def register_runtimes():
    return [DockerFactory()]
