"""Preview environments without an engine (``core.panel.previews``): the service fields
``previews``, ``previews_from_forks``, ``preview_of`` and ``preview_number`` (create,
PATCH, detail, their 4xx), ``on_pull_request`` against the real store (a preview made,
redeployed, deleted; the events it ignores; a customer's limit), the previews list, and
a parent's delete taking its previews along."""
from __future__ import annotations

from dataclasses import replace

import pytest

from core.panel import access, customers, previews, services
from ports.git_providers import CLOSED, OPENED, REOPENED, UPDATED, PullRequest
from tests.support.api import create_service

REPO = "https://example.org/acme/site.git"
HEAD = "a" * 40
HEAD2 = "b" * 40


def pr(action=OPENED, number=7, base="main", head="feature", commit=HEAD, fork=False, clone_url=None):
    return PullRequest(number=number, action=action, base_branch=base, head_branch=head, head_commit=commit,
                       from_fork=fork, head_clone_url=clone_url)


@pytest.fixture
def parent(panel, store):
    """``(client, app, acme, admin, parent detail)``: a git service ``app`` tracking
    ``main`` with previews on, variables (one secret) set as a template's would be."""
    make, acme, admin = panel
    client, app = make()
    made = create_service(client, admin, acme, deploy_method="git", git_url=REPO, git_branch="main",
                          previews=True)
    assert made.status_code == 201, made.text
    service_id = made.json["id"]
    with store.uow() as uow:
        found = uow.services.get(service_id)
        uow.services.update(replace(found, status="running", variables={"MODE": "prod", "DB_PASSWORD": "pw-1"},
                                    secrets=("DB_PASSWORD",)))
        uow.commit()
    return client, app, acme, admin, client.get(f"/api/services/{service_id}", token=admin).json


def call(app, store, clock, service_id, request, **kw):
    parts = app.parts
    return previews.on_pull_request(store.uow(), clock, service_id, request, methods=parts.deploy_methods,
                                    quota=parts.quota, **kw)


def jobs_of(store, service_id):
    with store.uow(write=False) as uow:
        return uow.deploy_jobs.page(service_id, page=1, per_page=50)[0]


def events_of(client, admin, service_id):
    return client.get(f"/api/services/{service_id}/events", token=admin, params={'per_page': '100'}).json["data"]


def test_the_fields_default_to_off_and_null(panel):
    make, acme, admin = panel
    client, _ = make()
    made = create_service(client, admin, acme, deploy_method="git", git_url=REPO)
    detail = client.get(f"/api/services/{made.json['id']}", token=admin).json
    assert (detail["previews"], detail["previews_from_forks"], detail["preview_of"], detail["preview_number"]) \
        == (False, False, None, None)


def test_create_and_patch_set_the_switches(parent):
    client, _, _, admin, detail = parent
    assert detail["previews"] is True and detail["previews_from_forks"] is False
    patched = client.patch(f"/api/services/{detail['id']}", token=admin, json_body={"previews_from_forks": True})
    assert patched.status_code == 200, patched.text
    assert patched.json["previews_from_forks"] is True and patched.json["previews"] is True
    off = client.patch(f"/api/services/{detail['id']}", token=admin, json_body={"previews": False})
    assert off.json["previews"] is False
    assert client.get(f"/api/services/{detail['id']}", token=admin).json["previews"] is False


@pytest.mark.parametrize("body, field", [
    ({"deploy_method": "template", "template_id": "nginx", "previews": True}, "previews"),
    ({"deploy_method": "compose", "compose": "services:\n  web:\n    image: nginx\n", "previews_from_forks": True},
     "previews_from_forks"),
    ({"deploy_method": "git", "git_url": REPO, "previews": "yes"}, "previews"),
    ({"deploy_method": "git", "git_url": REPO, "previews_from_forks": 1}, "previews_from_forks"),
])
def test_create_refuses_bad_switches(panel, body, field):
    make, acme, admin = panel
    client, _ = make()
    refused = create_service(client, admin, acme, **body)
    assert refused.status_code == 422, refused.text
    assert field in refused.json["error"]["fields"], refused.json
    assert client.get("/api/services", token=admin).json["total"] == 0


