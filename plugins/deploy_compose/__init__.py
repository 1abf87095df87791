"""Deploy method ``compose``: run a compose definition as one service.

The definition is parsed by the deploy-plan language in :mod:`core.panel.compose`
(supported keys, limits, interpolation and ``SLIPWAY_HOST_PORTS`` are described there),
with the host-port range the app gives every method (:attr:`ports.deploy.DeployMethod.host_ports`,
handed over by the factory).
An ``image`` that is not an image reference (:func:`core.panel.containerfiles.image_refusal`:
a transport, an image id, another service's build), or whose registry host is, or
resolves to, an address that is not public, is a 422 on ``compose`` at create and PATCH
(:func:`core.panel.containerfiles.registries_refusal`: every host looked up once, at the
same time, within one deadline; a name that does not resolve in time is accepted) unless
``SLIPWAY_REGISTRY_ALLOW_PRIVATE=1``; the deploy job checks again before it pulls, and
then a name that does not resolve fails it.
"""
from __future__ import annotations

from core.errors import Invalid
from core.panel import containerfiles
from ports import hookimpl
from ports.deploy import DeployMethod, DeployMethodFactory, DeployPlan, host_ports


class ComposeDeploy(DeployMethod):
    name = "compose"
    request_schema = {
        "required": ["compose"],
        "properties": {"compose": {"type": "string", "minLength": 1},
                       "variables": {"type": "object", "additionalProperties": {"type": "string"}}},
    }

    def __init__(self, *, host_ports: tuple = DeployMethod.host_ports, registry_allow_private: bool = False):
        super().__init__(host_ports=host_ports)
        self.registry_allow_private = registry_allow_private

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        plan = self.parse(request["compose"], request.get("variables") or {})
        for component in plan.components:
            reason = containerfiles.reference_refusal(component.image)
            if reason:
                raise Invalid("invalid compose definition",
                              fields={"compose": f"services.{component.name}.image: {reason}"})
        if not self.registry_allow_private:  # plan runs off the event loop; one deadline for every lookup
            reason = containerfiles.registries_refusal(
                [(f"services.{c.name}.image", c.image) for c in plan.components], strict=False)
            if reason:
                raise Invalid("invalid compose definition", fields={"compose": reason})
        return plan


class ComposeFactory(DeployMethodFactory):
    name = ComposeDeploy.name

    def create(self, settings) -> ComposeDeploy:
        """The method with the app's host ports and ``SLIPWAY_REGISTRY_ALLOW_PRIVATE``."""
        return ComposeDeploy(host_ports=host_ports(settings),
                             registry_allow_private=containerfiles.allow_private(settings))


@hookimpl
def register_deploy_methods():
    return [ComposeFactory()]
