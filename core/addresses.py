"""Which network addresses are public: the rule every outbound connection a tenant names
follows (git sources, partner webhooks). Pure standard library, no I/O beyond a bounded
name lookup.

An address that is not public is loopback, RFC 1918 and ``fc00::/7`` private,
``fec0::/10`` site-local, link-local with the cloud metadata address
``169.254.169.254``, unspecified, multicast,
and the other special-purpose ranges Python's :mod:`ipaddress` does not call global:
shared ``100.64.0.0/10``, documentation, benchmarking, reserved. So are IPv6 addresses
that carry such an IPv4 address (IPv4-mapped ``::ffff:a.b.c.d``, 6to4, NAT64
``64:ff9b::/96``, Teredo). Names go through ``getaddrinfo``, so every spelling the C
library accepts (``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``127.1``,
``localhost``) is judged by the address it means, as the connection would read it.
"""
from __future__ import annotations

import ipaddress
import socket
import threading
import time

from core import waits

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


def _literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def resolve(host: str, timeout: float = RESOLVE_TIMEOUT_S) -> list[str] | None:
    """The addresses ``host`` resolves to (getaddrinfo, in its order), or None when it
    does not resolve (or not within ``timeout`` seconds). Refused inside a database
    transaction or on a database thread (``core.waits``)."""
    if not _literal(host):  # an address as text is read, not looked up
        waits.check(f"a name lookup of {host!r}")
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


def resolve_all(hosts, *, deadline: float = RESOLVE_TIMEOUT_S, workers: int = 8,
                lookup=None) -> dict[str, list[str] | None]:
    """Each distinct name of ``hosts`` looked up (:func:`resolve`), up to ``workers`` at
    a time, all within one overall ``deadline`` in seconds: {name: its addresses, or None
    when it does not resolve or was not answered in time}. However many names there are
    and however slowly they answer, the caller waits ``deadline`` at most.
    ``lookup(name)`` replaces :func:`resolve` (tests)."""
    pending = list(dict.fromkeys(hosts))
    if pending:
        waits.check("a name lookup of " + ", ".join(repr(h) for h in pending[:3]))
    answers: dict = {}
    if not pending:
        return {}
    end = time.monotonic() + deadline
    lock, finished = threading.Lock(), threading.Event()
    queue = list(reversed(pending))

    def work():
        while True:
            with lock:
                if not queue or time.monotonic() >= end:
                    return
                host = queue.pop()
            try:
                found = lookup(host) if lookup is not None else resolve(host, max(0.0, end - time.monotonic()))
            except Exception:  # noqa: BLE001 - a lookup that fails does not resolve
                found = None
            with lock:
                answers[host] = found
                if len(answers) == len(pending):
                    finished.set()

    for _ in range(min(workers, len(pending))):
        threading.Thread(target=work, name="slipway resolve-all", daemon=True).start()
    finished.wait(max(0.0, end - time.monotonic()))
    with lock:
        return {host: answers.get(host) for host in pending}


def refusal(host: str, addresses, allowed: str) -> str | None:
    """Why a host with these addresses is refused (the first address that is not
    public), ending with ``allowed`` ("only public ... are allowed"), or None."""
    for address in addresses:
        reason = not_public(address)
        if reason:
            shown = host if host == address else f"{host} resolves to {address}, which"
            return f"{shown} is {reason}; {allowed}"
    return None