def test_patch_refuses_previews_on_a_template_service_and_non_booleans(panel):
    make, acme, admin = panel
    client, _ = make()
    template = create_service(client, admin, acme, deploy_method="template", template_id="static-site").json["id"]
    git = create_service(client, admin, acme, name="gitapp", deploy_method="git", git_url=REPO).json["id"]
    refused = client.patch(f"/api/services/{template}", token=admin, json_body={"previews": True})
    assert refused.status_code == 422 and "previews" in refused.json["error"]["fields"], refused.text
    for body in ({"previews": "true"}, {"previews_from_forks": None}):
        refused = client.patch(f"/api/services/{git}", token=admin, json_body=body)
        assert refused.status_code == 422, refused.text
    assert client.get(f"/api/services/{git}", token=admin).json["previews"] is False


def test_opened_creates_a_preview_with_the_parents_variables_and_a_queued_deploy(parent, store, clock):
    client, app, acme, admin, detail = parent
    answer = call(app, store, clock, detail["id"], pr())
    preview_id, job_id = answer["preview_id"], answer["deploy_job_id"]
    shown = client.get(f"/api/services/{preview_id}", token=admin).json
    assert shown["name"] == "app-pr-7" and shown["customer_id"] == acme.id
    assert shown["deploy_method"] == "git" and shown["git_url"] == REPO and shown["git_branch"] == "feature"
    assert (shown["preview_of"], shown["preview_number"]) == (detail["id"], 7)
    assert shown["previews"] is False and shown["status"] == "deploying"
    assert shown["variables"] == {"MODE": "prod", "DB_PASSWORD": "***", "SLIPWAY_PREVIEW": "1"}
    secrets = client.get(f"/api/services/{preview_id}/secrets", token=admin).json
    assert secrets == {"secrets": {"DB_PASSWORD": "pw-1"}}
    [job] = jobs_of(store, preview_id)
    assert (job.id, job.kind, job.state) == (job_id, "deploy", "queued")
    assert any(HEAD[:12] in e["message"] and "#7" in e["message"] for e in events_of(client, admin, preview_id))


def test_an_ai_service_previews_the_head_branch_of_its_repository(panel, store, clock):
    """Every deploy method that reads a repository has previews: an ai service's preview
    analyses and deploys the request's head branch of its ``ai_url``."""
    make, acme, admin = panel
    client, app = make()
    made = create_service(client, admin, acme, name="ai-app", deploy_method="ai", ai_url=REPO, previews=True)
    assert made.status_code == 201, made.text
    with store.uow() as uow:
        uow.services.update(replace(uow.services.get(made.json["id"]), status="running"))
        uow.commit()
    answer = call(app, store, clock, made.json["id"], pr(number=3))
    shown = client.get(f"/api/services/{answer['preview_id']}", token=admin).json
    assert (shown["name"], shown["deploy_method"], shown["ai_url"], shown["git_branch"]) == \
        ("ai-app-pr-3", "ai", REPO, "feature")
    assert (shown["preview_of"], shown["preview_number"]) == (made.json["id"], 3)
    [job] = jobs_of(store, answer["preview_id"])
    assert (job.id, job.state) == (answer["deploy_job_id"], "queued")


