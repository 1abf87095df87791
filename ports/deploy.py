"""The deploy-method port: how a create-service request becomes a deploy plan.

A deploy method declares its name and the JSON Schema fragment of the create-request
fields it requires (the panel contract is assembled from these, so a missing
``template_id`` or ``compose`` is a 422 naming the field), and turns a request into a
``DeployPlan``: the compose text it will run and the parsed components. The app carries
the plan out through the container-runtime port.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ports.runtime import Healthcheck


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


@dataclass(frozen=True)
class DeployPlan:
    compose: str  # the compose text, as kept on the service
    components: tuple  # Component, in start order (dependencies first)
    volumes: tuple = ()  # named volumes the components mount
    variables: dict = field(default_factory=dict)
    template_id: str | None = None


class DeployMethod(ABC):
    @property
    @abstractmethod
    def name(self) -> str:
        """The value of ``deploy_method`` that selects this method."""

    @property
    @abstractmethod
    def request_schema(self) -> dict:
        """JSON Schema (OpenAPI 3.1 dialect) for the fields this method needs, e.g.
        ``{"required": ["template_id"], "properties": {"template_id": {...}}}``."""

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        """Turn a validated create request into a plan, or raise ``core.errors.Invalid``
        naming the field. ``catalog`` is the template catalog by id."""
        raise NotImplementedError(f"deploy method {self.name} cannot deploy yet")
