"""Which images a service may start from: the rule of compose ``image:`` applied to every
image reference a build reads. Pure (the registry rule's name lookups go through a resolver handed in).

A service runs and builds on images it may use (:func:`image_refusal`): only a reference
of the docker reference grammar (``[host[:port]/]path[:tag][@digest]``, lower-case path
components), never a transport (``containers-storage:``, ``oci-archive:``, ``dir:`` ...,
which Buildah would follow), never an image id or id prefix (hexadecimal, with or
without ``sha256:``; the engines resolve any unique prefix, two digits do, to whatever
local image has it: another tenant's build or kept release), and never a name in
Slipway's own namespace (``localhost/slw-...``, also as a short name, which Podman looks
up under ``localhost/``) other than its own builds.

Registries (:func:`registries_refusal`): a reference's registry host is the first path
component when it holds a ``.`` or a ``:``, is ``localhost`` or has upper-case letters
(the docker reference grammar); one that is, or resolves to, an address that is not
public (:mod:`core.addresses`, the rule of ``git_url`` and webhooks) is refused unless the
operator allows private registries. The hosts of one compose or Containerfile are looked
up once each, at the same time, within one overall deadline. At create a name that does
not resolve is accepted; when the engine is about to pull or build (``strict``) it is
refused. ``localhost/...`` without a port names the engine's own images
(:func:`engine_local`): those are never pulled.

A Containerfile or Dockerfile is read (:func:`references`) as the engines read it:
parser directives (``escape``, ``syntax``, whose frontend image is a reference too),
line continuations with the escape character, comments, ``ARG`` defaults, every stage's
``FROM``, every ``COPY --from=`` and ``RUN --mount=...,from=``, also behind ``ONBUILD``.
A stage named (or, for ``--from``, numbered) earlier in the file is not an image. Where
the engines may read a text differently it is read every way and must pass each:

- heredocs (BuildKit and Buildah hide their bodies, a classic builder reads those lines
  as instructions);
- the escape character: ``\\`` and the ``escape`` directive's (Buildah's parser honours
  the directive on the first line only, BuildKit's after ``syntax`` too);
- white space: the engines' own rules (words split at ``[\\t\\v\\f\\r ]``, a line continues
  when it ends with the escape character and spaces or tabs only, lines end at ``\\n``)
  and, when the text holds other white space, every Unicode space as a separator.

A variable in an image reference must have a value the file fixes: for ``FROM`` a global
``ARG`` default (no build arguments are passed to the engines; an ``ARG`` without one is
unset), for ``--from`` an ``ENV`` of the same stage (the base image's ``ENV`` overrides
an ``ARG``); the engines' own arguments (``TARGETOS``, ``BUILDPLATFORM``, proxies ...)
never count as fixed. A text that cannot be read for references (over 1 MiB, an unknown
escape character, a ``--from`` without ``=``, a variable form it does not know, variables
nested deeper than 16) is refused: nothing is built from a file whose base images are
not known. Every step costs time linear in the text.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from core import addresses
from core.panel.containers import BUILT_IMAGES, built_image_prefix

MAX_BYTES = 1024 * 1024  # a Containerfile larger than this is not read (nor built)
MAX_NESTING = 16  # ${a:-${b:-...}} deeper than this is not read
MAX_LINE_SHOWN = 200
MAX_NAME = 255  # the reference grammar's longest name
_IMAGE_ID = re.compile(r"(sha256:)?[0-9a-f]{1,64}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z0-9_.-]+)\2")
# the docker reference grammar (distribution/reference), one part at a time
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_DOMAIN_COMPONENT = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?")
_IPV6 = re.compile(r"\[[A-Fa-f0-9:]+\]")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,1024}")
# containers/image transports Buildah follows in a FROM (``docker:`` needs ``//``, which no reference has)
TRANSPORTS = frozenset({"containers-storage", "dir", "docker-archive", "docker-daemon", "oci", "oci-archive",
                        "sif", "tarball", "ostree", "atomic"})
# arguments the engines give values of their own (platform, proxies): never fixed by the file
ENGINE_ARGS = frozenset({"TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT", "BUILDPLATFORM", "BUILDOS",
                         "BUILDARCH", "BUILDVARIANT", "HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY",
                         "ALL_PROXY", "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy"})
ENGINE_SPACE = "\t\v\f\r "  # the engines' separator of an instruction's words: [\t\v\f\r ]+
# Go's unicode.IsSpace, which the engines trim lines with (Python's isspace adds \x1c-\x1f)
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a" \
           "\u2028\u2029\u202f\u205f\u3000"
_GO_SPACES = frozenset(GO_SPACE)
_ENGINE_SPACES = frozenset(ENGINE_SPACE)


class ContainerfileError(ValueError):
    """The text cannot be read for the images it names; the message says where."""


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def registry_host(reference: str) -> str | None:
    """The registry part of an image reference (host, with ``:port`` when given), or
    None for a name without one (``busybox``, ``library/redis``)."""
    first, slash, _ = reference.partition("/")
    if not slash:
        return None
    if "." in first or ":" in first or first == "localhost" or first.lower() != first:
        return first
    return None


def engine_local(reference: str) -> bool:
    """True for ``localhost/...`` without a port: the engine's own images, never pulled
    (a pull of such a name would ask a registry on the host's port 443)."""
    return (registry_host(reference) or "").lower() == "localhost"


def _domain_ok(domain: str) -> bool:
    host, colon, port = domain.rpartition(":") if not domain.endswith("]") else ("", "", "")
    if not colon:
        host = domain
    elif not port.isascii() or not port.isdigit():
        return False
    if _IPV6.fullmatch(host):
        return True
    return all(_DOMAIN_COMPONENT.fullmatch(part) for part in host.split("."))


def reference_problem(reference: str) -> str | None:
    """Why ``reference`` is not an image reference of the docker grammar
    (``[host[:port]/]path-component(/path-component)*[:tag][@digest]``), or None."""
    if len(reference) > MAX_NAME + 1 + 128 + 1 + 1100:
        return "it is too long"
    name, at, digest = reference.partition("@")
    if at and not _DIGEST.fullmatch(digest):
        return "the digest is not algorithm:hex"
    slash, colon = name.rfind("/"), name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
        if not _TAG.fullmatch(tag):
            return "the tag has characters a tag may not have"
    if not name:
        return "it names no repository"
    if len(name) > MAX_NAME:
        return f"the name is longer than {MAX_NAME} characters"
    parts = name.split("/")
    if len(parts) > 1 and not _PATH_COMPONENT.fullmatch(parts[0]):
        if not _domain_ok(parts[0]):
            return "the registry host is not a host[:port]"
        parts = parts[1:]
    for part in parts:
        if not _PATH_COMPONENT.fullmatch(part):
            return "a name component is not lower-case letters and digits joined by . _ __ or -"
    return None


def reference_refusal(reference: str) -> str | None:
    """Why ``reference`` is not an image reference the engines read as one (not of the
    docker grammar: :func:`reference_problem`; or a transport), or None."""
    shown = _short(reference, MAX_LINE_SHOWN)
    problem = reference_problem(reference)
    if problem:
        return f"{shown} is not an image reference ([registry/]name[:tag][@digest]): {problem}"
    transport = reference.partition(":")[0]
    if "/" not in transport and transport in TRANSPORTS:
        return f"{shown} names the transport {transport}:; name an image (a repository, with a tag or a digest)"
    return None


def image_refusal(reference: str, service_id: str) -> str | None:
    """Why the service ``service_id`` may not use the image ``reference`` (run it, or
    build on it), or None: not a reference of the docker grammar, a transport, an image
    id or id prefix, or another service's build."""
    image = reference.strip().lower()
    shown = _short(reference, MAX_LINE_SHOWN)
    if not image:
        return "names no image"
    if _IMAGE_ID.fullmatch(image):
        # the engines resolve an image id, or any unique prefix of one (two hex digits
        # do), to whatever image has it: another tenant's build or kept release
        return f"{shown} reads as an image id; name the image (a repository, with a tag or a digest)"
    reason = reference_refusal(reference)
    if reason:
        return reason
    # a short name (no registry host) is looked up under localhost/ by Podman
    named = image if registry_host(image) else "localhost/" + image
    if named.startswith(BUILT_IMAGES) and not named.startswith(built_image_prefix(service_id)):
        return f"{shown} was built for another service; a service runs only images it built itself or pulls"
    return None


def components_refusal(components, service_id: str) -> str | None:
    """The one image rule of every container Slipway starts for a service, applied to a
    plan's ``components`` (:func:`image_refusal` on each image): ``services.<name>.image:
    reason`` for the first refused, or None. Create and PATCH (a 422 on ``compose``) and
    each deploy's plan step call it."""
    for component in components:
        reason = image_refusal(component.image, service_id)
        if reason:
            return f"services.{component.name}.image: {reason}"
    return None


def _split_port(host: str) -> str:
    if host.startswith("["):  # [v6]:port
        return host[1:].split("]", 1)[0]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def _lookup_name(reference: str) -> str | None:
    """The name to look up for ``reference``'s registry (None: nothing to look up)."""
    host = registry_host(reference.strip())
    if host is None or host.lower() == "localhost":
        return None
    name = _split_port(host).lower()
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
        return None  # an address: judged as it is
    except ValueError:
        return name


def registry_refusal(reference: str, *, resolve, strict: bool = False) -> str | None:
    """Why ``reference`` may not be pulled from its registry (the host is, or resolves
    to, an address that is not public), or None (no registry host, ``localhost``
    without a port, a public host). ``resolve(name)`` answers a name's addresses or None
    (a resolver's ``resolve``, or the answers of one ``resolve_all``). A name that does
    not resolve is refused when ``strict`` (the engine is about to pull or build), else
    accepted."""
    host = registry_host(reference.strip())
    if host is None or host.lower() == "localhost":
        return None
    name = _split_port(host).lower()
    lookup = _lookup_name(reference)
    found = [name] if lookup is None else resolve(lookup)
    if found is None and strict:
        return (f"the registry host {_short(host)} of {_short(reference)} does not resolve; "
                "only registries with public addresses are allowed")
    reason = addresses.refusal(name, found or [], "only public registries are allowed")
    return f"the registry {_short(host)} of {_short(reference)}: {reason}" if reason else None


def registries_refusal(images, *, strict: bool, resolver: addresses.Resolver,
                       deadline: float = addresses.RESOLVE_TIMEOUT_S) -> str | None:
    """The first refusal of :func:`registry_refusal` among ``images`` ((where, reference)
    pairs), as ``where: reason``, or None. Each registry host is looked up once by
    ``resolver``, all at the same time, within one overall ``deadline`` (a name not
    answered by then does not resolve)."""
    images = list(images)
    names = [name for _, image in images if (name := _lookup_name(image)) is not None]
    found = resolver.resolve_all(names, deadline=deadline) if names else {}
    for where, image in images:
        reason = registry_refusal(image, resolve=found.get, strict=strict)
        if reason:
            return f"{where}: {reason}"
    return None


# --- reading a Containerfile --------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """An image a build reads: ``image`` (variables expanded) on ``line`` (1-based) whose
    text is ``text``; ``kind`` is ``FROM``, ``--from`` or ``syntax``."""

    line: int
    text: str
    kind: str
    image: str

    def where(self) -> str:
        return f"line {self.line} ({_short(self.text, MAX_LINE_SHOWN)})"


@dataclass(frozen=True)
class _Way:
    """One way of reading the text: the escape character, whether heredoc bodies are
    hidden, and whether white space follows the engines' rules (``exact``) or every
    Unicode space separates words and ends continuations."""

    escape: str
    heredocs: bool
    exact: bool

    def strip(self, text: str) -> str:
        return text.strip(GO_SPACE) if self.exact else text.strip()

    def space(self, ch: str) -> bool:
        """A separator of an instruction's flags and ARG/ENV words."""
        return ch in _GO_SPACES if self.exact else ch.isspace()

    def split(self, text: str) -> list[str]:
        """An instruction's keyword and FROM words: split at the engines' [\\t\\v\\f\\r ]+."""
        if not self.exact:
            return text.split()
        words: list[str] = []
        current: list[str] = []
        for ch in text:
            if ch in _ENGINE_SPACES:
                if current:
                    words.append("".join(current))
                    current = []
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
        return words

    def head(self, text: str) -> tuple[str, str]:
        """(the keyword, upper-case, and the rest) of an instruction."""
        text = self.strip(text)
        end = 0
        while end < len(text) and not (text[end] in _ENGINE_SPACES if self.exact else text[end].isspace()):
            end += 1
        keyword = text[:end]
        return (keyword.upper() if keyword.isascii() else ""), text[end:]

    def continues(self, line: str) -> str | None:
        """``line`` without its trailing escape character when it continues, else None."""
        body = line.rstrip(" \t") if self.exact else line.rstrip()
        return body[:-1] if body.endswith(self.escape) else None


class _Vars:
    """Variable values as far as the file fixes them: a text, :data:`UNSET` (an ``ARG``
    without a default: no build arguments are passed), or None (not known)."""


UNSET = _Vars()


def _expand(value: str, variables: dict, escape: str, *, where: str, unknown: list | None = None,
            depth: int = 0) -> str:
    """``$VAR``, ``${VAR}``, ``${VAR:-x}``, ``${VAR-x}``, ``${VAR:+x}``, ``${VAR+x}``
    with ``variables``. A variable whose value is not known (missing, None, or one of
    the engines' own arguments) is refused, or, with ``unknown``, added to it (its value
    taken as empty)."""
    if depth > MAX_NESTING:
        raise ContainerfileError(f"{where}: variables nested deeper than {MAX_NESTING}")

    def lookup(name):
        current = None if name in ENGINE_ARGS else variables.get(name)
        if current is None:
            if unknown is None:
                extra = " (the engine gives it one)" if name in ENGINE_ARGS else ""
                raise ContainerfileError(f"{where}: the file gives no value of ${_short(name)}{extra}")
            unknown.append(name)
            return ""
        return current

    again: dict[str, Any] = {"where": where, "unknown": unknown, "depth": depth + 1}
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == escape and value[i + 1:i + 2] == "$":
            out.append("$")
            i += 2
            continue
        if ch != "$":
            out.append(ch)
            i += 1
            continue
        if value[i + 1:i + 2] == "{":
            level, j = 1, i + 2
            while j < len(value) and level:
                level += {"{": 1, "}": -1}.get(value[j], 0)
                j += 1
            if level:
                raise ContainerfileError(f"{where}: an unterminated ${{")
            inner = value[i + 2:j - 1]
            match = _NAME.match(inner)
            if not match:
                raise ContainerfileError(f"{where}: cannot read the variable ${{{_short(inner)}}}")
            name, rest = match.group(0), inner[match.end():]
            if rest == "":
                current = lookup(name)
                out.append("" if current is UNSET else current)
            elif rest[:2] in (":-", ":+") or rest[:1] in ("-", "+"):
                colon = rest.startswith(":")
                op, word = rest[1 if colon else 0], rest[2 if colon else 1:]
                current = lookup(name)
                isset = current is not UNSET and (current != "" if colon else True)
                if op == "-":
                    out.append(current if isset else _expand(word, variables, escape, **again))
                else:
                    out.append(_expand(word, variables, escape, **again) if isset else "")
            else:
                raise ContainerfileError(f"{where}: cannot read the variable form ${{{_short(inner)}}}")
            i = j
            continue
        match = _NAME.match(value, i + 1)
        if not match:
            out.append("$")
            i += 1
            continue
        current = lookup(match.group(0))
        out.append("" if current is UNSET else current)
        i = match.end()
    return "".join(out)


def _words(text: str, escape: str, space) -> list[str]:
    """Words separated where ``space(ch)``, quotes taken off (quoted parts keep their
    spaces)."""
    words: list[str] = []
    current: list[str] = []
    quote, any_ = None, False
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == quote:
                quote = None
            elif ch == escape and quote == '"' and i + 1 < len(text):
                i += 1
                current.append(text[i])
            else:
                current.append(ch)
        elif ch in "\"'":
            quote, any_ = ch, True
        elif space(ch):
            if current or any_:
                words.append("".join(current))
            current, any_ = [], False
        else:
            current.append(ch)
        i += 1
    if quote:
        raise ContainerfileError("an unterminated quote")
    if current or any_:
        words.append("".join(current))
    return words


def _flags(text: str, way: _Way) -> list[tuple[str, str | None]]:
    """The leading ``--name=value`` flags of an instruction's arguments. Only the flags
    are read as words: the rest may be any shell text."""
    flags: list[tuple[str, str | None]] = []
    i = 0
    while True:
        while i < len(text) and way.space(text[i]):
            i += 1
        if not text.startswith("--", i):
            return flags
        end, quote = i, None
        while end < len(text) and (quote or not way.space(text[end])):
            if quote and text[end] == quote:
                quote = None
            elif not quote and text[end] in "\"'":
                quote = text[end]
            end += 1
        if quote:
            raise ContainerfileError("an unterminated quote in a flag")
        [word] = _words(text[i:end], way.escape, way.space) or [""]
        name, eq, value = word[2:].partition("=")
        flags.append((name.lower(), value if eq else None))
        i = end


def _after_flags(text: str, way: _Way) -> str:
    """``text`` after its leading ``--flags`` (the same walk as :func:`_flags`)."""
    i = 0
    while True:
        while i < len(text) and way.space(text[i]):
            i += 1
        if not text.startswith("--", i):
            return text[i:]
        quote = None
        while i < len(text) and (quote or not way.space(text[i])):
            if quote and text[i] == quote:
                quote = None
            elif not quote and text[i] in "\"'":
                quote = text[i]
            i += 1


def _mount_from(value: str) -> str | None:
    """The ``from=`` of a ``--mount`` value (comma-separated ``key=value``), or None."""
    found = None
    for part in value.split(","):
        key, _, item = part.strip().partition("=")
        if key.strip().lower() == "from":
            found = item.strip().strip("\"'")
    return found


def _directives(lines: list[str]) -> tuple[list[str], list[tuple[int, str, str]], int]:
    """(the escape characters an engine may pick: ``\\`` and any ``escape`` directive's,
    the ``syntax`` directives (line, text, value), the index of the first line after the
    directives). Directives are the leading ``# key=value`` comments."""
    escapes, syntax, seen, index = ["\\"], [], set(), 0
    while index < len(lines):
        stripped = lines[index].strip()
        if not stripped.startswith("#"):
            break
        key, eq, value = stripped[1:].partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not _KEY.fullmatch(key) or not value:
            break
        key = key.lower()
        if key in seen and key in ("escape", "syntax"):
            raise ContainerfileError(f"line {index + 1}: the {key} directive is given twice")
        seen.add(key)
        if key == "escape":
            # BuildKit takes the value, an older parser (Buildah's) its first character
            candidates = {value, value[0]} & {"\\", "`"}
            if value not in ("\\", "`") and not candidates:
                raise ContainerfileError(f"line {index + 1}: an unknown escape character {_short(value)!r}")
            escapes += sorted(candidates - set(escapes))
        elif key == "syntax":
            syntax.append((index + 1, stripped, value))
        index += 1
    return escapes, syntax, index


def _lines(text: str, exact: bool) -> list[str]:
    """The engines end a line at ``\\n`` only (a trailing ``\\r`` dropped); the other
    reading ends one at ``\\r`` too."""
    if exact:
        return [line.rstrip("\r") for line in text.removeprefix("\ufeff").split("\n")]
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _logical_lines(lines: list[str], start: int, way: _Way):
    """(first line number, instruction text) of every instruction from ``start`` on."""
    index = start
    while index < len(lines):
        raw = lines[index]
        index += 1
        stripped = way.strip(raw)
        if not stripped or stripped.startswith("#"):
            continue
        first, parts = index, []
        line: str | None = raw
        body = way.continues(raw)
        while body is not None:
            parts.append(body)
            line = None
            while index < len(lines):  # comments and empty lines inside a continuation are skipped
                candidate = lines[index]
                index += 1
                inner = way.strip(candidate)
                if inner and not inner.startswith("#"):
                    line = candidate
                    break
            if line is None:
                break
            body = way.continues(line)
        if line is not None:
            parts.append(line)
        instruction = way.strip("".join(parts))
        yield first, instruction
        if way.heredocs:
            keyword, rest = way.head(instruction)
            if keyword == "ONBUILD":
                keyword, rest = way.head(rest)
            if keyword in ("RUN", "COPY", "ADD"):
                for dash, _, word in _HEREDOC.findall(instruction):
                    while index < len(lines):  # the body, up to its terminator
                        body_line = lines[index]
                        index += 1
                        if (body_line.lstrip("\t") if dash else body_line) == word:
                            break


def _assignments(rest: str, way: _Way, keyword: str) -> list[tuple[str, str | None]]:
    """``ARG name[=default] ...`` or ``ENV key=value ...`` / ``ENV key value``."""
    words = _words(rest, way.escape, way.space)
    if keyword == "ENV" and words and "=" not in words[0]:  # the old form: ENV key the value
        return [(words[0], " ".join(words[1:]) if len(words) > 1 else None)]
    pairs = []
    for word in words:
        name, eq, value = word.partition("=")
        pairs.append((name, value if eq else None))
    return pairs


def _read(lines: list[str], start: int, way: _Way) -> list[Reference]:
    found: list[Reference] = []
    state: dict[str, Any] = {"globals": {}, "stages": [], "scope": None}  # scope: the current stage's ENV values
    for number, instruction in _logical_lines(lines, start, way):
        try:
            _instruction(found, number, instruction, way, state)
        except ContainerfileError as exc:
            raise (exc if str(exc).startswith("line ") else ContainerfileError(f"line {number}: {exc}")) from None
    return found


def _instruction(found, number, instruction, way, state):
    """Read one instruction into ``found`` (and the variables and stages of ``state``)."""
    where = f"line {number}"
    keyword, rest = way.head(instruction)
    globals_, stages, scope = state["globals"], state["stages"], state["scope"]
    if keyword == "ONBUILD":  # runs in a later build on this image: its --from is an image there
        inner, inner_rest = way.head(rest)
        if inner in ("COPY", "RUN"):
            for kind, value in _from_flags(inner_rest, way, where):  # that build's variables are not known
                found.append(Reference(number, instruction, kind, _expand(value, {}, way.escape, where=where)))
        return
    if keyword == "ARG" and scope is None:  # global: what FROM sees (no build arguments are passed)
        for name, value in _assignments(rest, way, keyword):
            if name in ENGINE_ARGS:
                globals_[name] = None
            elif value is not None:
                unknown: list = []
                expanded = _expand(value, globals_, way.escape, where=where, unknown=unknown)
                globals_[name] = None if unknown else expanded
            elif globals_.get(name, UNSET) is UNSET:
                globals_[name] = UNSET
            else:  # declared again without a default: what it keeps is not certain
                globals_[name] = None
        return
    if keyword == "ENV" and scope is not None:  # the base image's ENV overrides a stage's ARG, this ENV all
        for name, value in _assignments(rest, way, keyword):
            if value is None:
                raise ContainerfileError(f"{where}: ENV {_short(name)} without a value")
            unknown = []
            expanded = _expand(value, scope, way.escape, where=where, unknown=unknown)
            scope[name] = None if unknown else expanded
        return
    if keyword == "FROM":
        words = _words(_after_flags(rest, way), way.escape, lambda ch: ch in _ENGINE_SPACES if way.exact
                       else ch.isspace())
        if not words:
            raise ContainerfileError(f"{where}: FROM names no image")
        image = _expand(words[0], globals_, way.escape, where=where)
        name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else ""
        if image.lower() not in [s for s in stages if s]:
            found.append(Reference(number, instruction, "FROM", image))
        stages.append(name)
        state["scope"] = {}
        return
    if keyword in ("COPY", "RUN"):
        for kind, value in _from_flags(rest, way, where):
            image = _expand(value, scope if scope is not None else globals_, way.escape, where=where)
            key = image.lower()
            earlier = stages[:-1]  # a stage refers to earlier stages only, by name or number
            if key in [s for s in earlier if s] or (key.isdigit() and int(key) < len(earlier)):
                continue
            found.append(Reference(number, instruction, kind, image))


def _from_flags(rest: str, way: _Way, where: str):
    for name, value in _flags(rest, way):
        if name == "from":
            if value is None:
                raise ContainerfileError(f"{where}: --from without =")
            yield "--from", value
        elif name == "mount":
            if value is None:
                raise ContainerfileError(f"{where}: --mount without =")
            source = _mount_from(value)
            if source is not None:
                yield "--from", source


def _odd_space(text: str) -> bool:
    """Whether ``text`` holds white space other than space, tab and ``\\n`` (or a
    ``\\r``): then the engines' reading and the Unicode one may differ."""
    return any(ch.isspace() and ch not in " \t\n" for ch in set(text))


def references(text: str) -> list[Reference]:
    """Every image reference of the Containerfile ``text`` that is not a stage of the
    same file, in order, read every way the engines may read it (each found once). A
    :class:`ContainerfileError` when the text cannot be read for them."""
    if len(text) > MAX_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ContainerfileError(f"it is larger than {MAX_BYTES // 1024} KiB")
    found: list[Reference] = []
    try:
        for exact in ((True, False) if _odd_space(text) else (True,)):
            lines = _lines(text, exact)
            escapes, syntax, start = _directives(lines)
            found += [Reference(line, shown, "syntax", value) for line, shown, value in syntax]
            for escape in escapes:
                for heredocs in ((False, True) if "<<" in text else (False,)):
                    found += _read(lines, start, _Way(escape, heredocs, exact))
    except ContainerfileError:
        raise
    except (ValueError, IndexError) as exc:  # a text this reader does not follow: refused, never built
        raise ContainerfileError(f"cannot be read: {exc}") from None
    seen, out = set(), []
    for ref in found:
        key = (ref.line, ref.kind, ref.image)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return sorted(out, key=lambda r: r.line)


def references_refusal(found: list[Reference], service_id: str, *, allow_private_registries: bool,
                       resolver: addresses.Resolver, strict: bool = True) -> str | None:
    """Why the service ``service_id`` may not build on the references ``found`` (the
    line and what it names), or None. ``strict``: a registry host that does not resolve
    is refused (the build is about to pull)."""
    for ref in found:
        reason = image_refusal(ref.image, service_id)
        if reason:
            return f"{ref.where()}: {reason}"
    if allow_private_registries:
        return None
    return registries_refusal([(ref.where(), ref.image) for ref in found], strict=strict, resolver=resolver)


def refusal(text: str, service_id: str, *, allow_private_registries: bool, resolver: addresses.Resolver,
            strict: bool = True) -> str | None:
    """Why the service ``service_id`` may not build from the Containerfile ``text`` (the
    line and what it names), or None."""
    try:
        found = references(text)
    except ContainerfileError as exc:
        return f"cannot be read for the images it starts from: {exc}"
    return references_refusal(found, service_id, allow_private_registries=allow_private_registries,
                              resolver=resolver, strict=strict)


ALLOW_PRIVATE = "SLIPWAY_REGISTRY_ALLOW_PRIVATE"


def allow_private(settings) -> bool:
    """``SLIPWAY_REGISTRY_ALLOW_PRIVATE``: ``0`` (the default) or ``1`` (a ``ValueError``
    names the variable otherwise)."""
    raw = (settings.get(ALLOW_PRIVATE) or "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{ALLOW_PRIVATE} must be 0 or 1, got {raw!r}")
    return raw == "1"
