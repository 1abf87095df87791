"""Deploy on push through the API, without an engine (the deploy worker is off, so the
jobs a push queues stay queued): ``POST /api/services/{id}/webhook-secret``, the
service's ``webhook_url`` and ``auto_deploy``, and every answer of ``POST
/api/hooks/git/{id}``: 400, 401, 404, 413, 422, ping, duplicate, ignored, queued and
coalesced. Deploying the pushed commit for real: tests/integration/test_push_deploys.py."""
from __future__ import annotations

import json

import pytest

from core.panel import access, customers
from tests.support.api import create_service
from tests.support.git_webhooks import PROVIDERS, headers_for, ping, push

SOURCE = {"SLIPWAY_GIT_ALLOWED_SCHEMES": "https,file", "SLIPWAY_GIT_ALLOW_PRIVATE": "1"}
COMPOSE = "services:\n  web:\n    image: docker.io/library/nginx:alpine\n"
SHA = ["%040x" % (0xABC000 + n) for n in range(12)]


@pytest.fixture
def hooks(make_app, store, clock):
    from tests.support.contract_client import ContractClient

    acme = customers.create_customer(store.uow(), clock, name="Acme")
    _, admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)
    app = make_app(settings=SOURCE, public_url="https://panel.example.com", rate_anon_rpm=10000)
    client = ContractClient(app)

    def git_service(name="app", **more):
        created = create_service(client, admin, acme, name=name, deploy_method="git",
                                 git_url="file:///srv/repo.git", git_branch="main", **more)
        assert created.status_code == 201, created.text
        return created.json["id"]

    def secret(service_id):
        return client.post(f"/api/services/{service_id}/webhook-secret", token=admin, expect=200).json["secret"]

    return client, acme, admin, git_service, secret


def jobs(client, admin, service_id) -> list:
    return client.get(f"/api/services/{service_id}/deploys", token=admin, params={"per_page": 100},
                      expect=200).json["data"]


def deliver(client, service_id, headers, body, expect=None, remote_addr=None):
    return client.post(f"/api/hooks/git/{service_id}", headers=headers, body=body, expect=expect,
                       remote_addr=remote_addr)


def test_the_detail_names_the_webhook_and_auto_deploy(hooks, store):
    client, acme, admin, git_service, secret = hooks
    service_id = git_service()
    detail = client.get(f"/api/services/{service_id}", token=admin, expect=200).json
    assert detail["webhook_url"] == f"https://panel.example.com/api/hooks/git/{service_id}"
    assert detail["auto_deploy"] is True
    compose = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "plain", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}).json
    plain = client.get(f"/api/services/{compose['id']}", token=admin, expect=200).json
    assert plain["webhook_url"] is None
    off = git_service(name="off", auto_deploy=False)
    assert client.get(f"/api/services/{off}", token=admin).json["auto_deploy"] is False


def test_auto_deploy_is_patched_and_checked(hooks):
    client, acme, admin, git_service, _ = hooks
    service_id = git_service()
    store_jobs = len(jobs(client, admin, service_id))
    # the first deploy is still queued (no worker): the service is deploying, so PATCH is 409 like every PATCH
    assert client.patch(f"/api/services/{service_id}", token=admin, json_body={"auto_deploy": False},
                        expect=409).json["error"]["code"] == "conflict"
    assert len(jobs(client, admin, service_id)) == store_jobs
    bad = create_service(client, admin, acme, name="bad", deploy_method="git", git_url="file:///srv/r.git",
                         auto_deploy="yes")
    assert bad.status_code == 422 and "auto_deploy" in bad.json["error"]["fields"]
    compose = create_service(client, admin, acme, name="plain", deploy_method="compose", compose=COMPOSE,
                             auto_deploy=True)
    assert compose.status_code == 422 and "auto_deploy" in compose.json["error"]["fields"]


def test_auto_deploy_patched_on_a_settled_service(hooks, store, clock):
    client, acme, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    result = client.patch(f"/api/services/{service_id}", token=admin, json_body={"auto_deploy": False}, expect=200)
    assert result.json["auto_deploy"] is False
    refused = client.patch(f"/api/services/{service_id}", token=admin, json_body={"auto_deploy": "no"}, expect=422)
    assert "auto_deploy" in refused.json["error"]["fields"]
    headers, body = push("github", secret(service_id), "main", SHA[0])
    assert deliver(client, service_id, headers, body, expect=202).json == {"ignored": "auto_deploy"}
    assert len(jobs(client, admin, service_id)) == 1  # the first deploy only


