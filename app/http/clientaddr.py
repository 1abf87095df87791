"""Which address a request comes from, believing ``X-Forwarded-For`` only from trusted proxies."""
from __future__ import annotations

import ipaddress


def _ip(value: str):
    try:
        return ipaddress.ip_address(value.strip().strip("[]"))
    except ValueError:
        return None


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
