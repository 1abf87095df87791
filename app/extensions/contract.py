"""The plugins' routes as operations of the panel contract: their paths below ``PREFIX``,
their operation ids, and the document's operations (tags, permissions, parameters,
schemas, the panel's error answers)."""
from __future__ import annotations

import copy
import re

from ports.extensions import Route

#: where the plugins' routes live, below the panel API
PREFIX = "/api/ext"


def operation_id(route: Route) -> str:
    return f"ext_{route.plugin}_{route.operation_id}"


def path_of(route: Route) -> str:
    return f"{PREFIX}/{route.plugin}{route.path}"


def add_to_document(document: dict, routes) -> None:
    """The plugins' routes as operations of the panel contract (``document``, before it is
    compiled): tagged with the plugin's name, with the permission, rate tier, parameters
    and schemas the plugin declared, and the panel's error answers."""
    paths = document.setdefault("paths", {})
    tags = document.setdefault("tags", [])
    named = {tag.get("name") for tag in tags}
    for route in routes:
        if route.plugin not in named:
            tags.append({"name": route.plugin, "description": f"Added by the plugin {route.plugin}."})
            named.add(route.plugin)
        parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "maxLength": 200}}
                      for name in re.findall(r"\{([a-z][a-z0-9_]*)\}", route.path)]
        parameters += [{"name": name, "in": "query", "required": False, "schema": copy.deepcopy(schema)}
                       for name, schema in sorted(route.query.items())]
        responses = {"200": {"description": route.summary or "The plugin's answer",
                             "content": {"application/json": {"schema": copy.deepcopy(route.response_schema)}}},
                     "401": {"$ref": "#/components/responses/Unauthorized"},
                     "403": {"$ref": "#/components/responses/Forbidden"},
                     "429": {"$ref": "#/components/responses/RateLimited"}}
        if route.query or parameters:
            responses["400"] = {"$ref": "#/components/responses/BadRequest"}
        operation = {"operationId": operation_id(route), "tags": [route.plugin],
                     "summary": route.summary or f"{route.method} {path_of(route)}",
                     "description": (route.description + "\n\n" if route.description else "")
                     + f"Added by the plugin `{route.plugin}`; needs `{route.permission}`.",
                     "x-slipway-permission": route.permission, "x-slipway-extension": route.plugin,
                     "responses": responses}
        if route.rate_tier:
            operation["x-slipway-rate-tier"] = route.rate_tier
        if parameters:
            operation["parameters"] = parameters
        if route.request_schema is not None:
            operation["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": copy.deepcopy(route.request_schema)}}}
            responses["400"] = {"$ref": "#/components/responses/BadRequest"}
            responses["413"] = {"$ref": "#/components/responses/PayloadTooLarge"}
            responses["415"] = {"$ref": "#/components/responses/UnsupportedMediaType"}
            responses["422"] = {"$ref": "#/components/responses/ValidationError"}
        paths.setdefault(path_of(route), {})[route.method.lower()] = operation
