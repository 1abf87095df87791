"""Git provider ``gitea``: Gitea's and Forgejo's webhook deliveries (``POST
/api/hooks/git/{id}``).

Gitea signs the body with the webhook's secret: ``X-Gitea-Signature`` is the HMAC-SHA256
of the body in hex, with no prefix (Forgejo sends the same as ``X-Forgejo-Signature``
too). The event is ``X-Gitea-Event`` (or ``X-Forgejo-Event``): ``push``,
``pull_request`` (others are read as events Slipway does not act on); the delivery's id
``X-Gitea-Delivery`` (``X-Forgejo-Delivery``). Gitea also sends ``X-GitHub-Event`` and
``X-Gogs-Event``: the Gitea headers are what make a delivery Gitea's
(``plugins.git_github`` leaves such a delivery alone). The payloads are GitHub's shapes:
a push's ``ref`` and ``after``, a pull request's ``action`` (``opened``, ``reopened``,
``synchronized``, ``closed``), ``number`` and ``pull_request.head``/``base``.
"""
from __future__ import annotations

from ports import hookimpl
from ports.git_providers import (CLOSED, OPENED, OTHER, PULL_REQUEST, PUSH, REOPENED, UPDATED, GitEvent, GitProvider,
                                 GitProviderFactory, PullRequest, commit_of, field, hmac_sha256_hex, load_json,
                                 other_repository, push_of, same)

NAME = "gitea"
ACTIONS = {"opened": OPENED, "reopened": REOPENED, "synchronized": UPDATED, "closed": CLOSED}


def _header(headers, suffix: str):
    return headers.get(f"x-gitea-{suffix}") or headers.get(f"x-forgejo-{suffix}")


def _from_fork(head: dict, base: dict) -> bool:
    if head.get("repo_id") is not None and base.get("repo_id") is not None:
        return head["repo_id"] != base["repo_id"]
    return other_repository(head.get("repo"), base.get("repo"))


class Gitea(GitProvider):
    name = NAME

    def recognizes(self, headers) -> bool:
        return "x-gitea-event" in headers or "x-forgejo-event" in headers

    def verify(self, headers, body: bytes, secret: str) -> bool:
        given = _header(headers, "signature")
        return bool(given) and same(given.lower(), hmac_sha256_hex(secret, body))

    def delivery_id(self, headers):
        return _header(headers, "delivery") or None

    def parse(self, headers, body: bytes) -> GitEvent:
        event = (_header(headers, "event") or "").strip()
        if event not in ("push", "pull_request"):
            return GitEvent(NAME, OTHER, event)
        document = load_json(body)
        if event == "push":
            push = push_of(document)
            return GitEvent(NAME, PUSH, event, push=push) if push is not None else GitEvent(NAME, OTHER, event)
        pr = field(document, "pull_request", dict)
        head, base = field(pr, "head", dict), field(pr, "base", dict)
        number = document.get("number")
        if not isinstance(number, int) or isinstance(number, bool):
            number = field(pr, "number", int)
        head_repo = head.get("repo") if isinstance(head.get("repo"), dict) else {}
        request = PullRequest(number=number, action=ACTIONS.get(field(document, "action")),
                              base_branch=field(base, "ref"), head_branch=field(head, "ref"),
                              head_commit=commit_of(field(head, "sha"), "pull_request.head.sha"),
                              from_fork=_from_fork(head, base),
                              head_clone_url=head_repo.get("clone_url") if isinstance(head_repo.get("clone_url"), str)
                              else None)
        return GitEvent(NAME, PULL_REQUEST, event, pull_request=request)


class GiteaFactory(GitProviderFactory):
    name = NAME

    def create(self, settings) -> GitProvider:
        return Gitea()


@hookimpl
def register_git_providers():
    return [GiteaFactory()]
