"""Git provider ``github``: GitHub's webhook deliveries (``POST /api/hooks/git/{id}``).

GitHub signs the body with the webhook's secret: ``X-Hub-Signature-256: sha256=`` and the
HMAC-SHA256 of the body in hex (the older ``X-Hub-Signature``, SHA-1, is not read). The
event is ``X-GitHub-Event`` (``push``, ``pull_request``, ``ping``; others are read as
events Slipway does not act on), the delivery's id ``X-GitHub-Delivery`` (the same when
GitHub redelivers it). Deliveries must be sent as JSON (the webhook's content type
``application/json``).

A Gitea or Forgejo delivery also carries ``X-GitHub-Event``: one with ``X-Gitea-Event``,
``X-Forgejo-Event`` or ``X-Gogs-Event`` is not GitHub's (``plugins.git_gitea`` reads it).
"""
from __future__ import annotations

from ports import hookimpl
from ports.git_providers import (CLOSED, OPENED, OTHER, PING, PULL_REQUEST, PUSH, REOPENED, UPDATED, GitEvent,
                                 GitProvider, GitProviderFactory, PullRequest, commit_of, field, hmac_sha256_hex,
                                 load_json, other_repository, push_of, same)

NAME = "github"
ACTIONS = {"opened": OPENED, "reopened": REOPENED, "synchronize": UPDATED, "closed": CLOSED}
OTHER_FORGES = ("x-gitea-event", "x-forgejo-event", "x-gogs-event")


def pull_request_of(document: dict, actions: dict) -> PullRequest:
    """A pull request of GitHub's (and Gitea's, which copies it) ``pull_request`` payload."""
    pr = field(document, "pull_request", dict)
    number = document.get("number")
    if not isinstance(number, int) or isinstance(number, bool):
        number = field(pr, "number", int)
    action = field(document, "action")
    head_repo = pr.get("head", {}).get("repo") if isinstance(pr.get("head"), dict) else None
    base_repo = pr.get("base", {}).get("repo") if isinstance(pr.get("base"), dict) else None
    return PullRequest(number=number, action=actions.get(action), base_branch=field(pr, "base.ref"),
                       head_branch=field(pr, "head.ref"),
                       head_commit=commit_of(field(pr, "head.sha"), "pull_request.head.sha"),
                       from_fork=other_repository(head_repo, base_repo),
                       head_clone_url=head_repo.get("clone_url") if isinstance(head_repo, dict)
                       and isinstance(head_repo.get("clone_url"), str) else None)


class GitHub(GitProvider):
    name = NAME

    def recognizes(self, headers) -> bool:
        return "x-github-event" in headers and not any(name in headers for name in OTHER_FORGES)

    def verify(self, headers, body: bytes, secret: str) -> bool:
        given = headers.get("x-hub-signature-256") or ""
        if not given.startswith("sha256="):
            return False
        return same(given[len("sha256="):].lower(), hmac_sha256_hex(secret, body))

    def delivery_id(self, headers):
        return headers.get("x-github-delivery") or None

    def parse(self, headers, body: bytes) -> GitEvent:
        event = (headers.get("x-github-event") or "").strip()
        if event == "ping":
            return GitEvent(NAME, PING, event)
        if event not in ("push", "pull_request"):
            return GitEvent(NAME, OTHER, event)
        document = load_json(body)
        if event == "push":
            push = push_of(document)
            return GitEvent(NAME, PUSH, event, push=push) if push is not None else GitEvent(NAME, OTHER, event)
        return GitEvent(NAME, PULL_REQUEST, event, pull_request=pull_request_of(document, ACTIONS))


class GitHubFactory(GitProviderFactory):
    name = NAME

    def create(self, settings) -> GitProvider:
        return GitHub()


@hookimpl
def register_git_providers():
    return [GitHubFactory()]