def _settle(store, service_id):
    """The service's first deploy ended (as a worker would have): running, its job succeeded."""
    from dataclasses import replace

    with store.uow() as uow:
        service = uow.services.get(service_id, for_update=True)
        uow.services.update(replace(service, status="running"))
        for job in uow.deploy_jobs.page(service_id, page=1, per_page=100)[0]:
            uow.deploy_jobs.finish(job.id, "succeeded", None, service.created_at)
        uow.commit()


def test_webhook_secret_is_made_anew_and_needs_services_deploy(hooks, store, clock):
    client, acme, admin, git_service, secret = hooks
    service_id = git_service()
    first, second = secret(service_id), secret(service_id)
    assert first != second and len(first) >= 32
    S = store.models.Service
    sealed = S.get(S.id == service_id).webhook_secret
    assert sealed.startswith("v1:") and second not in sealed  # kept encrypted
    headers, body = push("github", first, "main", SHA[0])
    assert deliver(client, service_id, headers, body, expect=401)  # the old one stopped working
    _, viewer = access.create_api_key(store.uow(), clock, name="viewer", role="viewer", rate_limit_rpm=10000)
    _, denied = access.create_api_key(store.uow(), clock, name="no-deploy", role="admin",
                                      denied_permissions=["services:deploy"], rate_limit_rpm=10000)
    for token in (viewer, denied):
        refused = client.post(f"/api/services/{service_id}/webhook-secret", token=token, expect=403)
        assert refused.json["error"]["code"] == "forbidden"
    client.post(f"/api/services/{service_id}/webhook-secret", expect=401)
    client.post("/api/services/svc_nope/webhook-secret", token=admin, expect=404)
    other = customers.create_customer(store.uow(), clock, name="Other")
    _, theirs = access.create_api_key(store.uow(), clock, name="c", role="customer", customer_id=other.id,
                                      rate_limit_rpm=10000)
    client.post(f"/api/services/{service_id}/webhook-secret", token=theirs, expect=404)
    compose = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "plain", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}).json
    refused = client.post(f"/api/services/{compose['id']}/webhook-secret", token=admin, expect=409)
    assert refused.json["error"]["code"] == "conflict"


def test_hook_404_is_one_answer_for_every_service_it_cannot_be(hooks, store):
    client, acme, admin, git_service, secret = hooks
    no_secret = git_service()
    compose = client.post("/api/services", token=admin, expect=201, json_body={
        "name": "plain", "customer_id": acme.id, "deploy_method": "compose", "compose": COMPOSE}).json["id"]
    answers = []
    for service_id in ("svc_0000000000000000", no_secret, compose):
        headers, body = push("github", "whatever", "main", SHA[0])
        answers.append(deliver(client, service_id, headers, body, expect=404).json)
    assert answers[0] == answers[1] == answers[2]
    assert len(jobs(client, admin, no_secret)) == 1


