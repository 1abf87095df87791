"""The deploy method ``image`` of the example package (examples/slipway-deploy-image),
loaded as a plugin of the app in process: the served contract lists it with its schema;
a create with a bad field is a 422 naming it and stores nothing; a deploy runs one
container of the image and a redeploy pulls the image again (a scripted engine); with the
real engine, a create deploys a container that answers on the service's url."""
from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from core.panel import deploys
from core.panel.deploy_job import run_job
from ports import hookimpl
from tests.support.api import create_service
from tests.support.image_plugin import image_plugin
from tests.support.scripted_engine import ScriptedEngine

BUSYBOX = "localhost/busybox:latest"


class AnsweringEngine:
    """A runtime that answers the engine gate's ping, so a create gets as far as its plan
    without an engine; nothing deploys in the tests that use it."""

    name = "answering"

    def create(self, settings):
        return self

    def ping(self) -> bool:
        return True

    @hookimpl
    def register_runtimes(self):
        return [self]


@pytest.fixture
def panel(make_app, store, clock):
    """As the panel fixture of conftest.py, with the example plugin registered besides the
    built-ins (as its entry point would, once pip installed it)."""
    from core.panel import access, customers
    from tests.support.contract_client import ContractClient

    def make(**overrides):
        if "runtime_url" not in overrides:  # no engine: one that answers the gate's ping
            overrides.update(runtime="answering", runtime_url="answering://", plugins=(AnsweringEngine(),))
        plugins = (image_plugin(), *overrides.pop("plugins", ()))
        app = make_app(plugins=plugins, **overrides)
        return ContractClient(app), app

    acme = customers.create_customer(store.uow(), clock, name="Acme")
    _, admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)
    return make, acme, admin


def test_the_served_contract_lists_the_method_with_its_schema(panel):
    make, _, admin = panel
    client, _ = make()
    document = yaml.safe_load(client.get("/api/openapi.yaml", token=admin, expect=200).text)
    schemas = document["components"]["schemas"]
    assert schemas["DeployMethod"]["enum"] == ["ai", "compose", "git", "image", "template"]
    [rule] = [r for r in schemas["ServiceCreate"]["allOf"] if r["if"]["properties"]["deploy_method"] == {"const": "image"}]
    assert rule["then"] == image_plugin().ImageDeploy.request_schema
    assert rule["then"]["required"] == ["image"]
    properties = schemas["ServiceCreate"]["properties"]
    assert properties["port"] == {"type": "integer", "minimum": 1, "maximum": 65535,
                                  "description": "image services: the container port the service's address reaches"}
    assert properties["command"]["type"] == "array" and properties["command"]["items"]["type"] == "string"
    assert properties["image"]["type"] == "string"


@pytest.mark.parametrize("fields, field, words", [
    ({}, "image", "is required"),
    ({"image": "ef919a2dc7aa"}, "image", "reads as an image id"),
    ({"image": "oci-archive:billing"}, "image", "names the transport oci-archive:"),
    ({"image": "localhost/slw-svc_0123456789abcdef-app:0123456789ab"}, "image", "was built for another service"),
    ({"image": "127.0.0.1:5000/ops/billing"}, "image", "127.0.0.1 is a loopback address"),
    ({"image": "localhost:5000/ops/billing"}, "image", "which is a loopback address"),
    ({"image": BUSYBOX, "port": 0}, "port", ""),
    ({"image": BUSYBOX, "port": 65536}, "port", ""),
    ({"image": BUSYBOX, "port": "8080"}, "port", "must be of type integer"),
    ({"image": BUSYBOX, "command": "httpd -f"}, "command", "must be of type array"),
    ({"image": BUSYBOX, "command": ["httpd", 8080]}, "command.1", "must be of type string"),
    ({"image": BUSYBOX, "command": []}, "command", ""),
])
def test_a_create_with_a_bad_field_is_a_422_naming_it_and_stores_nothing(panel, fields, field, words):
    make, acme, admin = panel
    client, _ = make()
    refused = create_service(client, admin, acme, deploy_method="image", **fields)
    assert refused.status_code == 422, refused.text
    error = refused.json["error"]
    assert error["code"] == "validation_error" and set(error["fields"]) == {field}, error
    assert words in error["fields"][field], error
    assert client.get("/api/services", token=admin, expect=200).json["total"] == 0


