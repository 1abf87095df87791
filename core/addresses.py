"""Which network addresses are public: the rule every outbound connection a tenant names
follows (git sources, registries, partner webhooks). Pure standard library, no I/O.

An address that is not public is loopback, RFC 1918 and ``fc00::/7`` private,
``fec0::/10`` site-local, link-local with the cloud metadata address
``169.254.169.254``, unspecified, multicast,
and the other special-purpose ranges Python's :mod:`ipaddress` does not call global:
shared ``100.64.0.0/10``, documentation, benchmarking, reserved. So are IPv6 addresses
that carry such an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, 6to4, NAT64
``64:ff9b::/96``, Teredo).

Names are looked up by a :class:`Resolver` the caller hands in (the port
``ports.resolver``; the system's asks ``getaddrinfo``, so every spelling the C library
accepts, ``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``127.1``, ``localhost``, is
judged by the address it means, as the connection would read it). Core does no lookup
of its own.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Protocol

RESOLVE_TIMEOUT_S = 5.0
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


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
    if address.version == 6 and address.is_site_local:  # fec0::/10: deprecated, still routed within a site
        return "a site-local address"
    if address.is_reserved or not address.is_global:
        return "a special-purpose address"
    return None


class Resolver(Protocol):
    """What core asks of a name lookup (``ports.resolver.Resolver``; the app hands core
    the system's, core's unit tests a fake): the addresses a host name means, or None when
    it does not resolve (or not in time)."""

    def resolve(self, host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str] | None:
        """The addresses ``host`` resolves to (an address written out answers itself)."""

    def resolve_all(self, hosts: Iterable[str], *,
                    deadline: float = RESOLVE_TIMEOUT_S) -> dict[str, list[str] | None]:
        """{name: its addresses or None} for each distinct name, all within ``deadline``."""


def refusal(host: str, addresses, allowed: str) -> str | None:
    """Why a host with these addresses is refused (the first address that is not
    public), ending with ``allowed`` ("only public ... are allowed"), or None."""
    for address in addresses:
        reason = not_public(address)
        if reason:
            shown = host if host == address else f"{host} resolves to {address}, which"
            return f"{shown} is {reason}; {allowed}"
    return None
