"""Git provider ``gitlab``: GitLab's webhook deliveries (``POST /api/hooks/git/{id}``).

GitLab does not sign the body: it sends the webhook's secret token as it is, in
``X-Gitlab-Token``, which must equal the service's webhook secret (compared in constant
time). The event is ``X-Gitlab-Event``: ``Push Hook``, ``Merge Request Hook`` (others,
``Tag Push Hook`` and the rest, are read as events Slipway does not act on); the
delivery's id ``X-Gitlab-Event-UUID`` (the same when GitLab sends it again; without it,
``Idempotency-Key``).

A push is ``ref`` (``refs/heads/<branch>``) at ``checkout_sha`` (else ``after``); a
deleted branch has ``after`` all zeros and no ``checkout_sha``; the project's
``default_branch`` is what a service without ``git_branch`` tracks before a release
recorded the branch its clone checked out (``core.panel.pushes``). A merge request is
``object_attributes``: ``iid``, ``action`` (``open``, ``reopen``, ``update`` with
``oldrev``, i.e. new commits; ``close``, ``merge``), ``source_branch``,
``target_branch``, ``last_commit.id``; it is a fork's when ``source_project_id`` is not
``target_project_id``.
"""
from __future__ import annotations

from ports import hookimpl
from ports.git_providers import (CLOSED, OPENED, OTHER, PULL_REQUEST, PUSH, REOPENED, UPDATED, ZERO_COMMIT, GitEvent,
                                 GitProvider, GitProviderFactory, Push, PullRequest, branch_of_ref, commit_of, field,
                                 load_json, same)

NAME = "gitlab"
ACTIONS = {"open": OPENED, "reopen": REOPENED, "close": CLOSED, "merge": CLOSED}


class GitLab(GitProvider):
    name = NAME

    def recognizes(self, headers) -> bool:
        return "x-gitlab-event" in headers

    def verify(self, headers, body: bytes, secret: str) -> bool:
        given = headers.get("x-gitlab-token")
        return bool(given) and same(given, secret)

    def delivery_id(self, headers):
        return headers.get("x-gitlab-event-uuid") or headers.get("idempotency-key") or None

    def parse(self, headers, body: bytes) -> GitEvent:
        event = (headers.get("x-gitlab-event") or "").strip()
        if event == "Push Hook":
            document = load_json(body)
            branch = branch_of_ref(field(document, "ref"))
            if branch is None:
                return GitEvent(NAME, OTHER, event)
            after = field(document, "after")
            checkout = field(document, "checkout_sha", optional=True)
            deleted = after.strip("0") == "" and not checkout
            commit = ZERO_COMMIT if deleted else commit_of(checkout or after,
                                                           "checkout_sha" if checkout else "after")
            default = field(document, "project.default_branch", optional=True)
            return GitEvent(NAME, PUSH, event, push=Push(branch=branch, commit=commit, deleted=deleted,
                                                          default_branch=default))
        if event == "Merge Request Hook":
            document = load_json(body)
            attributes = field(document, "object_attributes", dict)
            action = field(attributes, "action", optional=True)
            mapped = ACTIONS.get(action)
            if action == "update" and attributes.get("oldrev"):  # new commits; other updates change no code
                mapped = UPDATED
            source, target = attributes.get("source_project_id"), attributes.get("target_project_id")
            clone_url = field(attributes, "source.git_http_url", optional=True)
            request = PullRequest(number=field(attributes, "iid", int), action=mapped,
                                  base_branch=field(attributes, "target_branch"),
                                  head_branch=field(attributes, "source_branch"),
                                  head_commit=commit_of(field(attributes, "last_commit.id"),
                                                        "object_attributes.last_commit.id"),
                                  from_fork=source is None or target is None or source != target,
                                  head_clone_url=clone_url)
            return GitEvent(NAME, PULL_REQUEST, event, pull_request=request)
        return GitEvent(NAME, OTHER, event)


class GitLabFactory(GitProviderFactory):
    name = NAME

    def create(self, settings) -> GitProvider:
        return GitLab()


@hookimpl
def register_git_providers():
    return [GitLabFactory()]
