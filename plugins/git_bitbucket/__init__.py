"""Git provider ``bitbucket``: Bitbucket Cloud's webhook deliveries (``POST
/api/hooks/git/{id}``).

Bitbucket Cloud signs the body with the webhook's secret: ``X-Hub-Signature: sha256=`` and
the HMAC-SHA256 of the body in hex. The event is ``X-Event-Key``: ``repo:push``,
``pullrequest:created``, ``pullrequest:updated``, ``pullrequest:fulfilled`` (merged),
``pullrequest:rejected`` (declined), ``diagnostics:ping`` (others are read as events
Slipway does not act on); the delivery's id ``X-Request-UUID``.

A push is ``push.changes[]``: the first change of a branch is read, ``new.name`` at
``new.target.hash`` (``new`` null: the branch was deleted). Bitbucket's payloads do not
name the repository's main branch: a service without ``git_branch`` tracks the branch its
last deploy cloned (``core.panel.pushes``). A pull request is ``pullrequest``: ``id``, ``source`` and ``destination``
(``branch.name``, ``commit.hash``, ``repository``); it is a fork's when the two
repositories differ (``uuid``, else ``full_name``).
"""
from __future__ import annotations

import re

from ports import hookimpl
from ports.git_providers import (CLOSED, OPENED, OTHER, PING, PULL_REQUEST, PUSH, UPDATED, ZERO_COMMIT, GitEvent,
                                 GitProvider, GitProviderFactory, PayloadError, Push, PullRequest, commit_of, field,
                                 hmac_sha256_hex, load_json, same)

NAME = "bitbucket"
ACTIONS = {"pullrequest:created": OPENED, "pullrequest:updated": UPDATED, "pullrequest:fulfilled": CLOSED,
           "pullrequest:rejected": CLOSED}
_SHORT_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")  # a pull request's commit.hash is abbreviated (12 digits)


def _same_repository(one, other) -> bool:
    if not isinstance(one, dict) or not isinstance(other, dict):
        return False
    for key in ("uuid", "full_name"):
        if one.get(key) is not None and other.get(key) is not None:
            return one[key] == other[key]
    return False


def _clone_url(repository) -> str | None:
    if not isinstance(repository, dict):
        return None
    href = field(repository, "links.html.href", optional=True)
    if href:
        return href.rstrip("/") + ".git"
    name = repository.get("full_name")
    return f"https://bitbucket.org/{name}.git" if isinstance(name, str) else None


def _push(document: dict) -> Push | None:
    changes = field(document, "push.changes", list)
    for index, change in enumerate(changes):
        if not isinstance(change, dict):
            raise PayloadError(f"push.changes[{index}]: not an object")
        new, old = change.get("new"), change.get("old")
        if isinstance(new, dict) and new.get("type") == "branch":
            return Push(branch=field(new, "name"),
                        commit=commit_of(field(new, "target.hash"), f"push.changes[{index}].new.target.hash"))
        if new is None and isinstance(old, dict) and old.get("type") == "branch":
            return Push(branch=field(old, "name"), commit=ZERO_COMMIT, deleted=True)
    return None  # tags only


class Bitbucket(GitProvider):
    name = NAME

    def recognizes(self, headers) -> bool:
        return "x-event-key" in headers

    def verify(self, headers, body: bytes, secret: str) -> bool:
        given = headers.get("x-hub-signature") or ""
        if not given.startswith("sha256="):
            return False
        return same(given[len("sha256="):].lower(), hmac_sha256_hex(secret, body))

    def delivery_id(self, headers):
        return headers.get("x-request-uuid") or None

    def parse(self, headers, body: bytes) -> GitEvent:
        event = (headers.get("x-event-key") or "").strip()
        if event == "diagnostics:ping":
            return GitEvent(NAME, PING, event)
        if event == "repo:push":
            push = _push(load_json(body))
            return GitEvent(NAME, PUSH, event, push=push) if push is not None else GitEvent(NAME, OTHER, event)
        if event in ACTIONS:
            pr = field(load_json(body), "pullrequest", dict)
            head = field(pr, "source.commit.hash").strip().lower()
            if not _SHORT_COMMIT.fullmatch(head):
                raise PayloadError("pullrequest.source.commit.hash: not a commit hash")
            source_repo = field(pr, "source.repository", dict, optional=True)
            target_repo = field(pr, "destination.repository", dict, optional=True)
            request = PullRequest(number=field(pr, "id", int), action=ACTIONS[event],
                                  base_branch=field(pr, "destination.branch.name"),
                                  head_branch=field(pr, "source.branch.name"), head_commit=head,
                                  from_fork=not _same_repository(source_repo, target_repo),
                                  head_clone_url=_clone_url(source_repo))
            return GitEvent(NAME, PULL_REQUEST, event, pull_request=request)
        return GitEvent(NAME, OTHER, event)


class BitbucketFactory(GitProviderFactory):
    name = NAME

    def create(self, settings) -> GitProvider:
        return Bitbucket()


@hookimpl
def register_git_providers():
    return [BitbucketFactory()]
