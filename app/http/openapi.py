"""The OpenAPI contracts as the source of truth: operations, request validators and the
response validators the tests use.

Routes are registered from ``ApiContract.operations``; body and parameter schemas are
compiled once into jsonschema validators (the OpenAPI dialect of each contract).
"""
from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources

import yaml

METHODS = ("get", "post", "put", "patch", "delete")
# libyaml's safe loader where PyYAML has it (its wheels do): the same documents, parsed faster
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Param:
    name: str
    location: str  # "path" or "query"
    required: bool
    kind: str  # the schema's type: integer, number, boolean, string
    validate: object  # callable(value) -> list of messages
    fallback: object = None  # x-slipway-fallback: value used when the given one is invalid
    has_fallback: bool = False
    default: object = None
    schema: dict = field(default_factory=dict)  # as in the contract (``$ref`` unresolved)
    description: str = ""


@dataclass
class Operation:
    api: str
    method: str
    path: str  # as in the contract, relative to the server url
    route: str  # full path, e.g. /v1/tokens/{tokenId}
    operation_id: str
    secured: bool
    scope: str  # "read" for GET, "write" otherwise
    params: list[Param] = field(default_factory=list)
    body_validate: object = None
    body_required: bool = False
    permissions: tuple = ()  # x-slipway-permission (panel): one name or a list, all required
    rate_tier: str | None = None  # x-slipway-rate-tier (panel: "deploy")
    websocket: bool = False  # x-slipway-websocket: the GET also answers a WebSocket upgrade
    summary: str = ""
    body_schema: dict | None = None  # the JSON request body's schema, as in the contract


