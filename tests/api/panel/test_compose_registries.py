"""Registries on the host's network (in process): a compose ``image`` whose registry host
is, or resolves to, an address that is not public is a 422 on ``compose`` at create and
at PATCH, and stores nothing, unless ``SLIPWAY_REGISTRY_ALLOW_PRIVATE=1``. A name that
does not resolve is accepted (its pull fails)."""
from __future__ import annotations

import pytest

from tests.support.api import create_service
from tests.support.compose import HEAD

PRIVATE = {
    "127.0.0.1:5000/ops/billing:latest": "127.0.0.1 is a loopback address",
    "localhost:5000/ops/billing:latest": "localhost resolves to 127.0.0.1, which is a loopback address",
    "[::1]:5000/ops/billing": "::1 is a loopback address",
    "10.0.0.8/ops/billing:1": "10.0.0.8 is a private address",
    "169.254.169.254:80/latest/x": "169.254.169.254 is a link-local address",
}


def compose(image: str) -> str:
    return f"services:\n  web:\n    image: localhost/busybox:latest\n  billing:\n    image: '{image}'\n"


def refused_on_compose(result) -> str:
    """The message of a 422 ``validation_error`` on ``compose`` alone."""
    assert result.status_code == 422, result.text
    error = result.json["error"]
    assert error["code"] == "validation_error" and set(error["fields"]) == {"compose"}, error
    return error["fields"]["compose"]


@pytest.mark.parametrize("image, words", PRIVATE.items())
def test_a_private_registry_is_a_422_on_compose_at_create(panel, image, words):
    make, acme, admin = panel
    client, _ = make()
    message = refused_on_compose(create_service(client, admin, acme, deploy_method="compose",
                                                compose=compose(image)))
    assert message.startswith("services.billing.image: the registry ") and words in message, message
    assert "only public registries are allowed" in message
    assert client.get("/api/services", token=admin).json["total"] == 0


def test_a_private_registry_is_a_422_at_patch_and_changes_nothing(panel):
    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="compose", compose=HEAD)
    assert created.status_code == 201, created.text
    service_id = created.json["id"]
    answer = client.patch(f"/api/services/{service_id}", token=admin,
                          json_body={"compose": compose("127.0.0.1:5000/ops/billing:latest")})
    assert answer.status_code == 422, answer.text
    assert "127.0.0.1 is a loopback address" in answer.json["error"]["fields"]["compose"]
    assert client.get(f"/api/services/{service_id}", token=admin).json["compose"] == HEAD


def test_public_unresolved_and_engine_local_names_are_accepted(panel):
    make, acme, admin = panel
    client, _ = make()
    text = ("services:\n  a:\n    image: registry.invalid/ops/billing:1\n  b:\n    image: docker.io/library/redis:7\n"
            "  c:\n    image: localhost/billing:latest\n")
    result = create_service(client, admin, acme, deploy_method="compose", compose=text)
    assert result.status_code == 201, result.text


def test_the_operator_may_allow_private_registries(panel):
    make, acme, admin = panel
    client, _ = make(SLIPWAY_REGISTRY_ALLOW_PRIVATE="1")
    result = create_service(client, admin, acme, deploy_method="compose",
                            compose=compose("127.0.0.1:5000/ops/billing:latest"))
    assert result.status_code == 201, result.text


@pytest.mark.parametrize("image, words", [
    ("containers-storage:localhost/slw-svc_other-app:x", "is not an image reference"),
    ("docker://127.0.0.1:5000/ops/billing", "is not an image reference"),
    ("oci-archive:billing", "names the transport oci-archive:"),
    ("dir:billing", "names the transport dir:"),
])
def test_an_image_that_is_not_a_reference_is_a_422_on_compose_at_create(panel, image, words):
    make, acme, admin = panel
    client, _ = make()
    result = create_service(client, admin, acme, deploy_method="compose", compose=compose(image))
    assert result.status_code == 422, result.text
    message = result.json["error"]["fields"]["compose"]
    assert message.startswith(f"services.billing.image: {image} ") and words in message, message
    assert client.get("/api/services", token=admin).json["total"] == 0


OTHERS_BUILD = "localhost/slw-svc_0123456789abcdef-web:1"


@pytest.mark.parametrize("image", ["3f2a", "sha256:3f2a", "3F2A9C0B", OTHERS_BUILD, "slw-svc_0123456789abcdef-web:1"])
def test_an_image_id_or_another_services_build_is_a_422_on_compose_at_create_and_patch(panel, image):
    """The image rule holds at create and PATCH, not only at deploy: an image id (or a
    prefix of one) and another service's build name are refused, naming the image, and
    nothing is stored or changed."""
    make, acme, admin = panel
    client, _ = make()
    message = refused_on_compose(create_service(client, admin, acme, deploy_method="compose",
                                                compose=compose(image)))
    assert message.startswith("services.billing.image: ") and image in message, message
    assert client.get("/api/services", token=admin).json["total"] == 0

    created = create_service(client, admin, acme, deploy_method="compose", compose=HEAD)
    assert created.status_code == 201, created.text
    service_id = created.json["id"]
    answer = client.patch(f"/api/services/{service_id}", token=admin, json_body={"compose": compose(image)})
    assert answer.status_code == 422, answer.text
    assert answer.json["error"]["code"] == "validation_error"
    assert answer.json["error"]["fields"]["compose"].startswith("services.billing.image: ")
    assert image in answer.json["error"]["fields"]["compose"]
    assert client.get(f"/api/services/{service_id}", token=admin).json["compose"] == HEAD


def test_a_services_own_build_and_a_public_reference_are_accepted_at_patch(panel, store):
    from dataclasses import replace

    make, acme, admin = panel
    client, _ = make()
    created = create_service(client, admin, acme, deploy_method="compose", compose=HEAD)
    assert created.status_code == 201, created.text
    service_id = created.json["id"]
    with store.uow() as uow:  # as its deploy leaves it (a PATCH waits for the deploy)
        uow.services.update(replace(uow.services.get(service_id), status="running"))
        uow.commit()
    own = f"localhost/slw-{service_id.lower()}-web:1"
    text = f"services:\n  web:\n    image: '{own}'\n  cache:\n    image: docker.io/library/redis:7\n"
    answer = client.patch(f"/api/services/{service_id}", token=admin, json_body={"compose": text})
    assert answer.status_code == 200, answer.text
    assert client.get(f"/api/services/{service_id}", token=admin).json["compose"] == text


def test_a_template_whose_image_variable_is_an_image_id_is_a_422(panel):
    make, acme, admin = panel
    client, _ = make()
    result = create_service(client, admin, acme, deploy_method="template", template_id="redis",
                            variables={"IMAGE": "sha256:3f2a"})
    assert result.status_code == 422, result.text
    assert "sha256:3f2a" in result.json["error"]["fields"]["variables"]
    assert client.get("/api/services", token=admin).json["total"] == 0
