"""Custom domains of panel services: the rules a host name must meet (pure functions).

A custom domain is a lower-case RFC 1123 host name: at least two labels, each 1-63 of
``a-z``, ``0-9`` and inner ``-``; at most 253 characters; no trailing dot, no IP
literal, no wildcard. Upper case is refused, not folded (what the client sent is what
is stored and routed). A service has at most ``MAX_PER_SERVICE``; a name is not
``SLIPWAY_BASE_DOMAIN`` nor under it (those names are Slipway's own); uniqueness across
services is held by the database (``uow.custom_domains``).

Names that would route someone else's traffic, or traffic that never leaves the machine,
are refused, not folded (docs/decisions.md, "Custom domains: names refused"):

- the hosts Slipway itself answers on or talks to (``reserved``: the host of
  ``SLIPWAY_PUBLIC_URL``, the host of ``SLIPWAY_CADDY_ADMIN``) and every name under them
  (and a service whose ``<name>.<base domain>`` is one of them or above one is refused
  on its name: ``service_host_problem``);
- special-use names: ``localhost``, and names under ``localhost``, ``local`` (mDNS),
  ``internal``, ``localdomain``, ``arpa`` (``home.arpa``, reverse DNS) and ``invalid``;
- names a URL parser reads as an IPv4 address: a last label of digits only or ``0x``
  followed by hex digits (``1.2.3.4``, ``example.0x7f``);
- non-ASCII names (give the ``xn--`` form), ``xn--`` labels that are not valid
  punycode of a non-ASCII label, and other labels with ``--`` in the 3rd and 4th
  positions (reserved by IDNA 2008)."""
from __future__ import annotations

import re

from core.errors import Invalid

MAX_PER_SERVICE = 10
MAX_LENGTH = 253
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
_DIGITS_AND_DOTS = re.compile(r"^[0-9.]+$")
_NUMERIC = re.compile(r"^([0-9]+|0[xX][0-9a-fA-F]*)$")
#: special-use names (RFC 6761, RFC 6762, RFC 8375, ICANN's .internal): never a customer's
SPECIAL_USE = ("localhost", "local", "internal", "localdomain", "arpa", "invalid")


def _bad_ace(label: str) -> bool:
    """A label with ``--`` in positions 3-4 that is not the punycode of a non-ASCII label."""
    if label[2:4] != "--":
        return False
    if not label.startswith("xn--"):
        return True
    try:
        decoded = label.encode("ascii").decode("idna")
    except UnicodeError:
        return True
    if decoded.isascii():
        return True
    try:
        return decoded.encode("idna").decode("ascii") != label
    except UnicodeError:
        return True


def _under(name: str, host: str) -> bool:
    return name == host or name.endswith("." + host)


def _reserved(reserved):
    """The reserved host names, normalised (no outer dots, lower case), empty ones left out."""
    for host in reserved:
        host = (host or "").strip(".").lower()
        if host:
            yield host


def service_host_problem(host: str, reserved=()) -> str | None:
    """Why ``host``, the name a service gets under ``SLIPWAY_BASE_DOMAIN``
    (``core.panel.routes.hostname``), cannot be a service's, or None: it is one of the
    ``reserved`` hosts (the panel's host, Caddy's admin host) or a name above one (a
    service's route for ``panel.example.com`` would sit over ``a.panel.example.com``).
    The counterpart of ``problem``, which refuses a custom domain that is a reserved
    host or a name under one."""
    host = host.lower()
    for own in _reserved(reserved):
        if own == host:
            return f"its host name would be {host}, which is Slipway's own: choose another name"
        if _under(own, host):
            return (f"its host name would be {host}, a name above {own}, which is Slipway's own: "
                    "choose another name")
    return None


def problem(name, base_domain: str | None = None, reserved=()) -> str | None:
    """Why ``name`` cannot be a custom domain, or None. ``reserved``: host names that
    are Slipway's own (the panel's host, Caddy's admin host): they and the names under
    them are refused."""
    if not isinstance(name, str) or not name:
        return "a host name (string)"
    if not name.isascii():
        return "ASCII only: give an internationalised name in its xn-- (punycode) form"
    if len(name) > MAX_LENGTH:
        return f"at most {MAX_LENGTH} characters"
    if name != name.lower():
        return "lower-case only"
    if name.endswith("."):
        return "no trailing dot"
    if "*" in name:
        return "no wildcards"
    if ":" in name or _DIGITS_AND_DOTS.match(name):
        return "a host name, not an IP address"
    labels = name.split(".")
    if len(labels) < 2:
        return "at least two labels (e.g. example.com)"
    if not all(_LABEL.fullmatch(label) for label in labels):
        return "labels of 1-63 letters a-z, digits and inner '-', separated by '.'"
    if _NUMERIC.fullmatch(labels[-1]):
        return "a host name, not an IP address (the last label is a number)"
    if any(_bad_ace(label) for label in labels):
        return "'--' in a label's 3rd and 4th characters only as valid punycode (xn--)"
    if labels[-1] in SPECIAL_USE:
        return f"a special-use name (.{labels[-1]}): never routed to a service"
    base = (base_domain or "").strip(".").lower()
    if base and _under(name, base):
        return f"{base} and the names under it are Slipway's own (SLIPWAY_BASE_DOMAIN)"
    for host in _reserved(reserved):
        if _under(name, host):
            return f"{host} and the names under it are Slipway's own"
    return None


def check(names, base_domain: str | None = None, reserved=()) -> list[str]:
    """The list as given, or ``Invalid`` naming each bad entry (``custom_domains[i]``)."""
    if not isinstance(names, list):
        raise Invalid("invalid custom domains", fields={"custom_domains": "a list of host names"})
    problems = {}
    if len(names) > MAX_PER_SERVICE:
        problems["custom_domains"] = f"at most {MAX_PER_SERVICE} per service (got {len(names)})"
    seen = set()
    for i, name in enumerate(names):
        why = problem(name, base_domain, reserved)
        if why is None and name in seen:
            why = f"{name} appears twice"
        if why is not None:
            problems[f"custom_domains[{i}]"] = why
        if isinstance(name, str):
            seen.add(name)
    if problems:
        raise Invalid("invalid custom domains", fields=problems)
    return list(names)
