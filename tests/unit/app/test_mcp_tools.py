"""The MCP tools' input schemas and argument split, from the contract as loaded with the
deploy methods (no server: the end-to-end tests are tests/e2e/test_mcp.py)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.http.errors import ApiError
from app.http.openapi import ApiContract
from app.http.pipeline import check_params
from app.panel.mcp import TOOLS, Tool

# a third-party deploy method whose plugin asks for a field ServiceCreate does not name
METHODS = {"compose": SimpleNamespace(request_schema={"type": "object", "required": ["compose"],
                                                      "properties": {"compose": {"type": "string"}}}),
           "oci": SimpleNamespace(request_schema={"type": "object", "required": ["image"],
                                                  "properties": {"image": {"type": "string", "minLength": 1}}})}


@pytest.fixture(scope="module")
def tools():
    contract = ApiContract.load("panel", deploy_methods=METHODS)
    ops = {op.operation_id: op for op in contract.operations}
    return {name: Tool(name, ops[op_id], lambda call: None, contract) for name, op_id in TOOLS.items()}


def test_schemas_come_from_the_contract_with_refs_resolved(tools):
    listing = tools["list_services"].schema
    assert listing["type"] == "object" and listing["additionalProperties"] is False
    assert listing["properties"]["status"]["enum"] == ["running", "stopped", "deploying", "failed"]
    assert listing["properties"]["per_page"]["maximum"] == 100
    assert "$ref" not in repr(listing)
    create = tools["create_service"].schema
    assert create["properties"]["deploy_method"]["enum"] == ["compose", "oci"]
    assert create["properties"]["image"] == {"type": "string", "minLength": 1}  # the plugin's own field
    assert create["required"] == ["name", "customer_id", "deploy_method"]
    assert {rule["if"]["properties"]["deploy_method"]["const"] for rule in create["allOf"]} == {"compose", "oci"}
    assert set(tools["get_logs"].schema["properties"]) == {"id", "tail", "since"}
    assert tools["get_service"].schema["required"] == ["id"]


def test_arguments_split_into_body_and_parameters(tools):
    create = tools["create_service"]
    assert create.body({"name": "a", "image": "x"}) == {"name": "a", "image": "x"}
    assert create.body({}) == {}  # a required body is validated even empty: the fields it lacks are named
    assert tools["get_service"].body({"id": "svc_1"}) is None
    with pytest.raises(ApiError) as refused:
        tools["get_logs"].body({"id": "svc_1", "follow": True, "api_key": "k"})
    assert refused.value.status == 422
    assert refused.value.fields == {"api_key": "is not an argument of get_logs", "follow": "is not an argument of get_logs"}


@pytest.mark.parametrize("given, expected", [
    ({"page": 2, "per_page": 5}, {"page": 2, "per_page": 5}),
    ({"page": 2.0}, {"page": 2, "per_page": 20}),
    ({"page": "3"}, {"page": 3, "per_page": 20}),  # as a query string would give it
])
def test_json_values_are_checked_like_query_values(tools, given, expected):
    op = tools["list_services"].op
    values = check_params(op, lambda p: given.get(p.name))
    assert {k: values[k] for k in ("page", "per_page")} == expected


@pytest.mark.parametrize("given, field", [({"page": True}, "page"), ({"page": 1.5}, "page"), ({"page": [1]}, "page"),
                                          ({"search": 5}, "search"), ({"page": 0}, "page"),
                                          ({"page": 10 ** 400}, "page"), ({"per_page": -10 ** 400}, "per_page")])
def test_json_values_of_another_kind_are_refused(tools, given, field):
    with pytest.raises(ApiError) as refused:
        check_params(tools["list_services"].op, lambda p: given.get(p.name))
    assert refused.value.status == 400 and field in refused.value.fields
