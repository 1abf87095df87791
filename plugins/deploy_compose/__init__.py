"""Deploy method ``compose``: run a compose definition as one service.

The definition is parsed by the deploy-plan language in :mod:`core.panel.compose`
(supported keys, limits, interpolation and ``SLIPWAY_HOST_PORTS`` are described there).
"""
from __future__ import annotations

from core.panel.compose import DEFAULT_HOST_PORTS, host_port_range, parse_compose
from ports import hookimpl
from ports.deploy import DeployMethod, DeployPlan


class ComposeDeploy(DeployMethod):
    name = "compose"
    request_schema = {
        "required": ["compose"],
        "properties": {"compose": {"type": "string", "minLength": 1},
                       "variables": {"type": "object", "additionalProperties": {"type": "string"}}},
    }

    def __init__(self):
        self.host_ports = DEFAULT_HOST_PORTS

    def configure(self, settings, plugins) -> None:
        self.host_ports = host_port_range(settings)

    def parse(self, text: str, variables: dict | None = None) -> DeployPlan:
        """``parse_compose`` with the configured ``SLIPWAY_HOST_PORTS``."""
        return parse_compose(text, variables, host_ports=self.host_ports)

    def plan(self, request: dict, catalog: dict) -> DeployPlan:
        return self.parse(request["compose"], request.get("variables") or {})


@hookimpl
def register_deploy_methods():
    return [ComposeDeploy()]
