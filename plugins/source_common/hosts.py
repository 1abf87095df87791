"""Where a repository URL may lead: public hosts only, unless the operator allows more.

A source host that is, or resolves to, an address that is not public (loopback,
RFC 1918 and ``fc00::/7`` private, link-local with the cloud metadata address
``169.254.169.254``, unspecified, and the other special-purpose ranges Python's
:mod:`ipaddress` does not call global: shared ``100.64.0.0/10``, documentation,
benchmarking, reserved, multicast) is refused, as are IPv6 addresses that carry such an
IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, 6to4, NAT64 ``64:ff9b::/96``). Names go
through ``getaddrinfo``, so every spelling the C library accepts (``0x7f000001``,
``2130706433``, ``0177.0.0.1``, ``127.1``, ``localhost``) is judged by the address it
means, exactly as git's own connection would read it.

``file://`` URLs read the server's own files: they count as private too.
``SLIPWAY_GIT_ALLOW_PRIVATE=1`` lifts all of this (a private git server, tests).

The check runs when the service is created (a name that does not resolve is accepted)
and again when the job clones, which then connects only to the address it checked
(:func:`pinned`): against DNS rebinding, git is told the address instead of looking the
name up again.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import threading
from collections.abc import Mapping
from urllib.parse import urlsplit

ALLOW_PRIVATE = "SLIPWAY_GIT_ALLOW_PRIVATE"
RESOLVE_TIMEOUT_S = 5.0
DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22, "git": 9418}
_SCP_HOST = re.compile(r"^(?:(?P<user>[A-Za-z0-9._~-]+)@)?(?P<host>[A-Za-z0-9.-]+):")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class HostRefused(Exception):
    """The host is not public; the message says why (without the URL)."""


def allow_private(settings: Mapping[str, str]) -> bool:
    raw = (settings.get(ALLOW_PRIVATE) or "").strip()
    if raw in ("", "0"):
        return False
    if raw == "1":
        return True
    raise ValueError(f"{ALLOW_PRIVATE}: must be 0 or 1, not {raw!r}")


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


def _embedded(address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64), if any."""
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.teredo is not None:
        return address.teredo[1]
    return None


def not_public(address) -> str | None:
    """Why ``address`` (text or ipaddress object) is not a public address, or None."""
    if isinstance(address, str):
        address = ipaddress.ip_address(address.split("%", 1)[0])
    inner = _embedded(address)
    if inner is not None:
        reason = not_public(inner)
        if reason:
            return reason
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a special-purpose address"
    return None


def resolve(host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str] | None:
    """The addresses ``host`` resolves to (getaddrinfo, in its order), or None when it
    does not resolve (or not within ``timeout`` seconds)."""
    result = {}

    def lookup():
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
            result["addresses"] = list(dict.fromkeys(info[4][0] for info in infos))
        except (OSError, UnicodeError):
            result["addresses"] = None

    worker = threading.Thread(target=lookup, name="slipway resolve", daemon=True)
    worker.start()
    worker.join(timeout)
    return result.get("addresses")


def refusal(host: str, addresses) -> str | None:
    """Why a host with these addresses is refused (the first address that is not
    public), or None."""
    for address in addresses:
        reason = not_public(address)
        if reason:
            shown = host if host == address else f"{host} resolves to {address}, which"
            return f"{shown} is {reason}; only public repository hosts are allowed"
    return None


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