def test_updated_redeploys_the_preview_with_the_new_head(parent, store, clock):
    client, app, _, admin, detail = parent
    first = call(app, store, clock, detail["id"], pr())
    with store.uow() as uow:  # its deploy ended
        uow.deploy_jobs.finish(first["deploy_job_id"], "succeeded", None, clock.now())
        uow.services.update(replace(uow.services.get(first["preview_id"]), status="running"))
        uow.commit()
    again = call(app, store, clock, detail["id"], pr(UPDATED, commit=HEAD2))
    assert again["preview_id"] == first["preview_id"] and again["deploy_job_id"] != first["deploy_job_id"]
    kinds = {(j.id, j.kind, j.state) for j in jobs_of(store, first["preview_id"])}
    assert (again["deploy_job_id"], "redeploy", "queued") in kinds
    assert any(HEAD2[:12] in e["message"] for e in events_of(client, admin, first["preview_id"]))
    assert client.get("/api/services", token=admin).json["total"] == 2  # no second preview


def test_an_update_while_the_preview_deploys_answers_the_job_under_way(parent, store, clock):
    _, app, _, _, detail = parent
    first = call(app, store, clock, detail["id"], pr())
    again = call(app, store, clock, detail["id"], pr(UPDATED, commit=HEAD2))
    assert again == first


def test_reopened_after_closed_makes_it_again_and_closed_deletes_it(parent, store, clock):
    client, app, _, admin, detail = parent
    first = call(app, store, clock, detail["id"], pr())
    engine = Engine()
    gone = call(app, store, clock, detail["id"], pr(CLOSED), runtime=engine)
    assert gone == {"deleted": first["preview_id"]} and list(dict.fromkeys(engine.removed)) == [first["preview_id"]]
    assert client.get(f"/api/services/{first['preview_id']}", token=admin).status_code == 404
    assert call(app, store, clock, detail["id"], pr(CLOSED)) == {"deleted": None}
    back = call(app, store, clock, detail["id"], pr(REOPENED))
    assert back["preview_id"] != first["preview_id"]
    assert client.get(f"/api/services/{back['preview_id']}", token=admin).json["name"] == "app-pr-7"


def test_forks_are_ignored_unless_allowed(parent, store, clock):
    client, app, _, admin, detail = parent
    fork = pr(fork=True, clone_url="https://example.org/someone/site.git")
    assert call(app, store, clock, detail["id"], fork) == {"ignored": "fork"}
    assert client.get("/api/services", token=admin).json["total"] == 1
    client.patch(f"/api/services/{detail['id']}", token=admin, json_body={"previews_from_forks": True})
    made = call(app, store, clock, detail["id"], fork)
    shown = client.get(f"/api/services/{made['preview_id']}", token=admin).json
    assert shown["git_url"] == "https://example.org/someone/site.git" and shown["git_branch"] == "feature"


def test_a_fork_whose_repository_a_create_refuses_makes_no_preview(parent, store, clock):
    client, app, _, admin, detail = parent
    client.patch(f"/api/services/{detail['id']}", token=admin, json_body={"previews_from_forks": True})
    answer = call(app, store, clock, detail["id"], pr(fork=True, clone_url="https://10.1.2.3/x.git"))
    assert answer["preview_id"] is None and "private address" in answer["failed"]
    assert client.get("/api/services", token=admin).json["total"] == 1
    failed = [e for e in events_of(client, admin, detail["id"]) if (e["type"], e["status"]) == ("deploy", "failed")]
    assert failed and "private address" in failed[0]["message"]


def test_other_base_branches_previews_off_and_no_action_are_ignored(parent, store, clock):
    client, app, _, admin, detail = parent
    assert call(app, store, clock, detail["id"], pr(base="develop")) == {"ignored": "branch"}
    assert call(app, store, clock, detail["id"], pr(action=None)) == {"ignored": "action"}
    client.patch(f"/api/services/{detail['id']}", token=admin, json_body={"previews": False})
    assert call(app, store, clock, detail["id"], pr()) == {"ignored": "previews"}
    assert client.get("/api/services", token=admin).json["total"] == 1


