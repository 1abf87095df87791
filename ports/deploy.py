"""The deploy-method port: how a create-service request becomes a running service.

A deploy method declares its name and the JSON Schema fragment of the create-request
fields it requires; the panel contract is assembled from these fragments, so a missing
``template_id`` or ``compose`` is a 422 naming the field.
"""
from __future__ import annotations

from abc import ABC, abstractmethod


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
