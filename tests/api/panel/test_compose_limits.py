"""Compose limits through the panel API (in process) and through a git deploy job: an
alias bomb, oversized text, a missing ``${VAR:?}`` and a host port outside
``SLIPWAY_HOST_PORTS`` are 422s that store nothing; from a repository the same reasons
fail the job before anything is built."""
from __future__ import annotations

import subprocess
from dataclasses import replace

import pytest

from app.config import ConfigError
from core.panel import deploys
from core.panel.deploy_job import run_job
from tests.support.api import create_service
from tests.support.compose import HEAD, laughs

NODES = "more than 10000 YAML nodes once anchors and aliases are expanded"


@pytest.mark.parametrize("compose, variables, fields", [
    (laughs(9), {}, {"compose": NODES}),
    (HEAD + "    command: echo " + "a" * 131072 + "\n", {}, {"compose": "the compose definition is larger than 128 KiB "
                                                                        "(131072 bytes)"}),
    (HEAD + "    environment: {PW: '${PW:?set a database password}'}\n", {},
     {"variables.PW": "set a database password"}),
    (HEAD + "    ports: ['8080:80']\n", {}, {"compose": "services.web.ports: host port 8080 is outside the ports this "
                                                        "panel allows (20000-29999); leave the host port out to get a "
                                                        "free one"}),
    (HEAD + "    ports: ['0.0.0.0:20080:80']\n", {}, None),
    ("services:\n  web: !!python/object/apply:os.system [id]\n", {}, None),
    # shapes that gave a 500 (OverflowError, RecursionError) or let one customer take what all share
    (HEAD + "    cpus: 1" + "0" * 400 + "\n", {}, None),
    (HEAD + "    healthcheck: {test: [CMD, 'true'], interval: 1" + "0" * 400 + "}\n", {}, None),
    (HEAD + "    healthcheck: {test: [CMD, sleep, '99999'], timeout: 1000h}\n", {},
     {"compose": "services.web.healthcheck.timeout: a duration from 0 to 60 s"}),
    ("services:\n" + "".join(f"  a{i:04d}: {{image: x, depends_on: [a{i + 1:04d}]}}\n" for i in range(1300))
     + "  a1300: {image: x}\n", {}, {"compose": "services: at most 100 services in one compose definition"}),
    (HEAD + "    ports: [" + ", ".join(str(p) for p in range(1, 34)) + "]\n", {}, None),
])
def test_refused_compose_is_a_422_and_stores_nothing(panel, compose, variables, fields):
    make, acme, admin = panel
    client, _ = make()
    result = create_service(client, admin, acme, deploy_method="compose", compose=compose, variables=variables)
    assert result.status_code == 422, result.text
    error = result.json["error"]
    assert error["code"] == "validation_error"
    if fields is None:
        assert set(error["fields"]) == {"compose"}
    else:
        assert error["fields"] == fields
    assert client.get("/api/services", token=admin).json["total"] == 0


def test_the_host_port_range_is_the_operators(panel):
    make, acme, admin = panel
    client, _ = make(SLIPWAY_HOST_PORTS="30000-30009")
    refused = create_service(client, admin, acme, deploy_method="compose", compose=HEAD + "    ports: ['20080:80']\n")
    assert refused.status_code == 422 and "(30000-30009)" in refused.json["error"]["fields"]["compose"]
    created = create_service(client, admin, acme, deploy_method="compose", compose=HEAD + "    ports: ['30009:80']\n")
    assert created.status_code == 201, created.text


@pytest.mark.parametrize("value", ["20000", "9-1", "1-70000", "ports"])
def test_a_bad_host_port_range_stops_start_up(make_app, value):
    with pytest.raises(ConfigError, match="SLIPWAY_HOST_PORTS"):
        make_app(settings={"SLIPWAY_HOST_PORTS": value})


