"""The git providers' plugins (``plugins.git_*``): which deliveries each recognises, how
it verifies them (in constant time), and how it reads pushes and pull requests as each
provider's documentation shapes them; a malformed body is ``PayloadError`` (422)."""
from __future__ import annotations

import json

import pytest

import ports.git_providers as port
from plugins.git_bitbucket import BitbucketFactory
from plugins.git_gitea import GiteaFactory
from plugins.git_github import GitHubFactory
from plugins.git_gitlab import GitLabFactory
from ports.git_providers import CLOSED, OPENED, OTHER, PING, PULL_REQUEST, PUSH, REOPENED, UPDATED, PayloadError
from tests.support.git_webhooks import PROVIDERS, headers_for, ping, push, sign

SECRET = "s3cret-webhook"
SHA = "a" * 40
HEAD = "b" * 40
FACTORIES = {"github": GitHubFactory, "gitlab": GitLabFactory, "gitea": GiteaFactory, "bitbucket": BitbucketFactory}


def provider(name):
    return FACTORIES[name]().create({})


def lower(headers: dict) -> dict:
    return {k.lower(): v for k, v in headers.items()}


def recognisers(headers) -> list:
    return [name for name in PROVIDERS if provider(name).recognizes(lower(headers))]


@pytest.mark.parametrize("name", PROVIDERS)
def test_each_delivery_is_recognised_by_its_provider_only(name):
    headers, _ = push(name, SECRET, "main", SHA)
    assert recognisers(headers) == [name]  # gitea's deliveries carry X-GitHub-Event too: github leaves them
    assert recognisers({"Content-Type": "application/json"}) == []


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_push_verified_and_read(name):
    headers, body = push(name, SECRET, "main", SHA, delivery="d-1")
    p, h = provider(name), lower(headers)
    assert p.verify(h, body, SECRET)
    assert p.delivery_id(h) == "d-1"
    event = p.parse(h, body)
    assert (event.provider, event.kind) == (name, PUSH)
    assert (event.push.branch, event.push.commit, event.push.deleted) == ("main", SHA, False)
    if name != "bitbucket":
        assert event.push.default_branch == "main"


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_bad_or_missing_signature_is_refused(name):
    headers, body = push(name, SECRET, "main", SHA)
    p = provider(name)
    assert not p.verify(lower(headers), body, "another secret")
    assert not p.verify(lower(headers), body + b" ", SECRET) or name == "gitlab"  # GitLab signs nothing: its token
    unsigned, _ = push(name, None, "main", SHA)
    assert not p.verify(lower(unsigned), body, SECRET)
    mangled = {k: ("sha1=" + v[7:] if v.startswith("sha256=") else v + "x") for k, v in lower(headers).items()
               if k in ("x-hub-signature-256", "x-hub-signature", "x-gitea-signature", "x-gitlab-token")}
    assert not p.verify({**lower(headers), **mangled}, body, SECRET)


@pytest.mark.parametrize("name", PROVIDERS)
def test_the_signature_is_compared_in_constant_time(name, monkeypatch):
    calls = []
    real = port.hmac.compare_digest

    def spy(a, b):
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(port.hmac, "compare_digest", spy)
    headers, body = push(name, SECRET, "main", SHA)
    assert provider(name).verify(lower(headers), body, SECRET)
    assert calls, "verify must compare with hmac.compare_digest"
    expected = SECRET if name == "gitlab" else sign(SECRET, body)
    assert calls[-1][1] == expected.encode()


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_deleted_branch_is_a_deletion(name):
    headers, body = push(name, SECRET, "main", SHA, deleted=True)
    event = provider(name).parse(lower(headers), body)
    assert event.kind == PUSH and event.push.deleted and event.push.branch == "main"


@pytest.mark.parametrize("name", ["github", "gitlab", "gitea"])
def test_a_tag_push_is_not_acted_on(name):
    body = json.dumps({"ref": "refs/tags/v1", "before": "0" * 40, "after": SHA, "checkout_sha": SHA}).encode()
    event = provider(name).parse(lower(headers_for(name, SECRET, body)), body)
    assert event.kind == OTHER


@pytest.mark.parametrize("name", ["github", "bitbucket"])
def test_ping(name):
    headers, body = ping(name, SECRET)
    p = provider(name)
    assert p.verify(lower(headers), body, SECRET)
    assert p.parse(lower(headers), body).kind == PING


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b'{"ref": 5, "after": "x"}', b'{"ref": "refs/heads/main"}',
                                  b'{"ref": "refs/heads/main", "after": "nothex", "checkout_sha": "nothex"}',
                                  b'{"push": {"changes": "x"}}', b'{"push": {"changes": [{"new": {"type": "branch", '
                                                                 b'"name": "main", "target": {"hash": 7}}}]}}',
                                  b"\xff\xfe"])
def test_a_malformed_push_is_a_payload_error(name, body):
    with pytest.raises(PayloadError):
        provider(name).parse(lower(headers_for(name, SECRET, body)), body)


def _github_pr(action, *, fork=False, repo_id=1):
    base_repo = {"id": 1, "full_name": "acme/app", "clone_url": "https://github.com/acme/app.git"}
    head_repo = {"id": 2, "full_name": "mallory/app", "clone_url": "https://github.com/mallory/app.git"} \
        if fork else base_repo
    return {"action": action, "number": 42,
            "pull_request": {"number": 42, "state": "open", "merged": False,
                             "head": {"ref": "feature", "sha": HEAD, "repo": head_repo},
                             "base": {"ref": "main", "sha": SHA, "repo": base_repo}},
            "repository": base_repo}


