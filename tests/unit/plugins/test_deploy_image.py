"""The example deploy method ``image`` (examples/slipway-deploy-image): its plan is the
compose text of one service made from the request's fields by a YAML writer (every tenant
string read back as the string it was); an image core's compose ``image:`` rule refuses is
a 422 on ``image``; a port out of range or a command that is not a list of strings is a
422 naming the field, from the request schema in the served contract and from the plan."""
from __future__ import annotations

import pytest

from core.errors import Invalid
from core.panel.compose import load_compose
from ports.settings import Settings
from tests.support.image_plugin import image_plugin

BUSYBOX = "localhost/busybox:latest"


@pytest.fixture
def method():
    return image_plugin().ImageDeploy()


def test_the_plan_is_one_service_of_the_image_with_its_command_and_port(method):
    plan = method.plan({"image": BUSYBOX, "port": 8080, "command": ["sh", "-c", "exec httpd -f -p 8080"],
                        "variables": {"GREETING": "hi"}}, {})
    assert plan.compose == ("services:\n  app:\n    image: localhost/busybox:latest\n    command:\n    - sh\n"
                            "    - -c\n    - exec httpd -f -p 8080\n    ports:\n    - '8080'\n")
    [app] = plan.components
    assert (app.name, app.image, app.command) == ("app", BUSYBOX, ("sh", "-c", "exec httpd -f -p 8080"))
    assert [(p.container_port, p.host_port) for p in app.ports] == [(8080, None)]  # the engine picks the host port
    assert plan.variables == {"GREETING": "hi"} and plan.volumes == ()
    assert plan.source == {"image": BUSYBOX, "port": 8080, "command": ["sh", "-c", "exec httpd -f -p 8080"]}


def test_without_port_and_command_the_image_runs_as_it_is_reached_on_no_port(method):
    plan = method.plan({"image": "nginx:1.27"}, {})
    assert plan.compose == "services:\n  app:\n    image: nginx:1.27\n"
    [app] = plan.components
    assert app.command is None and app.ports == ()
    assert plan.source == {"image": "nginx:1.27"}


def test_planned_again_from_its_own_compose_the_fields_are_read_back(method):
    """A PATCH of the variables plans again from what the service kept: its compose."""
    first = method.plan({"image": BUSYBOX, "port": 80, "command": ["echo", "$A", "yes"]}, {})
    again = method.plan({"compose": first.compose, "variables": {"A": "b"}}, {})
    assert (again.compose, again.components, again.source) == (first.compose, first.components, first.source)
    assert again.variables == {"A": "b"}
    with pytest.raises(Invalid) as refused:  # a compose this method did not write gives it nothing
        method.plan({"compose": "services:\n  web:\n    image: busybox\n"}, {})
    assert set(refused.value.fields) == {"image"}


def test_the_variables_are_the_containers_environment(method):
    assert method.variables_as_environment is True


@pytest.mark.parametrize("word", ["$HOME", "${A:?no}", "$$", "yes", "010", "22:22", "null", "~", "- a", "a: b",
                                  "#x", "'\"", "{a: 1}", "[1]", "&anchor", "*alias", "!!python/object", "é\u2028x",
                                  "line\nbreak", "\x07", "   "])
def test_every_command_word_is_run_as_it_was_sent(method, word):
    """No word is read as YAML or compose interpolation: a ``$`` stays a ``$`` for the
    container's shell, ``yes`` stays the string ``yes``."""
    plan = method.plan({"image": BUSYBOX, "command": ["echo", word]}, {})
    assert plan.components[0].command == ("echo", word)
    again = method.parse(plan.compose, {"HOME": "/elsewhere", "A": "x"})  # as the deploy job reads it
    assert again.components[0].command == ("echo", word)


def test_the_compose_is_a_document_of_the_fields_only(method):
    document = load_compose(method.plan({"image": BUSYBOX, "command": ["x\nservices: {}"], "port": 1}, {}).compose, {})
    assert document == {"services": {"app": {"image": BUSYBOX, "command": ["x\nservices: {}"], "ports": ["1"]}}}