def test_a_preview_has_no_previews_of_its_own(parent, store, clock):
    client, app, _, admin, detail = parent
    made = call(app, store, clock, detail["id"], pr())
    assert call(app, store, clock, made["preview_id"], pr()) == {"ignored": "previews"}
    refused = client.patch(f"/api/services/{made['preview_id']}", token=admin, json_body={"previews": True})
    assert refused.status_code == 422 and "previews" in refused.json["error"]["fields"]


def test_past_the_customers_limit_no_preview_and_a_failed_deploy_event_on_the_parent(parent, store, clock):
    client, app, acme, admin, detail = parent
    customers.update_customer(store.uow(), acme.id, {"limits": {"services": 1}})
    answer = call(app, store, clock, detail["id"], pr())
    assert answer["preview_id"] is None and "limits.services" in answer["failed"]
    assert client.get("/api/services", token=admin).json["total"] == 1
    failed = [e for e in events_of(client, admin, detail["id"]) if (e["type"], e["status"]) == ("deploy", "failed")]
    assert len(failed) == 1 and "limits.services" in failed[0]["message"] and "#7" in failed[0]["message"]


def test_the_previews_list(parent, store, clock):
    client, app, _, admin, detail = parent
    for number in (9, 3, 5):
        call(app, store, clock, detail["id"], pr(number=number, head=f"topic-{number}"))
    listed = client.get(f"/api/services/{detail['id']}/previews", token=admin, params={'per_page': '2'})
    assert listed.status_code == 200, listed.text
    assert listed.json["total"] == 3 and [p["preview_number"] for p in listed.json["data"]] == [3, 5]
    assert listed.json["data"][0]["name"] == "app-pr-3" and listed.json["data"][0]["git_branch"] == "topic-3"
    rest = client.get(f"/api/services/{detail['id']}/previews", token=admin, params={'page': '2', 'per_page': '2'})
    assert [p["preview_number"] for p in rest.json["data"]] == [9]
    none = client.get(f"/api/services/{listed.json['data'][0]['id']}/previews", token=admin)
    assert none.json == {"data": [], "total": 0, "page": 1, "per_page": 20}


def test_the_previews_list_4xx(parent, store, clock):
    client, app, acme, admin, detail = parent
    assert client.get("/api/services/svc_nope/previews", token=admin).status_code == 404
    other = customers.create_customer(store.uow(), clock, name="Other")
    _, other_key = access.create_api_key(store.uow(), clock, name="o", role="customer", rate_limit_rpm=1000,
                                         customer_id=other.id)
    assert client.get(f"/api/services/{detail['id']}/previews", token=other_key).status_code == 404
    _, own_key = access.create_api_key(store.uow(), clock, name="a", role="customer", rate_limit_rpm=1000,
                                       customer_id=acme.id)
    assert client.get(f"/api/services/{detail['id']}/previews", token=own_key).status_code == 200
    _, blind = access.create_api_key(store.uow(), clock, name="b", role="admin", rate_limit_rpm=1000,
                                     denied_permissions=["services:read"])
    assert client.get(f"/api/services/{detail['id']}/previews", token=blind).status_code == 403
    assert client.get(f"/api/services/{detail['id']}/previews", token=admin,
                      params={'per_page': '0'}).status_code == 400
    # a customer key creating a service with previews for another customer
    refused = create_service(client, other_key, acme, name="x", deploy_method="git", git_url=REPO, previews=True)
    assert refused.status_code == 403, refused.text


class Engine:
    """What a delete asks of the engine, recorded."""

    def __init__(self):
        self.removed = []

    def remove_service(self, service_id):
        self.removed.append(service_id)

    def remove_image(self, tag):
        pass

    def remove_network(self, name):
        pass


