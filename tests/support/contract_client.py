"""A test client that holds every response to the contract of the API it came from."""
from __future__ import annotations

import json
import re

import yaml
from falcon import testing

from app.http.errors import api_of


class ContractViolation(AssertionError):
    pass


#: (api, operationId) of every operation a test has called, with the statuses seen
EXERCISED: dict[tuple[str, str], set[int]] = {}


class ContractClient:
    def __init__(self, app):
        self.app = app
        self.http = testing.TestClient(app)
        self.contracts = app.contracts
        self._routes = {
            api: [(re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", op.route) + "$"), op)
                  for op in contract.operations]
            for api, contract in self.contracts.items()
        }

    def request(self, method, path, *, token=None, json_body=None, body=None, headers=None, remote_addr=None,
                params=None, expect=None):
        headers = dict(headers or {})
        if token is not None:
            headers.setdefault("Authorization", f"Bearer {token}")
        kwargs = {"headers": headers, "params": params}
        if remote_addr:
            kwargs["remote_addr"] = remote_addr
        if json_body is not None:
            kwargs["body"] = json.dumps(json_body)
            headers.setdefault("Content-Type", "application/json")
        elif body is not None:
            kwargs["body"] = body
        result = self.http.simulate_request(method, path, **kwargs)
        self.check(method, path, result)
        if expect is not None:
            assert result.status_code == expect, f"{method} {path}: {result.status_code} {result.text}"
        return result

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def check(self, method, path, result):
        """Validate the body against the operation's documented response, or the error
        schema for routes the contract does not have; an undocumented status fails."""
        api = api_of(path)
        contract = self.contracts[api]
        status = result.status_code
        assert status != 500, f"{method} {path} answered 500: {result.text}"
        op = next((op for rx, op in self._routes[api] if rx.match(path) and op.method == method.upper()), None)
        if op is None:
            schema = contract.error_schema()
            if status < 400:
                raise ContractViolation(f"{method} {path} is not in the {api} contract but answered {status}")
        else:
            EXERCISED.setdefault((api, op.operation_id), set()).add(status)
            try:
                schema = contract.response_schema(op.method, op.route, status)
            except KeyError as exc:
                raise ContractViolation(str(exc)) from exc
        if status == 204:
            assert result.content == b"", "204 must have no body"
            return
        if schema is None:
            return
        content_type = result.headers.get("content-type", "")
        if "yaml" in content_type:
            yaml.safe_load(result.text)
            return
        if op is not None and not content_type.startswith("application/json"):
            documented = contract.response_media_types(op.method, op.route, status)
            assert content_type.split(";")[0] in documented, f"{method} {path}: {content_type} not in {documented}"
            return
        assert content_type.startswith("application/json"), f"{method} {path}: content-type {content_type}"
        errors = list(contract.validator(schema).iter_errors(result.json))
        if errors:
            raise ContractViolation(f"{method} {path} {status}: {errors[0].message} in {result.text[:500]}")