def test_the_operator_may_allow_private_registries(panel):
    make, acme, admin = panel
    client, _ = make(settings={"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "1"})
    created = create_service(client, admin, acme, deploy_method="image", image="127.0.0.1:5000/ops/billing")
    assert created.status_code == 201, created.text


def test_a_create_keeps_the_fields_in_the_compose_it_plans(panel):
    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="image", image=BUSYBOX, port=8080,
                             command=["sh", "-c", "echo $GREETING"], variables={"GREETING": "hi"})
    assert created.status_code == 201, created.text
    detail = client.get(f"/api/services/{created.json['id']}", token=admin, expect=200).json
    assert detail["deploy_method"] == "image" and detail["status"] == "deploying"
    assert yaml.safe_load(detail["compose"]) == {"services": {"app": {
        "image": BUSYBOX, "command": ["sh", "-c", "echo $$GREETING"], "ports": ["8080"]}}}
    assert detail["variables"] == {"GREETING": "hi"}


class PullingEngine(ScriptedEngine):
    """A scripted engine that has only the images it pulled, and keeps what it ran."""

    def __init__(self):
        super().__init__()
        self.pulls, self.specs = [], []
        self.on_run = self.specs.append

    def has_image(self, image):
        return image in self.pulls

    def pull_image(self, image, cancel=None):
        self.pulls.append(image)


def test_a_deploy_runs_one_container_of_the_image_and_a_redeploy_pulls_it_again(panel, store, clock):
    make, acme, admin = panel
    client, app = make()
    created = create_service(client, admin, acme, deploy_method="image", image="example/app:1", port=8080,
                             command=["serve", "--port", "8080"])
    assert created.status_code == 201, created.text
    service_id = created.json["id"]
    engine = PullingEngine()
    deployer = replace(app.parts.deployer.deployer, clock=clock, runtime=engine)
    run_job(store.uow(), deployer, deploys.claim_next(store.uow(), clock))
    assert client.get(f"/api/services/{service_id}", token=admin, expect=200).json["status"] == "running"
    [spec] = engine.specs
    assert (spec.image, tuple(spec.command)) == ("example/app:1", ("serve", "--port", "8080"))
    assert [port.container_port for port in spec.ports] == [8080]
    assert engine.pulls == ["example/app:1"]  # the engine lacked it

    client.post(f"/api/services/{service_id}/redeploy", token=admin, expect=200)
    run_job(store.uow(), deployer, deploys.claim_next(store.uow(), clock))
    assert client.get(f"/api/services/{service_id}", token=admin, expect=200).json["status"] == "running"
    assert engine.pulls == ["example/app:1", "example/app:1"]  # pulled again, though the engine had it
    assert len(engine.specs) == 2 and engine.specs[-1].image == "example/app:1"


@pytest.mark.runtime
def test_a_create_deploys_one_container_that_answers_on_its_url(panel, store, clock, runtime_url, engine_ulimits,
                                                                 tmp_path):
    from ports.clock import SystemClock
    from tests.support.http import wait_answering

    make, acme, admin = panel
    client, app = make(runtime_url=runtime_url, settings={"SLIPWAY_RUNTIME_ULIMITS": engine_ulimits})
    command = ["sh", "-c", ('mkdir -p /www && echo "$GREETING from image" > /www/index.html && '
                            "exec httpd -f -p 8080 -h /www")]
    created = create_service(client, admin, acme, deploy_method="image", image=BUSYBOX, port=8080, command=command,
                             variables={"GREETING": "hello"})
    assert created.status_code == 201, created.text
    service_id = created.json["id"]
    try:
        job = deploys.claim_next(store.uow(), clock)
        # the job's waits (the engine, the settle window) on the real clock
        run_job(store.uow(), replace(app.parts.deployer.deployer, clock=SystemClock()), job,
                           workdir=str(tmp_path))
        detail = client.get(f"/api/services/{service_id}", token=admin, expect=200).json
        events = client.get(f"/api/services/{service_id}/events", token=admin, expect=200).json["data"]
        assert detail["status"] == "running", events
        assert detail["url"].startswith("http://127.0.0.1:"), detail
        assert "hello from image" in wait_answering(detail["url"], seconds=30).text
        assert len(app.parts.runtime.containers(service_id)) == 1  # one container of the image
    finally:
        app.parts.runtime.remove_service(service_id)


def test_a_patch_of_the_variables_keeps_the_image_and_they_are_the_containers_environment(panel, store, clock):
    """The variables change; image, port and command stay as created (the compose the
    method planned), and the next deploy's container has the variables in its environment.
    The service's compose is the method's own: a PATCH of it is a 422."""
    make, acme, admin = panel
    client, app = make()
    created = create_service(client, admin, acme, deploy_method="image", image="example/app:1", port=8080,
                             command=["serve", "$PORT"], variables={"MODE": "one"})
    service_id = created.json["id"]
    engine = PullingEngine()
    deployer = replace(app.parts.deployer.deployer, clock=clock, runtime=engine)
    run_job(store.uow(), deployer, deploys.claim_next(store.uow(), clock))
    assert engine.specs[-1].environment == {"MODE": "one"}
    before = client.get(f"/api/services/{service_id}", token=admin, expect=200).json["compose"]

    changed = client.patch(f"/api/services/{service_id}", token=admin, json_body={"variables": {"MODE": "two"}})
    assert changed.status_code == 200, changed.text
    detail = client.get(f"/api/services/{service_id}", token=admin, expect=200).json
    assert detail["compose"] == before and detail["variables"] == {"MODE": "two"}
    client.post(f"/api/services/{service_id}/redeploy", token=admin, expect=200)
    run_job(store.uow(), deployer, deploys.claim_next(store.uow(), clock))
    spec = engine.specs[-1]
    assert (spec.image, tuple(spec.command), spec.environment) == ("example/app:1", ("serve", "$PORT"), {"MODE": "two"})

    refused = client.patch(f"/api/services/{service_id}", token=admin,
                           json_body={"compose": "services:\n  x:\n    image: busybox\n"})
    assert refused.status_code == 422 and set(refused.json["error"]["fields"]) == {"compose"}, refused.text