def test_hook_refusals(hooks, store):
    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    key = secret(service_id)
    headers, body = push("github", key, "main", SHA[0])
    # no provider recognises it
    plain = {"Content-Type": "application/json", "X-Hub-Signature-256": headers["X-Hub-Signature-256"]}
    assert deliver(client, service_id, plain, body, expect=400).json["error"]["code"] == "bad_request"
    # a bad or missing signature: 401, nothing changes
    for name in PROVIDERS:
        wrong, wrong_body = push(name, "not the secret", "main", SHA[1])
        assert deliver(client, service_id, wrong, wrong_body, expect=401).json["error"]["code"] == "unauthorized"
        unsigned, unsigned_body = push(name, None, "main", SHA[1])
        deliver(client, service_id, unsigned, unsigned_body, expect=401)
        tampered_headers, tampered_body = push(name, key, "main", SHA[1])
        if name != "gitlab":  # GitLab's token signs nothing
            deliver(client, service_id, tampered_headers, tampered_body.replace(SHA[1].encode(), SHA[2].encode()),
                    expect=401)
    assert len(jobs(client, admin, service_id)) == 1
    with store.uow(write=False) as uow:
        assert not uow.git_deliveries.seen(service_id, "x")
    assert store.models.GitDelivery.select().count() == 0
    # past 1 MiB: 413, before anything is read
    big = b"{" + b" " * (1024 * 1024) + b"}"
    big_headers = headers_for("github", key, big)
    assert deliver(client, service_id, big_headers, big, expect=413).json["error"]["code"] == "bad_request"
    # signed, but not what the provider documents: 422
    for name in PROVIDERS:
        for malformed in (b"not json", b"[]", json.dumps({"ref": "refs/heads/main", "after": "zz"}).encode()):
            result = deliver(client, service_id, headers_for(name, key, malformed), malformed, expect=422)
            assert result.json["error"]["code"] == "validation_error"
    assert len(jobs(client, admin, service_id)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_push_queues_one_deploy_of_its_commit_and_a_repeat_runs_nothing(hooks, store, provider):
    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    key = secret(service_id)
    headers, body = push(provider, key, "main", SHA[0], delivery=f"{provider}-1")
    queued = deliver(client, service_id, headers, body, expect=202).json
    job_id = queued["deploy_job_id"]
    with store.uow(write=False) as uow:
        job = uow.deploy_jobs.get(job_id)
        assert (job.kind, job.state, job.commit, job.created_by) == ("redeploy", "queued", SHA[0], f"git:{provider}")
        assert uow.services.get(service_id).status == "deploying"
    events = client.get(f"/api/services/{service_id}/events", token=admin).json["data"]
    assert any(SHA[0][:7] in e["message"] and provider in e["message"] for e in events)
    assert deliver(client, service_id, headers, body, expect=200).json == {"duplicate": True}
    assert len(jobs(client, admin, service_id)) == 2
    other_headers, other_body = push(provider, key, "feature", SHA[1])
    assert deliver(client, service_id, other_headers, other_body, expect=202).json == {"ignored": "branch"}
    gone_headers, gone_body = push(provider, key, "main", SHA[1], deleted=True)
    assert deliver(client, service_id, gone_headers, gone_body, expect=202).json == {"ignored": "event"}
    if provider in ("github", "bitbucket"):
        ping_headers, ping_body = ping(provider, key)
        assert deliver(client, service_id, ping_headers, ping_body, expect=204).text == ""
    assert len(jobs(client, admin, service_id)) == 2


def test_pushes_while_one_is_queued_coalesce_into_it(hooks, store):
    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    key = secret(service_id)
    answers = set()
    for n in range(10):
        headers, body = push("github", key, "main", SHA[n])
        answers.add(deliver(client, service_id, headers, body, expect=202).json["deploy_job_id"])
    assert len(answers) == 1
    [job_id] = answers
    with store.uow(write=False) as uow:
        assert uow.deploy_jobs.get(job_id).commit == SHA[9]
    listed = jobs(client, admin, service_id)
    assert len(listed) == 2  # the first deploy and one push deploy
    assert [j["commit"] for j in listed if j["id"] == job_id] == [SHA[9]]
    assert client.get(f"/api/services/{service_id}/deploys/{job_id}", token=admin).json["commit"] == SHA[9]
    # once it runs, a push queues another (one job of a service at a time: it waits)
    J = store.models.DeployJob
    J.update(state="running").where(J.id == job_id).execute()
    headers, body = push("gitlab", key, "main", SHA[10])
    later = deliver(client, service_id, headers, body, expect=202).json["deploy_job_id"]
    assert later != job_id
    with store.uow() as uow:
        assert uow.deploy_jobs.claim_queued(store_now(uow)) is None  # not beside the running one
        uow.commit()


def store_now(uow):
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def test_other_events_are_ignored(hooks, store):
    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    key = secret(service_id)
    pr = json.dumps({"action": "opened", "number": 1, "pull_request": {
        "number": 1, "head": {"ref": "f", "sha": SHA[3], "repo": {"id": 1}},
        "base": {"ref": "main", "sha": SHA[4], "repo": {"id": 1}}}}).encode()
    answer = deliver(client, service_id, headers_for("github", key, pr, event="pull_request"), pr, expect=202).json
    assert answer == {"ignored": "event"} or "deploy_job_id" not in answer
    issue = b'{"action": "opened"}'
    assert deliver(client, service_id, headers_for("github", key, issue, event="issues"), issue,
                   expect=202).json == {"ignored": "event"}
    assert len(jobs(client, admin, service_id)) == 1


def test_hook_is_rate_limited_per_address(make_app, store, clock):
    """Deliveries draw on the per-address tier of requests without credentials."""
    from tests.support.contract_client import ContractClient

    acme = customers.create_customer(store.uow(), clock, name="Acme")
    _, admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)
    client = ContractClient(make_app(settings=SOURCE, rate_anon_rpm=2))
    service_id = create_service(client, admin, acme, deploy_method="git", git_url="file:///srv/repo.git").json["id"]
    answers = []
    for n in range(3):
        headers, body = push("github", "nope", "main", SHA[n])
        answers.append(deliver(client, service_id, headers, body).status_code)
    assert answers[-1] == 429 and set(answers[:-1]) <= {401, 404}