@pytest.mark.parametrize("image, words", [
    ("ef919a2dc7aa", "reads as an image id"),
    ("sha256:" + "ef" * 32, "reads as an image id"),
    ("oci-archive:billing", "names the transport oci-archive:"),
    ("containers-storage:localhost/busybox", "is not an image reference"),
    ("docker://docker.io/library/busybox", "is not an image reference"),
    ("Busybox", "is not an image reference"),
    (" busybox", "is not an image reference"),
    ("localhost/slw-svc_0123456789abcdef-app:0123456789ab", "was built for another service"),
    ("slw-keep-svc_0123456789abcdef:1-app", "was built for another service"),
    ("localhost/slw--app:1", "was built for another service"),
    ("10.0.0.8/ops/billing:1", "10.0.0.8 is a private address"),
    ("127.0.0.1:5000/ops/billing", "127.0.0.1 is a loopback address"),
    ("[::1]:5000/ops/billing", "::1 is a loopback address"),
])
def test_an_image_the_compose_rule_refuses_is_a_422_on_image(method, image, words):
    with pytest.raises(Invalid) as refused:
        method.plan({"image": image}, {})
    assert set(refused.value.fields) == {"image"} and words in refused.value.fields["image"], refused.value.fields
    assert not refused.value.fields["image"].startswith("image:")


def test_the_operator_may_allow_private_registries():
    [factory] = image_plugin().register_deploy_methods()
    method = factory.create(Settings({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "1"}))
    assert method.plan({"image": "10.0.0.8/ops/billing:1"}, {}).components[0].image == "10.0.0.8/ops/billing:1"
    with pytest.raises(Invalid):  # the rest of the rule holds
        method.plan({"image": "oci-archive:billing"}, {})
    with pytest.raises(ValueError, match="SLIPWAY_REGISTRY_ALLOW_PRIVATE"):
        factory.create(Settings({"SLIPWAY_REGISTRY_ALLOW_PRIVATE": "yes"}))


@pytest.mark.parametrize("fields, field", [
    ({"port": 0}, "port"), ({"port": 65536}, "port"), ({"port": "8080"}, "port"), ({"port": True}, "port"),
    ({"port": 80.5}, "port"), ({"command": "sh -c x"}, "command"), ({"command": [1]}, "command"),
    ({"command": []}, "command"), ({"command": ["a", None]}, "command"), ({"command": {"a": "b"}}, "command"),
])
def test_a_bad_port_or_command_is_a_422_naming_it_from_the_plan_too(method, fields, field):
    """The contract refuses these first; a caller that plans without it gets the same field."""
    with pytest.raises(Invalid) as refused:
        method.plan({"image": BUSYBOX, **fields}, {})
    assert set(refused.value.fields) == {field}, refused.value.fields


@pytest.mark.parametrize("request_", [{}, {"image": 5}, {"image": ""}])
def test_a_missing_image_is_a_422_on_image_from_the_plan_too(method, request_):
    with pytest.raises(Invalid) as refused:
        method.plan(request_, {})
    assert set(refused.value.fields) == {"image"}


def test_a_command_too_long_for_a_compose_is_a_422_on_command(method):
    with pytest.raises(Invalid) as refused:
        method.plan({"image": BUSYBOX, "command": ["\x01" * 1000] * 64}, {})
    assert set(refused.value.fields) == {"command"} and "128 KiB" in refused.value.fields["command"]


# --- the request schema, as the served contract holds a create to it ----------------------


@pytest.fixture(scope="module")
def create_body_problems():
    from app.http.openapi import ApiContract

    contract = ApiContract.load("panel", deploy_methods={"image": image_plugin().ImageDeploy()})
    operation = contract.find_operation("POST", "/api/services")

    def problems(**fields) -> dict:
        body = {"name": "app", "customer_id": "cus_1", "deploy_method": "image", **fields}
        return dict(operation.body_validate(body))

    return problems


def test_the_schema_takes_a_whole_request(create_body_problems):
    assert create_body_problems(image=BUSYBOX, port=8080, command=["sh", "-c", "x"]) == {}
    assert create_body_problems(image=BUSYBOX) == {}


@pytest.mark.parametrize("fields, field", [
    ({}, "image"), ({"image": ""}, "image"), ({"image": 5}, "image"),
    ({"port": 0}, "port"), ({"port": 65536}, "port"), ({"port": "8080"}, "port"), ({"port": 80.5}, "port"),
    ({"port": True}, "port"), ({"port": None}, "port"),
    ({"command": "sh -c x"}, "command"), ({"command": []}, "command"), ({"command": [1]}, "command.0"),
    ({"command": ["a", None]}, "command.1"), ({"command": ["a"] * 65}, "command"),
])
def test_the_schema_refuses_a_bad_field_naming_it(create_body_problems, fields, field):
    found = create_body_problems(**({"image": BUSYBOX, **fields} if fields else {}))
    assert set(found) == {field}, found
