"""Credentials out of what is shown: a URL's user-info (``https://user:token@host``)
becomes ``***`` wherever a repository URL or a tool's output is logged, stored for
display or answered to a client."""
from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")


def redact(text: str | None, secrets=()) -> str | None:
    """``text`` with the user-info of every URL (``https://user:token@host``) replaced
    by ``***``, and each of ``secrets`` (the credentials of the URL at hand) too."""
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return _USERINFO.sub(lambda m: m.group("scheme") + "***@", text)


def url_secrets(url: str) -> tuple:
    """The credential parts of ``url`` (user-info, and its password alone)."""
    match = _USERINFO.match(url)
    if not match:
        return ()
    userinfo = match.group("userinfo")
    parts = [userinfo]
    user, _, password = userinfo.partition(":")
    if password:
        parts.append(password)
    if len(user) >= 8:  # a token given as the user name; short plain names stay readable
        parts.append(user)
    return tuple(parts)


def redact_url(url: str | None) -> str | None:
    return redact(url, url_secrets(url or ""))
