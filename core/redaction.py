"""Credentials out of what is shown or logged: one ``redact`` for log lines, a tool's
output, repository URLs and anything answered to a client. A URL's user-info
(``https://user:token@host``), bearer and basic values, Slipway's own keys (``slw_``,
``pcp_``, ``whsec_``) and any value whose name says secret (``password=...``,
``X-Api-Key: ...``, ``"token": "..."``) become ``***``, in time linear in the text's
length (DECISIONS: no text a client sends costs more than another of the same length)."""
from __future__ import annotations

import functools
import re

_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")  # .match only

# Every pattern below costs time linear in its input: no quantifier is nested around a
# keyword, and a name (``[a-z_\-]`` characters) is read once, from its first character,
# never again from each of its word starts (``/key-key-key-...`` cost the former patterns
# time cubic in its length: 50 ms for 500 characters, 4.5 s for 2,000).
_KEYWORDS = "password|passwd|secret|token|key|session|cookie|authorization|credential"
#: header and YAML lines: "key" alone is too common a word ("key: value" in any YAML)
_LINE_KEYWORDS = "password|passwd|secret|token|api[_\\-]?key|cookie|authorization|credential"

_SECRET_PATTERNS = [
    # Authorization headers and bearer values
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=\-]+"), r"\1 ***"),
    # Slipway's own secrets: panel keys, partner tokens, webhook secrets
    (re.compile(r"\bslw_[A-Za-z0-9_\-]+"), "slw_***"),
    (re.compile(r"\bpcp_[A-Za-z0-9_\-]+"), "pcp_***"),
    (re.compile(r"\bwhsec_[A-Za-z0-9_\-]+"), "whsec_***"),
]
#: "name": "value" and 'name': 'value' whose name says secret: a quote starts each try, and
#: the lookahead reads only the name that follows it (the names after two quotes never overlap)
_QUOTED_PATTERNS = [
    (re.compile(r"(?i)(\"(?=[a-z_\-]*?(?:" + _KEYWORDS + r"))[a-z_\-]+\"\s*:\s*)\"[^\"\\]*(?:\\.[^\"\\]*)*\""),
     r'\1"***"'),
    (re.compile(r"(?i)('(?=[a-z_\-]*?(?:" + _KEYWORDS + r"))[a-z_\-]+'\s*:\s*)'[^']*'"), r"\1'***'"),
]


class _NamedValues:
    r"""``name=value`` (query strings, cookies, bodies) or ``name: value`` (header and YAML
    lines) whose name says secret: the value becomes ``***``. What the patterns
    ``\b([a-z_\-]*KEYWORD[a-z_\-]*)=VALUE`` did, found another way: ``names`` finds each
    whole run of name characters followed by the separator, from its first character; the
    name is the run from its first word boundary (``\b``, as before), and it says secret
    when it holds a keyword."""

    _boundary = re.compile(r"\b")

    def __init__(self, separator: str, keywords: str, value: str, replacement: str):
        self.names = re.compile(r"(?i)(?<![a-z_\-])([a-z_\-]+)" + separator)
        self.keyword = re.compile(r"(?i)" + keywords)
        self.value = re.compile(value)
        self.replacement = replacement

    def sub(self, text: str) -> str:
        out, done, pos = [], 0, 0
        while True:
            found = self.names.search(text, pos)
            if found is None:
                break
            pos = found.end()
            start, end = found.span(1)
            boundary = self._boundary.search(text, start, end)
            if boundary is None or boundary.start() >= end or self.keyword.search(text, boundary.start(), end) is None:
                continue
            value = self.value.match(text, pos)
            if value is None:
                continue
            out.append(text[done:end])
            out.append(self.replacement)
            done = pos = value.end()
        if not out:
            return text
        out.append(text[done:])
        return "".join(out)


_NAMED_VALUES = [
    _NamedValues("=", _KEYWORDS, r"[^&\s;,\"']+", "=***"),
    # "X-Api-Key: abc", "password: hunter2" (a quoted value is the quoted patterns')
    _NamedValues(r":[ \t]*", _LINE_KEYWORDS, r"(?![\"'])[^\s,;]+", ": ***"),
]
# Credentials in URLs: scheme://user:password@host (git remotes, database URLs). Searching
# with one pattern (``\b[a-z][a-z0-9+.-]*://[^/@\s]*@``) costs time quadratic in its input
# (``a.a.a...x://yyy...``: the scheme is tried from every word start of a long run and each
# try reads on to its end); ``_redact_userinfo`` finds each run of scheme characters once.
_URL_SCHEMES = re.compile(r"(?i)(?<![a-z0-9+.\-])[a-z0-9+.\-]+://")
_URL_SCHEME_START = re.compile(r"(?i)\b[a-z]")
_URL_USERINFO = re.compile(r"[^/@\s\"']*@")

#: every pattern above needs one of these (case-insensitive; ``@`` for credentials in URLs):
#: text without any has nothing to redact, and most log fields (paths, methods) have none
_MAYBE_SECRET = re.compile(r"(?i)@|bearer|basic|token|slw_|pcp_|whsec_|passw|secret|key|session|cookie|"
                           r"authorization|credential")
#: texts up to this long have their answer remembered (methods, operation ids, paths and
#: access messages repeat on every request)
_REMEMBERED_TEXT = 256


def redact(text: str | None, secrets=()) -> str | None:
    """``text`` with anything that looks like a credential replaced by ``***``, and each
    of ``secrets`` (say the credentials of the URL at hand, ``url_secrets``) too, in time
    linear in its length. None stays None."""
    if text is None:
        return None
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    if len(text) <= _REMEMBERED_TEXT:
        return _redact_short(text)
    return _redact(text)


@functools.lru_cache(maxsize=4096)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    if _MAYBE_SECRET.search(text) is None:
        return text
    text = _redact_userinfo(text)
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    for named in _NAMED_VALUES:
        text = named.sub(text)
    for pattern, replacement in _QUOTED_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _redact_userinfo(text: str) -> str:
    """``text`` with the user-info of every URL replaced by ``***``: ``_URL_SCHEMES`` finds
    a run of scheme characters ending in ``://`` from the run's first character,
    ``_URL_SCHEME_START`` where a scheme may begin in it, ``_URL_USERINFO`` the user-info
    and its ``@``."""
    out, done, pos = [], 0, 0
    while True:
        found = _URL_SCHEMES.search(text, pos)
        if found is None:
            break
        pos = found.end()
        if _URL_SCHEME_START.search(text, found.start(), pos - 3) is None:
            continue  # no letter at a word start: not a scheme
        credentials = _URL_USERINFO.match(text, pos)
        if credentials is None:
            continue
        out.append(text[done:pos])
        out.append("***@")
        done = pos = credentials.end()
    if not out:
        return text
    out.append(text[done:])
    return "".join(out)


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
    """``url`` (a repository's, the database's) as it may be shown: its user-info ``***``."""
    return redact(url, url_secrets(url or ""))