def test_a_push_past_the_customers_limits_is_409_and_queues_nothing(hooks, make_app, store):
    from tests.support.contract_client import ContractClient

    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    key = secret(service_id)
    S = store.models.Service  # its last build's compose asks for more than the customer may have
    S.update(compose=COMPOSE + "    mem_limit: 4g\n").where(S.id == service_id).execute()
    tight = ContractClient(make_app(settings=SOURCE, customer_max_memory_mb=2048, rate_anon_rpm=10000))
    headers, body = push("github", key, "main", SHA[0], delivery="over")
    refused = deliver(tight, service_id, headers, body, expect=409)
    assert refused.json["error"]["code"] == "conflict" and "limits" in refused.text
    assert len(jobs(client, admin, service_id)) == 1
    # nothing was recorded either: the same delivery runs once the limit allows it
    roomy = ContractClient(make_app(settings=SOURCE, customer_max_memory_mb=8192, rate_anon_rpm=10000))
    assert deliver(roomy, service_id, headers, body, expect=202).json["deploy_job_id"]


def test_a_delivery_id_is_remembered_for_thirty_days(hooks, store, clock):
    from datetime import timedelta

    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    key = secret(service_id)
    headers, body = push("github", key, "feature", SHA[0], delivery="old-one")
    assert deliver(client, service_id, headers, body, expect=202).json == {"ignored": "branch"}
    clock.advance(timedelta(days=29).total_seconds())
    assert deliver(client, service_id, headers, body, expect=200).json == {"duplicate": True}
    clock.advance(timedelta(days=2).total_seconds())
    other, other_body = push("github", key, "feature", SHA[1])
    deliver(client, service_id, other, other_body, expect=202)  # each delivery forgets the service's old ones
    with store.uow(write=False) as uow:
        assert not uow.git_deliveries.seen(service_id, "old-one")


def _two_git_services(make_app, store, clock, **overrides):
    from tests.support.contract_client import ContractClient

    acme = customers.create_customer(store.uow(), clock, name="Acme")
    _, admin = access.create_api_key(store.uow(), clock, name="admin", role="admin", rate_limit_rpm=10000)
    client = ContractClient(make_app(settings=SOURCE, **overrides))
    ids, keys = [], []
    for name in ("victim", "other"):
        created = create_service(client, admin, acme, name=name, deploy_method="git",
                                 git_url="file:///srv/repo.git", git_branch="main")
        assert created.status_code == 201, created.text
        ids.append(created.json["id"])
        _settle(store, ids[-1])
        keys.append(client.post(f"/api/services/{ids[-1]}/webhook-secret", token=admin, expect=200).json["secret"])
    return client, ids, keys


def test_a_flood_of_unsigned_deliveries_does_not_starve_a_signed_push(make_app, store, clock):
    """Unsigned deliveries to a made-up id from one address use up that address's bucket;
    a service's signed push from the same address (a provider's shared one) still lands."""
    client, (victim, _), (key, _) = _two_git_services(make_app, store, clock, rate_anon_rpm=3)
    answers = []
    for n in range(6):
        headers, body = push("github", "nope", "main", SHA[n])
        answers.append(deliver(client, "svc_madeup", headers, body, remote_addr="192.0.2.10").status_code)
    assert answers[:3] == [404] * 3 and answers[3:] == [429] * 3
    unsigned, body = push("github", "nope", "main", SHA[6])  # a bad signature to a real service: the address's too
    assert deliver(client, victim, unsigned, body, remote_addr="192.0.2.10").status_code == 429
    headers, body = push("github", key, "main", SHA[7], delivery="victim-1")
    queued = deliver(client, victim, headers, body, remote_addr="192.0.2.10")
    assert queued.status_code == 202, queued.text
    assert "deploy_job_id" in queued.json


def test_a_services_signed_deliveries_past_its_bucket_are_429_and_anothers_are_not(make_app, store, clock):
    client, (first, other), (first_key, other_key) = _two_git_services(make_app, store, clock, rate_hook_rpm=2,
                                                                       rate_anon_rpm=10000)
    answers = []
    for n in range(3):
        headers, body = push("github", first_key, "main", SHA[n], delivery=f"first-{n}")
        answers.append(deliver(client, first, headers, body))
    assert [a.status_code for a in answers] == [202, 202, 429]
    refused = answers[-1]
    assert refused.json["error"]["code"] == "rate_limited" and int(refused.headers["Retry-After"]) >= 1
    assert refused.headers["X-RateLimit-Limit"] == "2" and refused.headers["X-RateLimit-Remaining"] == "0"
    headers, body = push("github", other_key, "main", SHA[5], delivery="other-1")
    assert deliver(client, other, headers, body, expect=202).json["deploy_job_id"]
    # a verified delivery does not draw on the address's bucket: unsigned ones are still answered as before
    headers, body = push("github", "nope", "main", SHA[6])
    assert deliver(client, first, headers, body).status_code == 401