def test_deleting_a_parent_deletes_its_previews(parent, store, clock):
    client, app, _, admin, detail = parent
    one = call(app, store, clock, detail["id"], pr(number=1))["preview_id"]
    two = call(app, store, clock, detail["id"], pr(number=2))["preview_id"]
    engine = Engine()
    principal = access.authenticate_key(store.uow(), clock, admin)
    services.delete_service(store.uow(), engine, principal, detail["id"])
    assert sorted(set(engine.removed)) == sorted([one, two, detail["id"]])  # swept again once its rows are gone
    for service_id in (detail["id"], one, two):
        assert client.get(f"/api/services/{service_id}", token=admin).status_code == 404
    assert client.get("/api/services", token=admin).json["total"] == 0


def test_the_same_request_delivered_twice_at_once_makes_one_preview(parent, store, clock):
    import threading

    client, app, _, admin, detail = parent
    answers, start = [], threading.Barrier(2)

    def deliver():
        start.wait(5)
        answers.append(call(app, store, clock, detail["id"], pr()))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 2 and answers[0]["preview_id"] == answers[1]["preview_id"] is not None, answers
    assert client.get(f"/api/services/{detail['id']}/previews", token=admin).json["total"] == 1
    assert not [e for e in events_of(client, admin, detail["id"]) if e["status"] == "failed"]


def run_preview_jobs(app, client, admin, parent_id, job_id) -> dict:
    """Run the queued preview jobs as the preview worker does (this app runs no workers),
    then answer what ``job_id`` did, read through its route."""
    worker = app.parts.preview_worker
    while (job := worker.claim(None)) is not None:
        worker.work(job)
    done = client.get(f"/api/services/{parent_id}/preview-jobs/{job_id}", token=admin, expect=200).json
    assert done["state"] in ("done", "failed"), done
    return done["answer"]


HOOK_SETTINGS = {"SLIPWAY_GIT_ALLOWED_SCHEMES": "https,file", "SLIPWAY_GIT_ALLOW_PRIVATE": "1"}


def _settled(store, service_id, **fields):
    """The service's first deploy ended (as a worker would have): running, its jobs done."""
    with store.uow() as uow:
        found = uow.services.get(service_id, for_update=True)
        uow.services.update(replace(found, status="running", **fields))
        for job in uow.deploy_jobs.page(service_id, page=1, per_page=100)[0]:
            uow.deploy_jobs.finish(job.id, "succeeded", None, found.created_at)
        uow.commit()


def _key(store, clock, name, denied):
    return access.create_api_key(store.uow(), clock, name=name, role="admin", rate_limit_rpm=10000,
                                 denied_permissions=denied)[1]


@pytest.mark.parametrize("switch", ["previews", "previews_from_forks"])
def test_a_create_with_previews_needs_services_create_and_delete(panel, store, clock, switch):
    """A pull request's delivery creates and deletes a preview service, so turning
    previews on at create needs services:delete too (services:create the create needs
    anyway); without it 403 and nothing is stored."""
    make, acme, admin = panel
    client, _ = make()
    no_delete = _key(store, clock, "no-delete", ["services:delete"])
    refused = create_service(client, no_delete, acme, deploy_method="git", git_url=REPO, **{switch: True})
    assert refused.status_code == 403, refused.text
    assert refused.json["error"]["code"] == "forbidden" and "services:delete" in refused.json["error"]["message"]
    assert client.get("/api/services", token=admin).json["total"] == 0
    # the same key creates it without previews, and an admin key with them
    plain = create_service(client, no_delete, acme, name="plain", deploy_method="git", git_url=REPO,
                           **{switch: False})
    assert plain.status_code == 201, plain.text
    made = create_service(client, admin, acme, deploy_method="git", git_url=REPO, **{switch: True})
    assert made.status_code == 201, made.text
    assert client.get(f"/api/services/{made.json['id']}", token=admin).json[switch] is True


