"""Releases, deploy jobs, cancel and rollback through the panel API (in process, with the
real engine for the image look-ups): every refusal, and customers confined to their own."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.panel import access, customers as panel_customers
from core.panel.releases import Release

pytestmark = pytest.mark.runtime

COMPOSE = "services:\n  web:\n    image: localhost/busybox:latest\n    ports: ['8080']\n"


@pytest.fixture
def world(make_app, runtime_url, store, clock):
    from tests.support.contract_client import ContractClient

    client = ContractClient(make_app(runtime_url=runtime_url))
    acme = panel_customers.create_customer(store.uow(), clock, name="Acme")
    other = panel_customers.create_customer(store.uow(), clock, name="Other")

    def key(role, customer=None):
        return access.create_api_key(store.uow(), clock, name=role, role=role, rate_limit_rpm=10000,
                                     customer_id=customer.id if customer else None)[1]

    keys = {"admin": key("admin"), "acme": key("customer", acme), "other": key("customer", other),
            "viewer": key("viewer")}

    def service(name, customer=acme, releases=0):
        """A service whose first deploy job is queued; with ``releases``, it ran that many
        (recorded, the job succeeded, the service running the newest)."""
        created = client.post("/api/services", token=keys["admin"], expect=201, json_body={
            "name": name, "customer_id": customer.id, "deploy_method": "compose", "compose": COMPOSE}).json
        made = []
        with store.uow() as uow:
            for number in range(1, releases + 1):
                release = Release(id=f"rel_{name}{number}", service_id=created["id"], number=number,
                                  deploy_job_id=created["deploy_job_id"],
                                  images=({"component": "web", "image": "localhost/busybox:latest",
                                           "image_id": "sha256:" + "0" * 64},),
                                  compose=COMPOSE, variables={"N": str(number)}, commit=None,
                                  created_at=clock.now(), created_by="system")
                uow.releases.add(release)
                made.append(release)
            if releases:
                uow.deploy_jobs.finish(created["deploy_job_id"], "succeeded", None, clock.now(),
                                       release_id=made[-1].id)
                current = uow.services.get(created["id"])
                uow.services.update(replace(current, status="running", release=releases))
            uow.commit()
        return created["id"], created["deploy_job_id"], made

    service.customers = {"acme": acme, "other": other}
    return client, keys, service


def test_lists_and_details_of_releases_and_deploy_jobs(world):
    client, keys, service = world
    sid, job_id, made = service("two", releases=2)
    listed = client.get(f"/api/services/{sid}/releases", token=keys["acme"], expect=200).json
    assert listed["total"] == 2 and [r["number"] for r in listed["data"]] == [2, 1]
    one = client.get(f"/api/services/{sid}/releases/{made[0].id}", token=keys["viewer"], expect=200).json
    assert one["variables"] == {"N": "1"} and one["images"][0]["image_id"].startswith("sha256:")
    jobs = client.get(f"/api/services/{sid}/deploys", token=keys["acme"], expect=200).json
    assert [(j["id"], j["kind"], j["status"], j["release_id"]) for j in jobs["data"]] == [
        (job_id, "deploy", "succeeded", made[-1].id)]
    job = client.get(f"/api/services/{sid}/deploys/{job_id}", token=keys["acme"], expect=200).json
    assert job["finished_at"] is not None and job["error"] is None
    assert client.get(f"/api/services/{sid}", token=keys["acme"], expect=200).json["release"] == 2


def test_refusals(world):
    client, keys, service = world
    lone, lone_job, _ = service("lone", releases=1)
    two, two_job, made = service("two", releases=2)
    theirs, their_job, their_releases = service("theirs", releases=2)
    post, get = client.post, client.get
    # no earlier release
    assert post(f"/api/services/{lone}/rollback", token=keys["acme"], expect=409).json["error"]["code"] == "conflict"
    # the images of release 1 were never kept in the engine: gone
    refused = post(f"/api/services/{two}/rollback", token=keys["acme"], expect=409).json
    assert "gone" in refused["error"]["message"]
    post(f"/api/services/{two}/rollback", token=keys["acme"], json_body={"release_id": "rel_nope"}, expect=404)
    # another service's release, through this service
    post(f"/api/services/{two}/rollback", token=keys["admin"], json_body={"release_id": their_releases[0].id},
         expect=404)
    get(f"/api/services/{two}/releases/{their_releases[0].id}", token=keys["admin"], expect=404)
    get(f"/api/services/{two}/releases/rel_nope", token=keys["admin"], expect=404)
    # malformed bodies
    for body in ({"release_id": 5}, {"release_id": ""}, {"release": "x"}, ["x"]):
        assert post(f"/api/services/{two}/rollback", token=keys["acme"], json_body=body,
                    expect=422).json["error"]["code"] == "validation_error"
    # finished and unknown jobs
    assert "finished" in post(f"/api/services/{two}/deploys/{two_job}/cancel", token=keys["acme"],
                              expect=409).json["error"]["message"]
    post(f"/api/services/{two}/deploys/job_nope/cancel", token=keys["acme"], expect=404)
    get(f"/api/services/{two}/deploys/job_nope", token=keys["acme"], expect=404)
    get(f"/api/services/{two}/deploys/{their_job}", token=keys["admin"], expect=404)  # another service's job
    # another customer's service, job and release
    for path in (f"/api/services/{two}/releases", f"/api/services/{two}/releases/{made[0].id}",
                 f"/api/services/{two}/deploys", f"/api/services/{two}/deploys/{two_job}"):
        get(path, token=keys["other"], expect=404)
    post(f"/api/services/{two}/rollback", token=keys["other"], expect=404)
    post(f"/api/services/{two}/deploys/{two_job}/cancel", token=keys["other"], expect=404)
    # a viewer reads but does not roll back or cancel
    post(f"/api/services/{two}/rollback", token=keys["viewer"], expect=403)
    post(f"/api/services/{two}/deploys/{two_job}/cancel", token=keys["viewer"], expect=403)
    assert client.get(f"/api/services/{two}", token=keys["acme"], expect=200).json["status"] == "running"


def test_a_rollback_to_a_kept_release_is_queued(world, runtime_url, engine_ulimits, request):
    """With the earlier release's image kept in the engine, the rollback is accepted: a
    ``rollback`` job queued to that release, the service deploying (the worker runs it in
    tests/integration/test_releases_engine.py)."""
    from core.panel.containers import keep_tag
    from tests.support.engine import BUSYBOX, _factories, engine_settings

    client, keys, service = world
    sid, _, made = service("kept", releases=2)
    engine = _factories()["podman"].create(engine_settings(runtime_url, engine_ulimits))
    request.addfinalizer(lambda: engine.remove_service(sid))  # its kept images go with it
    engine.tag_image(BUSYBOX, keep_tag(sid, 1, "web"))
    queued = client.post(f"/api/services/{sid}/rollback", token=keys["acme"], expect=200).json
    assert (queued["release_id"], queued["status"]) == (made[0].id, "deploying")
    job = client.get(f"/api/services/{sid}/deploys/{queued['deploy_job_id']}", token=keys["acme"], expect=200).json
    assert (job["kind"], job["status"]) == ("rollback", "queued")
    # while it is queued, a second one is refused like a redeploy
    client.post(f"/api/services/{sid}/rollback", token=keys["acme"], json_body={"release_id": made[0].id},
                expect=409)


def test_a_queued_job_is_cancelled_at_once(world):
    client, keys, service = world
    sid, job_id, _ = service("fresh")
    cancelled = client.post(f"/api/services/{sid}/deploys/{job_id}/cancel", token=keys["acme"], expect=200).json
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"] is not None
    detail = client.get(f"/api/services/{sid}", token=keys["acme"], expect=200).json
    assert detail["status"] == "failed" and detail["release"] is None  # a first deploy: nothing runs
    events = client.get(f"/api/services/{sid}/events", token=keys["acme"], expect=200).json["data"]
    assert (events[0]["type"], events[0]["status"]) == ("deploy", "failed")
    client.post(f"/api/services/{sid}/deploys/{job_id}/cancel", token=keys["acme"], expect=409)


def test_a_customer_reaches_no_job_or_release_through_its_own_service(world):
    """A customer key with one service of its own cannot cancel, read or roll back to
    another service's job or release by putting its id under its own service's path
    (another customer's, and another of its own): 404, and nothing changes."""
    client, keys, service = world
    mine, my_job, my_releases = service("mine", releases=2)
    sibling, sibling_job, sibling_releases = service("sibling")  # acme's too, its first deploy queued
    theirs, their_job, their_releases = service("theirs", customer=service.customers["other"], releases=2)
    post, get = client.post, client.get
    for job in (their_job, sibling_job):
        post(f"/api/services/{mine}/deploys/{job}/cancel", token=keys["acme"], expect=404)
        get(f"/api/services/{mine}/deploys/{job}", token=keys["acme"], expect=404)
    for release in (their_releases[0], their_releases[1]):
        post(f"/api/services/{mine}/rollback", token=keys["acme"], json_body={"release_id": release.id}, expect=404)
        get(f"/api/services/{mine}/releases/{release.id}", token=keys["acme"], expect=404)
    # the other customer's own paths: 404 for acme, not 403 (nothing tells they exist)
    post(f"/api/services/{theirs}/deploys/{their_job}/cancel", token=keys["acme"], expect=404)
    post(f"/api/services/{theirs}/rollback", token=keys["acme"],
         json_body={"release_id": their_releases[0].id}, expect=404)
    # nothing changed: the sibling's queued job is still queued, theirs still running
    assert get(f"/api/services/{sibling}/deploys/{sibling_job}", token=keys["acme"], expect=200).json["status"] == "queued"
    assert get(f"/api/services/{theirs}", token=keys["other"], expect=200).json["status"] == "running"
    listed = get(f"/api/services/{theirs}/deploys", token=keys["other"], expect=200).json["data"]
    assert [j["id"] for j in listed] == [their_job] and not listed[0]["cancel_requested"]


def test_rollback_and_cancel_bodies_a_client_may_send(world):
    """Oversized, overlong, non-JSON and null bodies are refused with a 4xx, never a 500;
    the cancel (no body documented) ignores a small one."""
    client, keys, service = world
    sid, job_id, made = service("bodies", releases=2)
    post = client.post
    post(f"/api/services/{sid}/rollback", token=keys["acme"], json_body={"release_id": "r" * 65}, expect=422)
    post(f"/api/services/{sid}/rollback", token=keys["acme"], json_body={"release_id": None}, expect=422)
    post(f"/api/services/{sid}/rollback", token=keys["acme"], json_body={"release_id": made[0].id, "force": True},
         expect=422)
    post(f"/api/services/{sid}/rollback", token=keys["acme"], body=b'{"release_id": ' + b"[" * 100000,
         headers={"Content-Type": "application/json"}, expect=400)
    post(f"/api/services/{sid}/rollback", token=keys["acme"], body=b"x" * (1024 * 1024 + 1),
         headers={"Content-Type": "application/json"}, expect=413)
    post(f"/api/services/{sid}/rollback", token=keys["acme"], body=b"release_id=x",
         headers={"Content-Type": "application/x-www-form-urlencoded"}, expect=415)
    # well-formed but not one of this service's releases
    post(f"/api/services/{sid}/rollback", token=keys["acme"], json_body={"release_id": "rel_" + "0" * 16}, expect=404)
    result = post(f"/api/services/{sid}/deploys/{job_id}/cancel", token=keys["acme"], body=b"x" * (1024 * 1024 + 1),
                  headers={"Content-Type": "application/json"})
    assert result.status_code < 500
    post(f"/api/services/{sid}/deploys/{job_id}/cancel", token=keys["acme"], json_body={"x": 1}, expect=409)