@pytest.mark.parametrize(("action", "mapped"), [("opened", OPENED), ("reopened", REOPENED),
                                                ("synchronize", UPDATED), ("closed", CLOSED), ("labeled", None)])
def test_github_pull_requests(action, mapped):
    body = json.dumps(_github_pr(action)).encode()
    event = provider("github").parse(lower(headers_for("github", SECRET, body, event="pull_request")), body)
    assert event.kind == PULL_REQUEST
    pr = event.pull_request
    assert (pr.number, pr.action, pr.base_branch, pr.head_branch, pr.head_commit, pr.from_fork) == (
        42, mapped, "main", "feature", HEAD, False)


def test_a_pull_request_from_a_fork():
    body = json.dumps(_github_pr("opened", fork=True)).encode()
    pr = provider("github").parse(lower(headers_for("github", SECRET, body, event="pull_request")), body).pull_request
    assert pr.from_fork and pr.head_clone_url == "https://github.com/mallory/app.git"
    gone = _github_pr("opened")
    gone["pull_request"]["head"]["repo"] = None  # a deleted fork
    body = json.dumps(gone).encode()
    assert provider("github").parse(lower(headers_for("github", SECRET, body, event="pull_request")),
                                    body).pull_request.from_fork


@pytest.mark.parametrize(("action", "mapped"), [("opened", OPENED), ("reopened", REOPENED),
                                                ("synchronized", UPDATED), ("closed", CLOSED), ("edited", None)])
def test_gitea_pull_requests(action, mapped):
    pr = _github_pr(action, fork=True)
    pr["pull_request"]["head"]["repo_id"], pr["pull_request"]["base"]["repo_id"] = 2, 1
    body = json.dumps(pr).encode()
    event = provider("gitea").parse(lower(headers_for("gitea", SECRET, body, event="pull_request")), body)
    got = event.pull_request
    assert (got.number, got.action, got.base_branch, got.head_branch, got.head_commit, got.from_fork) == (
        42, mapped, "main", "feature", HEAD, True)


@pytest.mark.parametrize(("action", "oldrev", "mapped"), [("open", None, OPENED), ("reopen", None, REOPENED),
                                                          ("update", SHA, UPDATED), ("update", None, None),
                                                          ("close", None, CLOSED), ("merge", None, CLOSED),
                                                          ("approved", None, None)])
def test_gitlab_merge_requests(action, oldrev, mapped):
    attributes = {"iid": 7, "action": action, "source_branch": "feature", "target_branch": "main",
                  "source_project_id": 15, "target_project_id": 15, "last_commit": {"id": HEAD},
                  "source": {"git_http_url": "https://gitlab.example/acme/app.git"}}
    if oldrev:
        attributes["oldrev"] = oldrev
    body = json.dumps({"object_kind": "merge_request", "object_attributes": attributes}).encode()
    event = provider("gitlab").parse(lower(headers_for("gitlab", SECRET, body, event="Merge Request Hook")), body)
    pr = event.pull_request
    assert (pr.number, pr.action, pr.base_branch, pr.head_branch, pr.head_commit, pr.from_fork) == (
        7, mapped, "main", "feature", HEAD, False)
    attributes["source_project_id"] = 99
    body = json.dumps({"object_kind": "merge_request", "object_attributes": attributes}).encode()
    assert provider("gitlab").parse(lower(headers_for("gitlab", SECRET, body, event="Merge Request Hook")),
                                    body).pull_request.from_fork


@pytest.mark.parametrize(("key", "mapped"), [("pullrequest:created", OPENED), ("pullrequest:updated", UPDATED),
                                             ("pullrequest:fulfilled", CLOSED), ("pullrequest:rejected", CLOSED)])
def test_bitbucket_pull_requests(key, mapped):
    repo = {"full_name": "acme/app", "uuid": "{1}", "links": {"html": {"href": "https://bitbucket.org/acme/app"}}}
    fork = {"full_name": "mallory/app", "uuid": "{2}", "links": {"html": {"href": "https://bitbucket.org/mallory/app"}}}
    body = json.dumps({"pullrequest": {
        "id": 3, "title": "x", "state": "OPEN",
        "source": {"branch": {"name": "feature"}, "commit": {"hash": HEAD[:12]}, "repository": fork},
        "destination": {"branch": {"name": "main"}, "commit": {"hash": SHA[:12]}, "repository": repo}}}).encode()
    pr = provider("bitbucket").parse(lower(headers_for("bitbucket", SECRET, body, event=key)), body).pull_request
    assert (pr.number, pr.action, pr.base_branch, pr.head_branch, pr.head_commit, pr.from_fork) == (
        3, mapped, "main", "feature", HEAD[:12], True)
    assert pr.head_clone_url == "https://bitbucket.org/mallory/app.git"


@pytest.mark.parametrize(("name", "event"), [("github", "pull_request"), ("gitlab", "Merge Request Hook"),
                                             ("gitea", "pull_request"), ("bitbucket", "pullrequest:created")])
def test_a_malformed_pull_request_is_a_payload_error(name, event):
    for body in (b"{}", b'{"action": "opened", "pull_request": {"number": "x"}}',
                 b'{"object_attributes": {"iid": true}}', b'{"pullrequest": {"id": 1}}'):
        with pytest.raises(PayloadError):
            provider(name).parse(lower(headers_for(name, SECRET, body, event=event)), body)


@pytest.mark.parametrize(("name", "event"), [("github", "issues"), ("gitlab", "Tag Push Hook"), ("gitea", "create"),
                                             ("bitbucket", "repo:fork")])
def test_other_events_are_not_acted_on(name, event):
    body = b"{}"
    assert provider(name).parse(lower(headers_for(name, SECRET, body, event=event)), body).kind == OTHER