@pytest.mark.parametrize("switch", ["previews", "previews_from_forks"])
@pytest.mark.parametrize("denied", ["services:create", "services:delete"])
def test_turning_previews_on_needs_services_create_and_delete(panel, store, clock, switch, denied):
    make, acme, admin = panel
    client, _ = make()
    service_id = create_service(client, admin, acme, deploy_method="git", git_url=REPO).json["id"]
    _settled(store, service_id)
    before = client.get(f"/api/services/{service_id}", token=admin).json
    key = _key(store, clock, "lacks", [denied])
    refused = client.patch(f"/api/services/{service_id}", token=key, json_body={switch: True})
    assert refused.status_code == 403, refused.text
    assert refused.json["error"]["code"] == "forbidden" and denied in refused.json["error"]["message"]
    assert client.get(f"/api/services/{service_id}", token=admin).json == before  # nothing changed
    # turning them off, or other changes, stay the key's
    assert client.patch(f"/api/services/{service_id}", token=key, json_body={switch: False}).status_code == 200
    turned = client.patch(f"/api/services/{service_id}", token=admin, json_body={switch: True})
    assert turned.status_code == 200 and turned.json[switch] is True, turned.text


@pytest.mark.parametrize("denied", ["services:create", "services:delete"])
def test_the_webhook_secret_of_a_service_with_previews_needs_services_create_and_delete(panel, store, clock,
                                                                                     denied):
    make, acme, admin = panel
    client, _ = make()
    plain = create_service(client, admin, acme, name="plain", deploy_method="git", git_url=REPO).json["id"]
    forks = create_service(client, admin, acme, name="forks", deploy_method="git", git_url=REPO).json["id"]
    _settled(store, forks, previews_from_forks=True)
    armed = create_service(client, admin, acme, deploy_method="git", git_url=REPO, previews=True).json["id"]
    key = _key(store, clock, "lacks", [denied])
    S = store.models.Service
    for service_id in (armed, forks):
        client.post(f"/api/services/{service_id}/webhook-secret", token=admin, expect=200)
        sealed = S.get(S.id == service_id).webhook_secret
        refused = client.post(f"/api/services/{service_id}/webhook-secret", token=key, expect=403)
        assert refused.json["error"]["code"] == "forbidden" and denied in refused.json["error"]["message"]
        assert S.get(S.id == service_id).webhook_secret == sealed  # the old secret still stands
        client.post(f"/api/services/{service_id}/webhook-secret", token=admin, expect=200)
    # a service without previews: services:deploy is enough, as before
    client.post(f"/api/services/{plain}/webhook-secret", token=key, expect=200)


