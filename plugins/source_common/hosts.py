"""Where a repository URL may lead: public hosts only, unless the operator allows more.

A source host that is, or resolves to, an address that is not public
(:mod:`core.addresses` says which: loopback, private, link-local with the cloud metadata
address, unspecified, multicast, reserved and other special-purpose ranges, and IPv6
addresses carrying such an IPv4 address) is refused. Names go through ``getaddrinfo``,
exactly as git's own connection would read them.

``file://`` URLs read the server's own files: they count as private too.
``SLIPWAY_GIT_ALLOW_PRIVATE=1`` lifts all of this (a private git server, tests).

The check runs when the service is created (a name that does not resolve is accepted)
and again when the job clones, which then connects only to the address it checked
(:func:`pinned`): against DNS rebinding, git is told the address instead of looking the
name up again.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from core.addresses import RESOLVE_TIMEOUT_S, not_public  # noqa: F401 (this module's API)
from core.addresses import refusal as addresses_refusal
from ports.resolver import SystemResolver
from ports.settings import Setting

ALLOW_PRIVATE = "SLIPWAY_GIT_ALLOW_PRIVATE"
DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22, "git": 9418}
_SCP_HOST = re.compile(r"^(?:(?P<user>[A-Za-z0-9._~-]+)@)?(?P<host>[A-Za-z0-9.-]+):")
#: the lookups of repository and registry hosts (the port ``ports.resolver``: the C library's)
RESOLVER = SystemResolver()


def resolve(host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str] | None:
    """The addresses ``host`` resolves to now, or None (:data:`RESOLVER`)."""
    return RESOLVER.resolve(host, timeout)


class HostRefused(Exception):
    """The host is not public; the message says why (without the URL)."""


def _zero_or_one(name: str, raw: str) -> bool:
    value = raw.strip()
    if value not in ("0", "1"):
        raise ValueError(f"{name}: must be 0 or 1, not {value!r}")
    return value == "1"


ALLOW_PRIVATE_SETTING = Setting(
    ALLOW_PRIVATE, _zero_or_one, False,
    "`1`: `git_url` and `ai_url` may name hosts that are or resolve to loopback, private, link-local or "
    "unspecified addresses, and `file://` URLs (a private git server; tests). `0`: those are 422 on the "
    "field, and the clone checks again")


def allow_private(settings: Mapping[str, str]) -> bool:
    return ALLOW_PRIVATE_SETTING.read(settings)


def url_host(url: str, scheme: str) -> tuple[str | None, int | None]:
    """(host, port) of a repository URL (None host for ``file``). ``ValueError`` for a
    URL whose port is not a number."""
    if scheme == "file":
        return None, None
    if "://" in url:
        parts = urlsplit(url)
        return parts.hostname, parts.port or DEFAULT_PORTS.get(scheme)
    match = _SCP_HOST.match(url)
    return (match.group("host").lower() if match else None), DEFAULT_PORTS["ssh"]


def refusal(host: str, addresses) -> str | None:
    """Why a host with these addresses is refused (the first address that is not
    public), or None."""
    return addresses_refusal(host, addresses, "only public repository hosts are allowed")


def _host(url: str, scheme: str) -> str:
    """The host ``url`` names; :class:`HostRefused` for ``file://`` and for a URL without
    a usable host."""
    if scheme == "file":
        raise HostRefused("file:// URLs read the server's own files and are not allowed")
    try:
        host, _ = url_host(url, scheme)
    except ValueError:
        raise HostRefused("the port is not a number") from None
    if not host:
        raise HostRefused("the URL names no host")
    return host


def check(url: str, scheme: str) -> None:
    """At create: :class:`HostRefused` when the URL's host is not public. A name that
    does not resolve passes (its clone will fail)."""
    host = _host(url, scheme)
    addresses = resolve(host)
    if addresses:
        reason = refusal(host, addresses)
        if reason:
            raise HostRefused(reason)


def pinned(url: str, scheme: str) -> tuple[str, str]:
    """At clone: (host, the address to connect to) after checking every address the
    host resolves to now; :class:`HostRefused` when one is not public or it does not
    resolve."""
    host = _host(url, scheme)
    addresses = resolve(host)
    if not addresses:
        raise HostRefused(f"the host {host} does not resolve")
    reason = refusal(host, addresses)
    if reason:
        raise HostRefused(reason)
    return host, addresses[0]
