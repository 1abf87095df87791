"""The served panel contract says what each deploy method is
(``components.schemas.DeployMethod``'s ``x-slipway-capabilities``), and a service's detail
answers its method's source fields at the top level, for the built-in methods as the
contract always had them (``git_url``, ``git_branch``, ``ai_url``) and for a method of a
plugin core has never heard of, both valid against the contract (no server: the API
tests hold the real answers, tests/api/panel)."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from app.http.openapi import ApiContract
from app.panel.services import service_detail
from core.panel.services import Service
from plugins.deploy_ai import AiDeploy
from plugins.deploy_compose import ComposeDeploy
from plugins.deploy_git import GitDeploy
from plugins.deploy_template import TemplateDeploy
from ports.deploy import DeployMethod


class ImageDeploy(DeployMethod):
    """A third party's method with fields of its own."""

    name = "image"
    request_schema = {"required": ["image"],
                      "properties": {"image": {"type": "string", "minLength": 1},
                                     "port": {"type": "integer", "minimum": 1, "maximum": 65535}}}
    source_fields = ("image", "port")


METHODS = {m.name: m for m in (TemplateDeploy(), ComposeDeploy(), GitDeploy(), AiDeploy(), ImageDeploy())}
NOW = datetime(2026, 12, 1, tzinfo=timezone.utc)
RESOURCES = {"cpu_usage": 0.0, "cpu_limit": 0.0, "memory_usage_mb": 0.0, "memory_limit_mb": 0.0, "storage_mb": 0.0}


@pytest.fixture(scope="module")
def contract():
    return ApiContract.load("panel", deploy_methods=METHODS)


def _schemas(contract):
    return contract.document["components"]["schemas"]


def test_the_contract_serves_each_methods_capabilities(contract):
    assert _schemas(contract)["DeployMethod"]["x-slipway-capabilities"] == {
        "ai": {"source_fields": ["ai_url", "git_branch"], "fetches_source": True, "deploys_on_push": True,
               "previews": True},
        "compose": {"source_fields": [], "fetches_source": False, "deploys_on_push": False, "previews": False},
        "git": {"source_fields": ["git_url", "git_branch"], "fetches_source": True, "deploys_on_push": True,
                "previews": True},
        "image": {"source_fields": ["image", "port"], "fetches_source": False, "deploys_on_push": False,
                  "previews": False},
        "template": {"source_fields": [], "fetches_source": False, "deploys_on_push": False, "previews": False},
    }
    assert "x-slipway-capabilities" in contract.json.decode()  # served as YAML and JSON alike


def test_a_plugins_source_fields_are_answered_and_patched_as_the_contract_says(contract):
    schemas = _schemas(contract)
    detail = next(part for part in schemas["ServiceDetail"]["allOf"] if "properties" in part)
    assert detail["properties"]["image"] == {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]}
    assert {"image", "port", "git_url", "git_branch", "ai_url"} <= set(detail["required"])
    patch = schemas["ServicePatch"]["properties"]
    assert patch["port"] == {"type": "integer", "minimum": 1, "maximum": 65535}
    assert "image" not in patch and "git_url" not in patch and "git_branch" in patch  # a required field stays
    loaded = ApiContract.load("panel", deploy_methods={"git": GitDeploy()})
    assert "image" not in _schemas(loaded)["ServicePatch"]["properties"]  # only loaded methods' fields


def _service(method: str, source: dict) -> Service:
    return Service(id="svc_1", name="shop", customer_id="cus_1", deploy_method=method, status="running",
                   created_at=NOW, updated_at=NOW, source=source)


def _valid(contract, body: dict) -> None:
    validator = contract.validator({"$ref": "#/components/schemas/ServiceDetail"})
    errors = [error.message for error in validator.iter_errors(body)]
    assert errors == [], errors


def test_the_detail_answers_every_source_field_at_the_top_level(contract):
    image = service_detail(_service("image", {"image": "nginx:1.27", "port": 8080}), RESOURCES, "Acme",
                           methods=METHODS)
    assert (image["image"], image["port"]) == ("nginx:1.27", 8080)
    assert (image["git_url"], image["git_branch"], image["ai_url"], image["webhook_url"]) == (None,) * 4
    _valid(contract, image)

    secret = "https://deploy:hunter2hunter2@git.example.org/acme/site.git"
    git = service_detail(_service("git", {"git_url": secret, "git_branch": "main"}), RESOURCES, "Acme",
                         methods=METHODS, public_url="https://panel.example.org")
    assert git["git_url"] == "https://***@git.example.org/acme/site.git" and git["git_branch"] == "main"
    assert (git["ai_url"], git["image"], git["port"]) == (None, None, None)
    assert git["webhook_url"] == "https://panel.example.org/api/hooks/git/svc_1"  # git deploys on push
    _valid(contract, git)

    template = service_detail(_service("template", {}), RESOURCES, "Acme", methods=METHODS)
    assert (template["git_url"], template["git_branch"], template["ai_url"], template["webhook_url"]) == (None,) * 4
    _valid(contract, template)
