"""Which address a request comes from, believing ``X-Forwarded-For`` only from trusted proxies."""
from __future__ import annotations

import ipaddress


def _ip(value: str):
    try:
        return ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None


def address_bucket(address: str) -> str:
    """The key of an address bucket for ``address``: an IPv6 address's /64 (``2001:db8::/64``;
    one client is handed a whole /64, so a bucket per address would give it unlimited
    budget), an IPv4 address (an IPv4-mapped IPv6 one as IPv4) unchanged; anything that is
    not an address stays itself."""
    ip = _ip(address) if address else None
    if ip is None:
        return address
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ip.version == 6:
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


def client_address(peer: str | None, forwarded_for: str | None, trusted: tuple) -> str:
    """The peer, unless it is a trusted proxy: then the right-most ``X-Forwarded-For``
    entry that is not itself a trusted proxy (entries further left are client-written)."""
    peer = peer or "unknown"
    if not trusted or not forwarded_for:
        return peer
    peer_ip = _ip(peer)
    if peer_ip is None or not any(peer_ip in net for net in trusted):
        return peer
    hops = [h for h in (part.strip() for part in forwarded_for.split(",")) if h]
    for hop in reversed(hops):
        ip = _ip(hop)
        if ip is None:
            return hop  # garbage from the client side: still a distinct key, never a trusted one
        if not any(ip in net for net in trusted):
            return str(ip)
    return str(_ip(hops[0])) if hops else peer