class ApiContract:
    """One API's OpenAPI document (``partner`` or ``panel``) and its operations: what routes,
    validation and the coverage meta-tests are built from (not a partner's billing contract,
    ``core.partner.contracts.Contract``)."""

    def __init__(self, api: str, document: dict):
        self.api = api
        self.document = document
        self.version = document["openapi"]
        self.oas31 = self.version.startswith("3.1")
        self.base = document.get("servers", [{"url": "/"}])[0]["url"].rstrip("/")
        self.operations = list(self._operations())

    @functools.cached_property
    def text(self) -> str:
        """The document as YAML, as the contract endpoints serve it (made on first use)."""
        return yaml.safe_dump(self.document, sort_keys=False, allow_unicode=True)

    @functools.cached_property
    def json(self) -> bytes:
        """The served YAML (``text``) as JSON, for clients that read JSON (made on first use)."""
        return json.dumps(yaml.load(self.text, Loader=_LOADER), ensure_ascii=False).encode("utf-8")

    @classmethod
    def load(cls, api: str, *, deploy_methods=None, amend=None) -> "ApiContract":
        """The ``api`` contract (``partner`` or ``panel``), the panel's specialised for
        ``deploy_methods``; ``amend(document)`` adds to the document before it is compiled
        (the plugins' routes: app.extensions). The YAML is parsed once per process
        (``_parsed``); each call builds on its own copy, so no contract changes another's
        document."""
        document = copy.deepcopy(_parsed(api))
        schemas = document.get("components", {}).get("schemas", {})
        if deploy_methods is not None and "DeployMethod" in schemas:
            schemas["DeployMethod"]["enum"] = sorted(deploy_methods)
            methods = deploy_methods if isinstance(deploy_methods, dict) else {}
            if "ServiceCreate" in schemas and methods:
                # each plugin's required fields, keyed on deploy_method
                # a deploy method's own fields are known fields of the create (which refuses
                # the others: additionalProperties false)
                known = schemas["ServiceCreate"].setdefault("properties", {})
                for name, method in sorted(methods.items()):
                    for field, schema in ((method.request_schema or {}).get("properties") or {}).items():
                        known.setdefault(field, copy.deepcopy(schema))
                schemas["ServiceCreate"]["allOf"] = [
                    {"if": {"properties": {"deploy_method": {"const": name}}, "required": ["deploy_method"]},
                     "then": copy.deepcopy(method.request_schema)}
                    for name, method in sorted(methods.items())]
            if methods:
                schemas["DeployMethod"]["x-slipway-capabilities"] = capabilities(methods)
        if amend is not None:  # what it adds gets the Idempotency-Key additions the parse gave the rest
            before = set(document.get("paths", {}))
            amend(document)
            added = {path: item for path, item in document.get("paths", {}).items() if path not in before}
            _idempotent_posts(api, {**document, "paths": added})
        return cls(api, document)

    # --- validators -----------------------------------------------------------------

    def validator(self, schema: dict):
        """A jsonschema validator for ``schema``; ``#/components/...`` refs resolve."""
        # imported on first use: it brings pydantic, most of a CLI command's start-up, and
        # only serving and the contract tests validate
        from openapi_schema_validator import (OAS30Validator, OAS31Validator, oas30_format_checker,
                                              oas31_format_checker)

        root = dict(schema)
        root["components"] = self.document.get("components", {})
        if self.oas31:
            return OAS31Validator(root, format_checker=oas31_format_checker)
        return OAS30Validator(root, format_checker=oas30_format_checker)

    def _messages(self, schema: dict):
        validator = self.validator(schema)

        per_field = self.api == "panel"  # the partner API keeps its documented message

        def validate(instance):
            found = []
            for error in validator.iter_errors(instance):
                if per_field and error.validator == "additionalProperties" and error.validator_value is False:
                    found.extend(_unknown_fields(error))
                else:
                    found.append((_where(error), _explain(error)))
            return found

        return validate

    def _operations(self):
        global_security = bool(self.document.get("security"))
        for path, item in self.document.get("paths", {}).items():
            shared_params = item.get("parameters", [])
            for method in METHODS:
                op = item.get(method)
                if op is None:
                    continue
                secured = bool(op["security"]) if "security" in op else global_security
                operation = Operation(api=self.api, method=method.upper(), path=path,
                                      route=(self.base + path) or "/", operation_id=op["operationId"],
                                      secured=secured,
                                      scope=op.get("x-slipway-scope") or ("read" if method == "get" else "write"),
                                      permissions=_names(op.get("x-slipway-permission")),
                                      rate_tier=op.get("x-slipway-rate-tier"),
                                      websocket=bool(op.get("x-slipway-websocket")) and method == "get",
                                      summary=op.get("summary", ""))
                for p in _merge_params(shared_params, op.get("parameters", [])):
                    p = self._deref(p)
                    if p["in"] not in ("path", "query"):  # headers (Idempotency-Key) are read where used
                        continue
                    schema = p.get("schema", {})
                    operation.params.append(Param(
                        name=p["name"], location=p["in"], required=p.get("required", False),
                        kind=_type_of(schema), validate=self._messages(schema),
                        fallback=p.get("x-slipway-fallback"), has_fallback="x-slipway-fallback" in p,
                        default=schema.get("default"), schema=schema, description=p.get("description", "")))
                body = op.get("requestBody")
                if body:
                    schema = body["content"]["application/json"]["schema"]
                    operation.body_validate = self._messages(schema)
                    operation.body_schema = schema
                    operation.body_required = body.get("required", False)
                yield operation

    def _deref(self, node: dict) -> dict:
        while "$ref" in node:
            target = self.document
            for part in node["$ref"].lstrip("#/").split("/"):
                target = target[part]
            node = target
        return node

    def resolved(self, schema, depth: int = 0):
        """``schema`` with every ``#/...`` ``$ref`` replaced by what it names (a copy), for
        readers that get no ``components`` (the MCP tools' input schemas)."""
        if depth > 32:
            raise ValueError("schema references nest too deep (a cycle?)")
        if isinstance(schema, list):
            return [self.resolved(item, depth) for item in schema]
        if not isinstance(schema, dict):
            return schema
        if "$ref" in schema:
            target = self._deref({"$ref": schema["$ref"]})
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return self.resolved({**target, **rest}, depth + 1)
        return {k: self.resolved(v, depth) for k, v in schema.items()}

    # --- responses (used by the tests to hold the code to the contract) -------------------

    def find_operation(self, method: str, route: str) -> Operation:
        for op in self.operations:
            if op.method == method.upper() and op.route == route:
                return op
        raise KeyError(f"{method} {route} is not in the {self.api} contract")

    def response_schema(self, method: str, route: str, status: int) -> dict | None:
        op = self.find_operation(method, route)
        responses = self.document["paths"][op.path][method.lower()]["responses"]
        response = responses.get(str(status)) or responses.get("default")
        if response is None:
            raise KeyError(f"{method} {route} does not document status {status}")
        response = self._deref(response)
        content = response.get("content")
        if not content:
            return None
        media = content.get("application/json") or next(iter(content.values()))
        return copy.deepcopy(media.get("schema"))

    def response_media_types(self, method: str, route: str, status: int) -> list[str]:
        op = self.find_operation(method, route)
        response = self._deref(self.document["paths"][op.path][method.lower()]["responses"][str(status)])
        return list(response.get("content", {}))

    def error_schema(self) -> dict:
        return {"$ref": "#/components/schemas/Error"}


def capabilities(methods: dict) -> dict:
    """What each deploy method says it is, as the served contract gives it on
    ``DeployMethod`` (``x-slipway-capabilities``), for clients that build on it (the web
    page's settings and Git tab): the fields it keeps per service and whether it fetches
    its source, deploys on push and has previews. Read with defaults, so a method that
    declares none of them keeps nothing and does none of it."""
    return {name: {"source_fields": list(getattr(method, "source_fields", ()) or ()),
                   "fetches_source": bool(getattr(method, "fetches_source", False)),
                   "deploys_on_push": bool(getattr(method, "deploys_on_push", False)),
                   "previews": bool(getattr(method, "previews", False))}
            for name, method in sorted(methods.items())}


