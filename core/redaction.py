"""Credentials out of what is shown: a URL's user-info (``https://user:token@host``)
becomes ``***`` wherever a repository URL or a tool's output is logged, stored for
display or answered to a client."""
from __future__ import annotations

import re

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")  # .match only
# Searching with ``_USERINFO`` costs time quadratic in its input (``a.a.a...x://yyy...``: the
# scheme is tried from every word start of a long run and each try reads on to its end).
# ``redact_userinfo`` finds each run of scheme characters once, from its first character.
_SCHEME_RUN = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z0-9+.\-]+://")
_SCHEME_START = re.compile(r"\b[A-Za-z]")
_USERINFO_PART = re.compile(r"[^/@\s]+@")


def redact_userinfo(text: str, schemes=_SCHEME_RUN, scheme_start=_SCHEME_START, userinfo=_USERINFO_PART) -> str:
    """``text`` with the user-info of every URL replaced by ``***``, in time linear in its
    length: what ``\\b[A-Za-z][A-Za-z0-9+.-]*://[^/@\\s]+@`` replaced. ``schemes`` finds a
    run of scheme characters ending in ``://`` from the run's first character, ``scheme_start``
    where a scheme may begin in it, ``userinfo`` the user-info and its ``@`` (the patterns
    of the log redactor, ``app.http.observability``, differ a little)."""
    out, done, pos = [], 0, 0
    while True:
        found = schemes.search(text, pos)
        if found is None:
            break
        pos = found.end()
        if scheme_start.search(text, found.start(), pos - 3) is None:
            continue  # no letter at a word start: not a scheme
        credentials = userinfo.match(text, pos)
        if credentials is None:
            continue
        out.append(text[done:pos])
        out.append("***@")
        done = pos = credentials.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


def redact(text: str | None, secrets=()) -> str | None:
    """``text`` with the user-info of every URL (``https://user:token@host``) replaced
    by ``***``, and each of ``secrets`` (the credentials of the URL at hand) too."""
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return redact_userinfo(text)


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
