"""What a deploy asks of a container engine, as plain values: container specs, ports,
healthchecks, and the labels that tie what the engine holds to a service. The runtime
port (``ports.runtime``) takes these; they live in core so the deploy use cases can build
them without depending on the port."""
from __future__ import annotations

from dataclasses import dataclass, field

SERVICE_LABEL = "slipway.service"
COMPONENT_LABEL = "slipway.component"
BUILT_IMAGES = "localhost/slw-"  # the images deploy methods build are named under this
JOB_LABEL = "slipway.job"  # the deploy job that started a container (its release's set)
#: what a container of a host-port take-back is named after its component's
#: (``core.panel.deploy_job.take_back_ports``): the job's set holds both for a moment
TAKE_BACK_SUFFIX = "-k"
KEPT_IMAGES = "localhost/slw-keep-"  # the tags that keep the images of a service's releases


class NotInEngine(Exception):
    """What an engine call named (a container, network, volume or image) is not, or no
    longer, in the engine. The runtime port's ``Gone`` is one: the deploy use cases catch
    it by this name, without depending on the port."""


def taken_back(states) -> list:
    """Of ``states`` (one job's containers), those a take-back of the host ports replaced:
    a component that has a container named with :data:`TAKE_BACK_SUFFIX` is served by
    that one; its others are on their way out (removed with the old set)."""
    named = {s.labels.get(COMPONENT_LABEL) for s in states if s.name.endswith(TAKE_BACK_SUFFIX)}
    return [s for s in states if s.labels.get(COMPONENT_LABEL) in named and not s.name.endswith(TAKE_BACK_SUFFIX)]


def keep_tag(service_id: str, number: int, component: str) -> str:
    """The tag under which release ``number`` of ``service_id`` keeps ``component``'s image."""
    return f"{KEPT_IMAGES}{service_id.lower()}:{number}-{component.lower()}"[:255]


def built_image_prefix(service_id: str) -> str:
    """What the names of the images built for ``service_id`` start with: a service runs
    only its own builds (another's may hold that tenant's code and secrets)."""
    return f"{BUILT_IMAGES}{service_id.lower()}-"


@dataclass(frozen=True)
class Healthcheck:
    test: tuple  # e.g. ("CMD", "wget", "-q", "-O", "-", "http://127.0.0.1:8080/") or ("CMD-SHELL", "...")
    interval_s: float = 30.0
    timeout_s: float = 30.0
    retries: int = 3
    start_period_s: float = 0.0


@dataclass(frozen=True)
class PortSpec:
    container_port: int
    host_port: int | None = None  # None: the runtime picks a free one (SLIPWAY_HOST_PORTS)
    protocol: str = "tcp"
    #: with no ``host_port``: the one to take when it is free (the port the component kept
    #: from its last deploy, ``core.panel.deploy_job``); otherwise one is picked
    prefer: int | None = None


@dataclass(frozen=True)
class ContainerSpec:
    name: str  # the engine's container name
    image: str
    labels: dict
    command: tuple | None = None
    environment: dict = field(default_factory=dict)
    ports: tuple = ()  # PortSpec
    volumes: tuple = ()  # (volume name, mount path)
    network: str | None = None
    aliases: tuple = ()  # names other containers of the network reach it by
    #: further networks it joins, each ``(network name, aliases)`` (its customer's network)
    networks: tuple = ()
    healthcheck: Healthcheck | None = None
    cpus: float | None = None  # CPU limit in cores (compose ``cpus``); None: the runtime's SLIPWAY_DEFAULT_CPUS
    memory_mb: int | None = None  # memory limit (``mem_limit``); None: the runtime's SLIPWAY_DEFAULT_MEMORY_MB
