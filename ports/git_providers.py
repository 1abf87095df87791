"""The git-provider port: how a git host's webhook deliveries are recognised, verified
and read (``github``, ``gitlab``, ``gitea`` for Gitea and Forgejo, ``bitbucket``).

Plugins register one factory per provider through ``register_git_providers``; every
provider a loaded plugin offers is made once at start-up by ``create(settings)``
(``settings``: no option is read today; the mapping is there so a provider can grow
some without a new shape). ``POST /api/hooks/git/{id}`` asks each provider in turn
whether it :meth:`GitProvider.recognizes` the delivery's headers; the first that does
verifies its signature with the service's webhook secret and reads the body into a
:class:`GitEvent`. The body is a hostile stranger's bytes until the signature is
checked: a provider reads nothing of it before :meth:`GitProvider.verify` said yes.

Headers are given as a mapping with lower-case names.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

PUSH = "push"
PULL_REQUEST = "pull_request"
PING = "ping"
OTHER = "other"

# what a pull or merge request did, in every provider's words
OPENED, REOPENED, UPDATED, CLOSED = "opened", "reopened", "updated", "closed"


class PayloadError(ValueError):
    """A verified delivery whose body is not what its provider documents (not JSON, a
    field missing or of the wrong type): 422 naming what is wrong."""


@dataclass(frozen=True)
class Push:
    """A push of ``commit`` (40 hex digits) to ``branch`` (the short name: ``main``, not
    ``refs/heads/main``). ``deleted``: the push removed the branch (nothing to deploy)."""

    branch: str
    commit: str
    deleted: bool = False
    #: the repository's default branch when the payload names it (GitHub, GitLab, Gitea):
    #: what a service without ``git_branch`` tracks
    default_branch: str | None = None


@dataclass(frozen=True)
class PullRequest:
    """A pull (merge) request ``number`` against ``base_branch`` whose head is
    ``head_commit`` on ``head_branch``; ``action`` is one of :data:`OPENED`,
    :data:`REOPENED`, :data:`UPDATED`, :data:`CLOSED` (merged or not), or ``None`` for
    an action that changes nothing to deploy (a label, a review, ...). ``from_fork``:
    the head lives in another repository (``head_clone_url``)."""

    number: int
    action: str | None
    base_branch: str
    head_branch: str
    head_commit: str
    from_fork: bool
    head_clone_url: str | None = None


@dataclass(frozen=True)
class GitEvent:
    """One verified delivery: ``kind`` is :data:`PUSH`, :data:`PULL_REQUEST`,
    :data:`PING` or :data:`OTHER` (an event Slipway does not act on: answered 202
    ``{"ignored": "event"}``); ``name`` is the provider's own event name."""

    provider: str
    kind: str
    name: str
    push: Push | None = None
    pull_request: PullRequest | None = None


class GitProvider(ABC):
    """One provider's webhook dialect. Every method is pure (no I/O)."""

    name: str

    @abstractmethod
    def recognizes(self, headers: Mapping[str, str]) -> bool:
        """Whether the delivery carries this provider's event header."""

    @abstractmethod
    def verify(self, headers: Mapping[str, str], body: bytes, secret: str) -> bool:
        """Whether the delivery is signed (or, for GitLab, tokened) with ``secret``, as
        the provider documents; compared in constant time (``hmac.compare_digest``). A
        missing or malformed signature header is ``False``."""

    @abstractmethod
    def delivery_id(self, headers: Mapping[str, str]) -> str | None:
        """The provider's id of this delivery (the same on a redelivery), if it sends one."""

    @abstractmethod
    def parse(self, headers: Mapping[str, str], body: bytes) -> GitEvent:
        """The delivery as a :class:`GitEvent`; :class:`PayloadError` when the body is
        not what the provider documents for the event it names."""


class GitProviderFactory(ABC):
    """What ``register_git_providers`` returns: ``name`` is the provider it makes."""

    name: str

    @abstractmethod
    def create(self, settings: Mapping[str, str]) -> GitProvider:
        """The provider (``settings``: its options; none are read today)."""


# --- what every provider's plugin uses ---------------------------------------------------

_HEX40 = re.compile(r"^[0-9a-f]{40}$")
ZERO_COMMIT = "0" * 40  # GitHub, GitLab and Gitea's "after" of a deleted branch


def hmac_sha256_hex(secret: str, body: bytes) -> str:
    """HMAC-SHA256 of ``body`` keyed with ``secret`` (UTF-8), in lower-case hex."""
    return hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def same(given: str | None, expected: str) -> bool:
    """``given == expected`` in constant time (``hmac.compare_digest``); None is False."""
    if given is None:
        return False
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"), expected.encode("utf-8"))


def load_json(body: bytes) -> dict:
    """The body as a JSON object, or :class:`PayloadError`."""
    try:
        document = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise PayloadError(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise PayloadError("the body is not a JSON object")
    return document


def field(document, path: str, kind=str, *, optional: bool = False):
    """The value at the dotted ``path`` of ``document`` (``pull_request.head.sha``), of
    type ``kind``; :class:`PayloadError` naming the path when it is missing (unless
    ``optional``: None) or of another type."""
    value = document
    for part in path.split("."):
        if not isinstance(value, dict) or value.get(part) is None:
            if optional:
                return None
            raise PayloadError(f"{path}: missing")
        value = value[part]
    if kind is int and isinstance(value, bool):
        raise PayloadError(f"{path}: not an integer")
    if not isinstance(value, kind):
        names = {str: "a string", int: "an integer", dict: "an object", list: "an array"}
        raise PayloadError(f"{path}: not {names.get(kind, kind.__name__)}")
    return value


def commit_of(value: str, path: str) -> str:
    """A commit hash of 40 hex digits (lower case), or :class:`PayloadError` naming ``path``."""
    value = value.strip().lower()
    if not _HEX40.fullmatch(value):
        raise PayloadError(f"{path}: not a commit hash (40 hexadecimal digits)")
    return value


def branch_of_ref(ref: str) -> str | None:
    """``main`` of ``refs/heads/main``; None for another ref (a tag)."""
    return ref[len("refs/heads/"):] if ref.startswith("refs/heads/") and len(ref) > len("refs/heads/") else None


def push_of(document: dict, *, after: str = "after") -> Push | None:
    """The push of a GitHub, Gitea or GitLab push payload (``ref``, ``after``, the
    repository's ``default_branch``); None for a push of a tag."""
    branch = branch_of_ref(field(document, "ref"))
    if branch is None:
        return None
    raw = field(document, after)
    deleted = bool(document.get("deleted")) or raw.strip("0") == ""
    commit = ZERO_COMMIT if deleted else commit_of(raw, after)
    repository = document.get("repository")
    repository = repository if isinstance(repository, dict) else {}
    default = repository.get("default_branch") if isinstance(repository.get("default_branch"), str) else None
    return Push(branch=branch, commit=commit, deleted=deleted, default_branch=default)


def other_repository(head_repo, base_repo) -> bool:
    """Whether a request's head repository is another than its base's (a fork), by id,
    else by full name; a head whose repository is gone (a deleted fork) counts as one."""
    if not isinstance(head_repo, dict) or not isinstance(base_repo, dict):
        return True
    for key in ("id", "full_name"):
        if head_repo.get(key) is not None and base_repo.get(key) is not None:
            return head_repo[key] != base_repo[key]
    return True