def test_the_hook_rate_setting_is_read():
    from app.config import Config, ConfigError

    assert Config.from_env({}).rate_hook_rpm == 60
    assert Config.from_env({"SLIPWAY_RATE_HOOK_RPM": "5"}).rate_hook_rpm == 5
    with pytest.raises(ConfigError, match="SLIPWAY_RATE_HOOK_RPM"):
        Config.from_env({"SLIPWAY_RATE_HOOK_RPM": "0"})


def test_a_push_of_the_running_release_or_an_ancestor_is_ignored_old_commit(hooks, store, clock):
    """The release that runs decides (its commit and the ancestors its clone read), not
    the service's ``commit``, which a job that failed after its source step may have set."""
    from dataclasses import replace

    from core.panel.releases import Release

    client, _, admin, git_service, secret = hooks
    service_id = git_service()
    _settle(store, service_id)
    key = secret(service_id)
    with store.uow() as uow:
        uow.releases.add(Release(id="rel_forward", service_id=service_id, number=1, deploy_job_id="job_x", images=(),
                                 compose=COMPOSE, variables={}, commit=SHA[2], created_at=clock.now()))
        uow.releases.add_ancestry("rel_forward", service_id, [SHA[1], SHA[0]])
        uow.services.update(replace(uow.services.get(service_id, for_update=True), release=1, commit=SHA[3]))
        uow.commit()
    for n, old in enumerate((SHA[2], SHA[1], SHA[0])):
        headers, body = push("github", key, "main", old, delivery=f"replayed-{n}")
        assert deliver(client, service_id, headers, body, expect=202).json == {"ignored": "old commit"}
    assert len(jobs(client, admin, service_id)) == 1
    assert client.get(f"/api/services/{service_id}", token=admin).json["status"] == "running"
    headers, body = push("github", key, "main", SHA[3], delivery="failed-before")  # service.commit, no release
    assert "deploy_job_id" in deliver(client, service_id, headers, body, expect=202).json


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_service_without_git_branch_tracks_the_branch_its_release_cloned(hooks, store, clock, provider):
    """Without ``git_branch``, the tracked branch is the one the running release's clone
    checked out (``trunk`` here), whatever default branch the payload names or does not
    name (Bitbucket's never do); before any release recorded one, the payload's."""
    from dataclasses import replace

    from core.panel.releases import Release

    client, acme, admin, _, secret = hooks
    created = create_service(client, admin, acme, name="follows", deploy_method="git",
                             git_url="file:///srv/repo.git")
    assert created.status_code == 201, created.text
    service_id = created.json["id"]
    _settle(store, service_id)
    key = secret(service_id)
    headers, body = push(provider, key, "trunk", SHA[4], default_branch=None, delivery="before-release")
    assert deliver(client, service_id, headers, body, expect=202).json == {"ignored": "branch"}
    with store.uow() as uow:
        uow.releases.add(Release(id="rel_cloned", service_id=service_id, number=1, deploy_job_id="job_x", images=(),
                                 compose=COMPOSE, variables={}, commit=SHA[0], created_at=clock.now(),
                                 branch="trunk"))
        uow.services.update(replace(uow.services.get(service_id, for_update=True), release=1, commit=SHA[0]))
        uow.commit()
    release = client.get(f"/api/services/{service_id}/releases", token=admin, expect=200).json["data"][0]
    assert release["branch"] == "trunk"
    for n, (branch, default) in enumerate((("main", None), ("main", "main"), ("feature", None))):
        headers, body = push(provider, key, branch, SHA[5], default_branch=default, delivery=f"other-{n}")
        assert deliver(client, service_id, headers, body, expect=202).json == {"ignored": "branch"}
    assert len(jobs(client, admin, service_id)) == 1
    headers, body = push(provider, key, "trunk", SHA[6], default_branch=None, delivery="tracked")
    job_id = deliver(client, service_id, headers, body, expect=202).json["deploy_job_id"]
    assert [j["id"] for j in jobs(client, admin, service_id)].count(job_id) == 1
    assert len(jobs(client, admin, service_id)) == 2
