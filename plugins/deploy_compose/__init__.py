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
from ports.common_settings import REGISTRY_ALLOW_PRIVATE
from ports.deploy import DeployMethod, DeployMethodFactory, DeployPlan, host_ports
from ports.resolver import Resolver, SystemResolver

#: what the method reads (declared in ports: the app's deploy jobs read it too)
SETTINGS = (REGISTRY_ALLOW_PRIVATE,)


class ComposeDeploy(DeployMethod):
    name = "compose"
    request_schema = {
        "title": "Compose",
        "description": "Paste a compose file",
        "required": ["compose"],
        "properties": {"compose": {"type": "string", "minLength": 1, "title": "Compose",
                                   "contentMediaType": "application/yaml",
                                   "description": "a compose definition (services, ports, volumes; "
                                                  "${NAME}s filled from the variables)"},
                       "variables": {"type": "object", "additionalProperties": {"type": "string"},
                                     "title": "Variables", "description": "the values of the compose's ${NAME}s"}},
    }

    #: it keeps nothing of its own per service (``compose`` and ``variables`` are core's own columns); it runs what it is
    #: given, on no push and with no previews
    source_fields = ()
    fetches_source = deploys_on_push = previews = False

    def __init__(self, *, host_ports: tuple = DeployMethod.host_ports, registry_allow_private: bool = False,
                 resolver: Resolver | None = None):
        super().__init__(host_ports=host_ports)
        self.registry_allow_private = registry_allow_private
        self.resolver = resolver or SystemResolver()  # the registry hosts' lookups

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        plan = self.parse(request["compose"], request.get("variables") or {})
        for component in plan.components:
            reason = containerfiles.reference_refusal(component.image)
            if reason:
                raise Invalid("invalid compose definition",
                              fields={"compose": f"services.{component.name}.image: {reason}"})
        if not self.registry_allow_private:  # plan runs off the event loop; one deadline for every lookup
            reason = containerfiles.registries_refusal(
                [(f"services.{c.name}.image", c.image) for c in plan.components], strict=False,
                resolver=self.resolver)
            if reason:
                raise Invalid("invalid compose definition", fields={"compose": reason})
        return plan


class ComposeFactory(DeployMethodFactory):
    name = ComposeDeploy.name

    def create(self, settings) -> ComposeDeploy:
        """The method with the app's host ports, ``SLIPWAY_REGISTRY_ALLOW_PRIVATE`` and the
        app's resolver (a registry host's lookups)."""
        return ComposeDeploy(host_ports=host_ports(settings),
                             registry_allow_private=REGISTRY_ALLOW_PRIVATE.read(settings),
                             resolver=settings.resolver)


@hookimpl
def register_deploy_methods():
    return [ComposeFactory()]
