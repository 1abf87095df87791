"""A deploy plan: the compose text a service runs and the components parsed from it, in
start order. Deploy methods (``ports.deploy``) answer with one; the deploy use cases
carry it out."""
from __future__ import annotations

from dataclasses import dataclass, field

from core.panel.containers import Healthcheck


@dataclass(frozen=True)
class Component:
    """One compose service: one container."""

    name: str
    image: str
    command: tuple | None = None
    environment: dict = field(default_factory=dict)
    ports: tuple = ()  # ports.runtime.PortSpec
    volumes: tuple = ()  # (volume name, mount path)
    depends_on: tuple = ()
    healthcheck: Healthcheck | None = None
    cpus: float | None = None  # compose ``cpus``
    memory_mb: int | None = None  # compose ``mem_limit``
    #: compose ``labels``, read by Slipway (``slipway.backup: postgres|mysql|redis``); not
    #: put on the container
    labels: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DeployPlan:
    compose: str  # the compose text, as kept on the service
    components: tuple  # Component, in start order (dependencies first)
    volumes: tuple = ()  # named volumes the components mount
    variables: dict = field(default_factory=dict)
    template_id: str | None = None
    #: where the source comes from, as the method read it (``git_url``, ``git_branch``): the
    #: service keeps those of the method's ``source_fields`` (``core.panel.capabilities.source_of``)
    source: dict = field(default_factory=dict)
    #: the names of ``variables`` that are secret (a template's ``secret: true`` ones)
    secrets: tuple = ()
