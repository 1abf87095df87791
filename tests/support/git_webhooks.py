"""Webhook deliveries shaped and signed as each git provider documents them (GitHub,
GitLab, Gitea/Forgejo, Bitbucket Cloud): ``push(provider, secret, branch, commit)``
answers ``(headers, body)`` for ``POST /api/hooks/git/{id}``."""
from __future__ import annotations

import hashlib
import hmac
import json
import uuid

PROVIDERS = ("github", "gitlab", "gitea", "bitbucket")
ZERO = "0" * 40


def sign(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _repository(name: str = "acme/app", rid: int = 1, default_branch: str | None = "main") -> dict:
    out = {"id": rid, "name": name.split("/")[-1], "full_name": name, "default_branch": default_branch,
           "clone_url": f"https://git.example/{name}.git", "html_url": f"https://git.example/{name}"}
    return out if default_branch is not None else {k: v for k, v in out.items() if k != "default_branch"}


def push_payload(provider: str, branch: str, commit: str, *, before: str = ZERO, deleted: bool = False,
                 default_branch: str | None = "main") -> dict:
    """A push payload of ``provider`` (the fields its documentation shows); ``default_branch``
    None leaves the repository's default branch out (Bitbucket's never name it)."""
    ref = f"refs/heads/{branch}"
    after = ZERO if deleted else commit
    if provider in ("github", "gitea"):
        body = {"ref": ref, "before": before, "after": after, "compare_url": "",
                "repository": _repository(default_branch=default_branch),
                "pusher": {"name": "dev", "email": "dev@example.com"}, "sender": {"login": "dev", "id": 7},
                "commits": [] if deleted else [{"id": commit, "message": "change", "url": ""}],
                "head_commit": None if deleted else {"id": commit, "message": "change"}}
        if provider == "github":
            body.update(created=before == ZERO, deleted=deleted, forced=False, base_ref=None)
        return body
    if provider == "gitlab":
        project = {"id": 15, "name": "app", "path_with_namespace": "acme/app", "default_branch": default_branch,
                   "git_http_url": "https://gitlab.example/acme/app.git"}
        if default_branch is None:
            del project["default_branch"]
        return {"object_kind": "push", "event_name": "push", "before": before, "after": after, "ref": ref,
                "ref_protected": True, "checkout_sha": None if deleted else commit, "user_id": 4,
                "user_name": "dev", "project_id": 15, "project": project,
                "commits": [] if deleted else [{"id": commit, "message": "change"}],
                "total_commits_count": 0 if deleted else 1,
                "repository": {"name": "app", "homepage": "https://gitlab.example/acme/app"}}
    if provider == "bitbucket":
        target = {"type": "commit", "hash": commit, "message": "change\n", "author": {"raw": "dev <dev@example.com>"}}
        new = None if deleted else {"type": "branch", "name": branch, "target": target}
        old = {"type": "branch", "name": branch, "target": {"type": "commit", "hash": before}} \
            if before != ZERO or deleted else None
        return {"actor": {"display_name": "dev"},
                "repository": {"type": "repository", "full_name": "acme/app", "name": "app",
                               "uuid": "{11111111-1111-1111-1111-111111111111}",
                               "links": {"html": {"href": "https://bitbucket.org/acme/app"}}},
                "push": {"changes": [{"new": new, "old": old, "created": old is None, "closed": deleted,
                                      "forced": False, "truncated": False, "commits": []}]}}
    raise ValueError(provider)


def headers_for(provider: str, secret: str | None, body: bytes, event: str | None = None,
                delivery: str | None = None) -> dict:
    """The headers ``provider`` sends with ``body`` for ``event`` (default: a push),
    signed with ``secret`` (None: unsigned)."""
    delivery = delivery or str(uuid.uuid4())
    headers = {"Content-Type": "application/json"}
    if provider == "github":
        headers.update({"X-GitHub-Event": event or "push", "X-GitHub-Delivery": delivery,
                        "X-GitHub-Hook-ID": "1", "User-Agent": "GitHub-Hookshot/abc"})
        if secret is not None:
            headers["X-Hub-Signature-256"] = "sha256=" + sign(secret, body)
    elif provider == "gitlab":
        headers.update({"X-Gitlab-Event": event or "Push Hook", "X-Gitlab-Event-UUID": delivery,
                        "X-Gitlab-Instance": "https://gitlab.example", "User-Agent": "GitLab/17.0.0"})
        if secret is not None:
            headers["X-Gitlab-Token"] = secret
    elif provider == "gitea":
        name = event or "push"
        headers.update({"X-Gitea-Event": name, "X-Gitea-Event-Type": name, "X-Gitea-Delivery": delivery,
                        "X-GitHub-Event": name, "X-GitHub-Delivery": delivery, "X-Gogs-Event": name,
                        "X-Gogs-Delivery": delivery})
        if secret is not None:
            signature = sign(secret, body)
            headers.update({"X-Gitea-Signature": signature, "X-Gogs-Signature": signature,
                            # as Gitea sends it: GitHub's header signed the same way
                            "X-Hub-Signature-256": "sha256=" + signature})
    elif provider == "bitbucket":
        headers.update({"X-Event-Key": event or "repo:push", "X-Request-UUID": delivery,
                        "X-Hook-UUID": "{22222222-2222-2222-2222-222222222222}",
                        "User-Agent": "Bitbucket-Webhooks/2.0"})
        if secret is not None:
            headers["X-Hub-Signature"] = "sha256=" + sign(secret, body)
    return headers


def push(provider: str, secret: str | None, branch: str, commit: str, *, delivery: str | None = None,
         deleted: bool = False, default_branch: str | None = "main") -> tuple[dict, bytes]:
    body = json.dumps(push_payload(provider, branch, commit, deleted=deleted, default_branch=default_branch)).encode()
    return headers_for(provider, secret, body, delivery=delivery), body


PING_EVENTS = {"github": "ping", "bitbucket": "diagnostics:ping"}


def github_pull_request(secret: str, number: int, action: str, base: str, head_branch: str, commit: str, *,
                        fork: bool = False, head_clone_url: str | None = None) -> tuple[dict, bytes]:
    """A ``pull_request`` delivery of GitHub's (``action``: ``opened``, ``synchronize``,
    ``closed``, ...), signed with ``secret``; ``fork``: its head in another repository
    (``head_clone_url``: that repository's clone URL, else a made-up one)."""
    head_repo = _repository("someone/app", rid=2) if fork else _repository()
    if fork and head_clone_url:
        head_repo["clone_url"] = head_clone_url
    body = json.dumps({"action": action, "number": number, "pull_request": {
        "number": number, "state": "closed" if action == "closed" else "open", "merged": False,
        "head": {"ref": head_branch, "sha": commit, "repo": head_repo},
        "base": {"ref": base, "sha": ZERO, "repo": _repository()}},
        "repository": _repository()}).encode()
    return headers_for("github", secret, body, event="pull_request"), body


def ping(provider: str, secret: str) -> tuple[dict, bytes]:
    body = json.dumps({"zen": "Keep it logically awesome.", "hook_id": 1} if provider == "github"
                      else {"message": "ping"}).encode()
    return headers_for(provider, secret, body, event=PING_EVENTS[provider]), body