def test_a_forks_preview_gets_no_secrets_and_no_customer_network(panel, store, clock, tmp_path):
    """Signed pull-request deliveries through the webhook route, the fork's repository a
    real one on disk: the fork's preview has the parent's other variables plus
    SLIPWAY_PREVIEW=1 but none of its secret ones, and is off the customer network; a
    request from the parent's own repository keeps both."""
    from tests.support.git_repos import repository
    from tests.support.git_webhooks import github_pull_request

    make, acme, admin = panel
    client, app = make(**HOOK_SETTINGS)
    own_url, _ = repository(tmp_path / "own", {"index.html": "own\n"})
    fork_url, fork_head = repository(tmp_path / "fork", {"index.html": "fork\n"})
    made = create_service(client, admin, acme, deploy_method="git", git_url=own_url, git_branch="main",
                          previews=True, previews_from_forks=True, customer_network=True)
    assert made.status_code == 201, made.text
    parent_id = made.json["id"]
    # the parent's variables, two of them secret, as a service keeps them (git services do not
    # take variables on create yet)
    _settled(store, parent_id, variables={"MODE": "prod", "STRIPE_KEY": "sk_live_parent", "DB_PASSWORD": "pw-1"},
             secrets=("STRIPE_KEY", "DB_PASSWORD"))
    secret = client.post(f"/api/services/{parent_id}/webhook-secret", token=admin, expect=200).json["secret"]

    def deliver(number, fork):
        headers, body = github_pull_request(secret, number, "opened", "main", "feature", fork_head, fork=fork,
                                            head_clone_url=fork_url if fork else None)
        queued = client.post(f"/api/hooks/git/{parent_id}", headers=headers, body=body, expect=202).json
        answer = run_preview_jobs(app, client, admin, parent_id, queued["preview_job_id"])
        assert answer.get("preview_id"), answer
        return client.get(f"/api/services/{answer['preview_id']}", token=admin).json, answer["preview_id"]

    fork, fork_id = deliver(12, fork=True)
    assert fork["git_url"] == fork_url and fork["preview_number"] == 12
    assert fork["variables"] == {"MODE": "prod", "SLIPWAY_PREVIEW": "1"}
    assert fork["customer_network"] is False and fork["connections"] == []
    assert client.get(f"/api/services/{fork_id}/secrets", token=admin).json == {"secrets": {}}
    with store.uow(write=False) as uow:
        stored = uow.services.get(fork_id)
    assert "sk_live_parent" not in repr(stored.variables) and stored.secrets == ()
    assert not stored.customer_network

    same, same_id = deliver(13, fork=False)
    assert same["git_url"] == own_url and same["customer_network"] is True
    assert same["variables"] == {"MODE": "prod", "STRIPE_KEY": "***", "DB_PASSWORD": "***", "SLIPWAY_PREVIEW": "1"}
    assert client.get(f"/api/services/{same_id}/secrets", token=admin).json == \
        {"secrets": {"STRIPE_KEY": "sk_live_parent", "DB_PASSWORD": "pw-1"}}

    # nor by hand: the fork's preview refuses customer_network true (nothing changes); the
    # same-repository one may leave and join it
    _settled(store, fork_id)
    _settled(store, same_id)
    refused = client.patch(f"/api/services/{fork_id}", token=admin, json_body={"customer_network": True},
                           expect=422).json
    assert "fork" in refused["error"]["fields"]["customer_network"]
    assert client.get(f"/api/services/{fork_id}", token=admin).json["customer_network"] is False
    assert client.patch(f"/api/services/{fork_id}", token=admin, json_body={"customer_network": False},
                        expect=200).json["customer_network"] is False
    assert client.patch(f"/api/services/{same_id}", token=admin, json_body={"customer_network": False},
                        expect=200).json["customer_network"] is False
    assert client.patch(f"/api/services/{same_id}", token=admin, json_body={"customer_network": True},
                        expect=200).json["customer_network"] is True


PINNED = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"


def test_a_same_repository_preview_keeps_the_parents_host_key_and_a_forks_learns_its_own(parent, store, clock):
    """``core.panel.host_keys``: a preview of the parent's repository clones with the pin
    its parent's clones checked (no first clone trusting whatever it is shown); a fork's
    repository is another server: its preview pins its own, anew when its URL changes."""
    client, app, _, admin, detail = parent
    with store.uow() as uow:
        uow.services.update(replace(uow.services.get(detail["id"]), ssh_host_key=PINNED))
        uow.commit()
    same = call(app, store, clock, detail["id"], pr())
    with store.uow(write=False) as uow:
        assert uow.services.get(same["preview_id"]).ssh_host_key == PINNED
    assert client.get(f"/api/services/{same['preview_id']}", token=admin).json["ssh_host_key"] == \
        "SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU"

    client.patch(f"/api/services/{detail['id']}", token=admin, json_body={"previews_from_forks": True})
    fork = call(app, store, clock, detail["id"],
                pr(number=8, fork=True, clone_url="https://example.org/someone/site.git"))
    _settled(store, fork["preview_id"], ssh_host_key=PINNED)  # as if its first clone had pinned one
    moved = call(app, store, clock, detail["id"], pr(UPDATED, number=8, fork=True, commit=HEAD2,
                                                     clone_url="https://example.org/someone-else/site.git"))
    assert moved["preview_id"] == fork["preview_id"]
    with store.uow(write=False) as uow:
        assert uow.services.get(fork["preview_id"]).ssh_host_key is None  # another repository: learned anew