@functools.cache
def _parsed(api: str) -> dict:
    """The ``api`` contract's YAML, parsed once per process, with the Idempotency-Key
    additions (``_idempotent_posts``). Shared: ``ApiContract.load`` copies it before changing
    anything."""
    name = {"partner": "partner.yaml", "panel": "panel.yaml"}[api]
    document = yaml.load(resources.files("app.http.contracts").joinpath(name).read_text("utf-8"), Loader=_LOADER)
    _idempotent_posts(api, document)
    return document


IDEMPOTENCY_KEY = {
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "Makes the POST safe to repeat: within 24 h the same key from the same credential (token, "
                   "API key or browser session) with the same method, path and body gets the first answer again "
                   "(status, body, `Idempotent-Replayed: true`) without running again; with another method, path "
                   "or body it is refused (partner 422, panel 409), and while the first still runs a repeat is "
                   "409 `conflict` (`Retry-After: 1`). 429 and 5xx answers are not kept. Bodies compare as JSON "
                   "(key order and whitespace do not matter).",
    "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"},
}
IDEMPOTENT_REPLAYED = {
    "description": "`true` on an answer replayed for a repeated `Idempotency-Key` (absent otherwise).",
    "schema": {"type": "string", "enum": ["true"]},
}
# the refusals an Idempotency-Key adds: a bad key (partner 422, panel 400), a key in use (409)
_KEY_REFUSALS = {"partner": {"409": "Conflict", "422": "UnprocessableEntity"},
                 "panel": {"400": "BadRequest", "409": "Conflict"}}


def _idempotent_posts(api: str, document: dict) -> None:
    """Give every POST that takes credentials the ``Idempotency-Key`` header parameter,
    the ``Idempotent-Replayed`` header on its success answers and the refusals a key adds
    where the operation lacks them (app.http.idempotency), so a new POST route is covered
    with no change to the contract's text. A POST without credentials (``security: []``:
    the sign-in, logout) ignores the header, so its operation does not list it: a
    parameter the server neither checks nor uses would be a false promise."""
    components = document.setdefault("components", {})
    components.setdefault("parameters", {})["IdempotencyKey"] = IDEMPOTENCY_KEY
    components.setdefault("headers", {})["IdempotentReplayed"] = IDEMPOTENT_REPLAYED
    global_security = bool(document.get("security"))
    for item in document.get("paths", {}).values():
        op = item.get("post")
        if op is None or not (bool(op["security"]) if "security" in op else global_security):
            continue
        op.setdefault("parameters", []).append({"$ref": "#/components/parameters/IdempotencyKey"})
        responses = op.setdefault("responses", {})
        for status, response in responses.items():
            if str(status).startswith("2") and "$ref" not in response:
                response.setdefault("headers", {})["Idempotent-Replayed"] = {
                    "$ref": "#/components/headers/IdempotentReplayed"}
        for status, name in _KEY_REFUSALS[api].items():
            responses.setdefault(status, {"$ref": f"#/components/responses/{name}"})


def _merge_params(shared, own):
    names = {(p.get("name"), p.get("in")) for p in own if "name" in p}
    return [p for p in shared if (p.get("name"), p.get("in")) not in names] + list(own)


def _type_of(schema: dict) -> str:
    kind = schema.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return kind


def _where(error) -> str:
    if error.validator == "required":
        missing = [name for name in error.validator_value if name not in (error.instance or {})]
        prefix = ".".join(str(p) for p in error.absolute_path)
        return ".".join(filter(None, [prefix, missing[0] if missing else ""]))
    return ".".join(str(p) for p in error.absolute_path)


def _unknown_fields(error) -> list:
    """A panel body's fields its schema does not know, each as its own ``(path, message)``
    (``"is not a known field"``) rather than jsonschema's one sentence for them all."""
    known = set((error.schema or {}).get("properties", {}))
    patterns = [re.compile(p) for p in (error.schema or {}).get("patternProperties", {})]
    prefix = ".".join(str(p) for p in error.absolute_path)
    return [(".".join(filter(None, [prefix, str(name)])), "is not a known field")
            for name in (error.instance or {})
            if name not in known and not any(p.search(str(name)) for p in patterns)]


def _explain(error) -> str:
    if error.validator == "required":
        return "is required"
    if error.validator == "enum":
        return "must be one of " + ", ".join(map(str, error.validator_value))
    if error.validator == "type":
        kind = error.validator_value
        return f"must be of type {kind if isinstance(kind, str) else ' or '.join(kind)}"
    if error.validator == "format":
        return f"must be a valid {error.validator_value}"
    if error.validator == "pattern" and error.validator_value == "\\S":
        return "must not be empty or only whitespace"
    if error.validator in ("minLength",) and error.validator_value == 1:
        return "must not be empty"
    return error.message


def _names(value) -> tuple:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)
