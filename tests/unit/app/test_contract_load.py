"""The contracts are parsed once per process and each ``ApiContract.load`` builds on its own
copy: specialising the panel's for one set of deploy methods changes no other contract."""
from __future__ import annotations

from app.http.openapi import ApiContract, _parsed


def _methods(contract):
    return contract.document["components"]["schemas"]["DeployMethod"]["enum"]


def test_each_load_has_its_own_document():
    first = ApiContract.load("panel", deploy_methods=["git", "template"])
    second = ApiContract.load("panel", deploy_methods=["compose"])
    assert _methods(first) == ["git", "template"]
    assert _methods(second) == ["compose"]
    assert "enum" not in _parsed("panel")["components"]["schemas"]["DeployMethod"]
    assert first.document is not second.document


def test_changing_one_document_changes_no_later_load():
    contract = ApiContract.load("partner")
    contract.document["info"]["title"] = "changed"
    contract.document["paths"].clear()
    again = ApiContract.load("partner")
    assert again.document["info"]["title"] != "changed"
    assert again.operations and len(again.operations) == len(ApiContract.load("partner").operations)


def test_the_yaml_is_parsed_once():
    ApiContract.load("panel")
    hits = _parsed.cache_info().hits
    ApiContract.load("panel")
    ApiContract.load("panel", deploy_methods=["ai"])
    assert _parsed.cache_info().hits == hits + 2


def test_served_json_is_the_served_yaml():
    import json

    import yaml

    contract = ApiContract.load("panel", deploy_methods=["template"])
    assert json.loads(contract.json) == yaml.safe_load(contract.text)
    assert _methods(contract) == ["template"]


def test_the_served_contract_says_what_each_deploy_method_is():
    from types import SimpleNamespace

    schema = {"required": ["image"], "properties": {"image": {"type": "string"}}}
    methods = {"fetching": SimpleNamespace(request_schema=schema, source_fields=("image",), fetches_source=True,
                                           deploys_on_push=True, previews=False),
               "plain": SimpleNamespace(request_schema=schema)}  # declares nothing: keeps nothing, does none of it
    contract = ApiContract.load("panel", deploy_methods=methods)
    said = contract.document["components"]["schemas"]["DeployMethod"]["x-slipway-capabilities"]
    assert said == {
        "fetching": {"source_fields": ["image"], "fetches_source": True, "deploys_on_push": True, "previews": False},
        "plain": {"source_fields": [], "fetches_source": False, "deploys_on_push": False, "previews": False}}
    # names alone (no methods to ask) say nothing of what they are
    assert "x-slipway-capabilities" not in ApiContract.load("panel", deploy_methods=["plain"]).document[
        "components"]["schemas"]["DeployMethod"]


def test_the_built_in_methods_title_and_describe_themselves_and_their_fields():
    """The web page labels a method and its fields with their schema's ``title`` and helps
    with the ``description`` (app/web/assets/schemaform.js)."""
    from app.pluginmanager import deploy_methods, make_plugin_manager

    for name, method in deploy_methods(make_plugin_manager()).items():
        schema = method.request_schema
        assert schema.get("title") and schema.get("description"), name
        for field, part in schema["properties"].items():
            assert part.get("title") and part.get("description"), (name, field)
