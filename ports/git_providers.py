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