def _repository(path, compose: str) -> str:
    path.mkdir()
    (path / "compose.yaml").write_text(compose)
    (path / "Containerfile").write_text("FROM localhost/busybox:latest\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
           "HOME": str(path), "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True)
    return f"file://{path}"


@pytest.mark.parametrize("compose, words", [
    (laughs(9), NODES),
    (HEAD + "    command: echo " + "a" * 131072 + "\n", "larger than 128 KiB"),
    (HEAD + "    ports: ['20080:80']\n", "host port 20080 is outside the ports this panel allows (30000-30009)"),
    ("services:\n  web:\n    build: .\n    ports: ['0.0.0.0:30001:80']\n", "names a host address"),
])
def test_a_repository_compose_fails_the_deploy_with_the_same_reason(panel, store, clock, tmp_path, compose, words):
    """The job fails at its source step, before any build (no engine is given: reaching
    one would fail differently)."""
    make, acme, admin = panel
    client, app = make(SLIPWAY_GIT_ALLOWED_SCHEMES="https,file", SLIPWAY_GIT_ALLOW_PRIVATE="1",
                       SLIPWAY_HOST_PORTS="30000-30009")
    url = _repository(tmp_path / "repo", compose)
    created = create_service(client, admin, acme, deploy_method="git", git_url=url)
    assert created.status_code == 201, created.text
    deployer = app.parts.deployer.deployer  # the app's: SLIPWAY_HOST_PORTS=30000-30009
    job = deploys.claim_next(store.uow(), clock)
    (tmp_path / "work").mkdir()
    run_job(store.uow(), replace(deployer, clock=clock, runtime=None), job, workdir=str(tmp_path / "work"))
    detail = client.get(f"/api/services/{created.json['id']}", token=admin, expect=200).json
    assert detail["status"] == "failed"
    events = client.get(f"/api/services/{created.json['id']}/events", token=admin, expect=200).json["data"]
    failed = [e["message"] for e in events if e["status"] == "failed"]
    assert failed and "invalid compose definition: " in failed[0] and words in failed[0], failed


def test_an_upper_case_name_of_another_services_build_is_no_image_reference(panel):
    """Upper case in a name (past the registry host) breaks the reference grammar: 422 at
    create, before any job could resolve it under ``localhost/``."""
    make, acme, admin = panel
    client, _ = make()
    refused = create_service(client, admin, acme, deploy_method="compose",
                             compose="services:\n  app:\n    image: LOCALHOST/SLW-SVC_0123456789ABCDEF-APP:0\n")
    assert refused.status_code == 422 and "is not an image reference" in refused.json["error"]["fields"]["compose"]


def _stored_before_the_rule(client, store, admin, acme, text):
    """A service whose stored compose names ``text`` (create and PATCH refuse it now, 422
    on ``compose``; a compose stored before that rule still meets it at the deploy)."""
    refused = create_service(client, admin, acme, deploy_method="compose", compose=text)
    assert refused.status_code == 422, refused.text
    created = create_service(client, admin, acme, deploy_method="compose", compose="services:\n  app:\n    image: x\n")
    assert created.status_code == 201, created.text
    with store.uow() as uow:
        uow.services.update(replace(uow.services.get(created.json["id"]), compose=text))
        uow.commit()
    return created


@pytest.mark.parametrize("other", ["localhost/slw-svc_0123456789abcdef-app:0123456789ab",
                                   "slw-svc_0123456789abcdef-app:0123456789ab"])  # Podman looks under localhost/
def test_a_compose_cannot_run_another_services_build(panel, store, clock, other):
    """Built images are named ``localhost/slw-<service id>-...``; naming another service's
    would run that tenant's code and whatever its build baked in."""
    make, acme, admin = panel
    client, app = make()
    created = _stored_before_the_rule(client, store, admin, acme, f"services:\n  app:\n    image: {other}\n")
    job = deploys.claim_next(store.uow(), clock)
    run_job(store.uow(), replace(app.parts.deployer.deployer, clock=clock, runtime=None), job)
    assert client.get(f"/api/services/{created.json['id']}", token=admin).json["status"] == "failed"
    events = client.get(f"/api/services/{created.json['id']}/events", token=admin).json["data"]
    assert "was built for another service" in events[0]["message"], events


@pytest.mark.parametrize("other, words", [
    ("localhost/slw-keep-svc_0123456789abcdef:1-web", "was built for another service"),  # a kept release
    ("slw-keep-svc_0123456789abcdef:3-app", "was built for another service"),
    ("ef", "reads as an image id"),  # the engines resolve a unique id prefix of two hex digits
    ("ef919a2dc7aa", "reads as an image id"),
    ("sha256:ef919a2dc7aaa07ccdff212f078626a95280646d1a27f3b04a42270b2b678f39", "reads as an image id"),
])
def test_a_compose_cannot_run_another_services_release_or_an_image_by_id(panel, store, clock, other, words):
    """Releases keep their images under ``localhost/slw-keep-<service id>:...``, and an
    image id (or any unique prefix of one) names whatever image has it: both would run
    another tenant's build. The deploy fails, saying why."""
    make, acme, admin = panel
    client, app = make()
    created = _stored_before_the_rule(client, store, admin, acme, f"services:\n  app:\n    image: \"{other}\"\n")
    job = deploys.claim_next(store.uow(), clock)
    run_job(store.uow(), replace(app.parts.deployer.deployer, clock=clock, runtime=None), job)
    assert client.get(f"/api/services/{created.json['id']}", token=admin).json["status"] == "failed"
    events = client.get(f"/api/services/{created.json['id']}/events", token=admin).json["data"]
    assert words in events[0]["message"], events
