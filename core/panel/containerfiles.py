"""Which images a service may start from: the rule of compose ``image:`` applied to every
image reference a build reads. Pure (the registry rule's name lookup is handed in).

A service runs and builds on images it may use (:func:`image_refusal`): never an image id
or id prefix (hexadecimal, with or without ``sha256:``; the engines resolve any unique
prefix, two digits do, to whatever local image has it: another tenant's build or kept
release), and never a name in Slipway's own namespace (``localhost/slw-...``, also as a
short name, which Podman looks up under ``localhost/``) other than its own builds.

Registries (:func:`registry_refusal`): a reference's registry host is the first path
component when it holds a ``.`` or a ``:``, is ``localhost`` or has upper-case letters
(the docker reference grammar); one that is, or resolves to, an address that is not
public (:mod:`core.addresses`, the rule of ``git_url`` and webhooks) is refused unless the
operator allows private registries. ``localhost/...`` without a port names the engine's
own images (:func:`engine_local`): those are never pulled.

A Containerfile or Dockerfile is read (:func:`references`) as the engines read it:
parser directives (``escape``, ``syntax``, whose frontend image is a reference too),
line continuations with the escape character, comments, ``ARG`` defaults (global ones
before the first ``FROM`` for ``FROM``; a stage's ``ARG`` and ``ENV`` for ``--from``),
every stage's ``FROM``, every ``COPY --from=`` and ``RUN --mount=...,from=``, also
behind ``ONBUILD``. A stage named (or, for ``--from``, numbered) earlier in the file is
not an image. Heredocs (BuildKit and Buildah) hide their bodies from the parser while a
classic builder reads those lines as instructions: the text is read both ways and must
pass both. A text that cannot be read for references (an unknown escape character, a
``--from`` without ``=``, a variable form or a variable whose value the file does not
give) is refused: nothing is built from a file whose base images are not known.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from core import addresses
from core.panel.containers import BUILT_IMAGES, built_image_prefix

_IMAGE_ID = re.compile(r"(sha256:)?[0-9a-f]{1,64}")
_DIRECTIVE = re.compile(r"^#\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(.*?)\s*$")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEREDOC = re.compile(r"<<(-?)\s*([\"']?)([A-Za-z0-9_.-]+)\2")
_STAGE = re.compile(r"[a-z][a-z0-9_.-]*")
MAX_LINE_SHOWN = 200


class ContainerfileError(ValueError):
    """The text cannot be read for the images it names; the message says where."""


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


def image_refusal(reference: str, service_id: str) -> str | None:
    """Why the service ``service_id`` may not use the image ``reference`` (run it, or
    build on it), or None: an image id or id prefix, or another service's build."""
    image = reference.strip().lower()
    if not image:
        return "names no image"
    if _IMAGE_ID.fullmatch(image):
        # the engines resolve an image id, or any unique prefix of one (two hex digits
        # do), to whatever image has it: another tenant's build or kept release
        return f"{reference} reads as an image id; name the image (a repository, with a tag or a digest)"
    # a short name (no registry host) is looked up under localhost/ by Podman
    named = image if registry_host(image) else "localhost/" + image
    if named.startswith(BUILT_IMAGES) and not named.startswith(built_image_prefix(service_id)):
        return f"{reference} was built for another service; a service runs only images it built itself or pulls"
    return None


def _split_port(host: str) -> str:
    if host.startswith("["):  # [v6]:port
        return host[1:].split("]", 1)[0]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() else host


def registry_refusal(reference: str, *, resolve=addresses.resolve) -> str | None:
    """Why ``reference`` may not be pulled from its registry (the host is, or resolves
    to, an address that is not public), or None (no registry host, ``localhost``
    without a port, a public host, or a name that does not resolve: the pull fails)."""
    host = registry_host(reference.strip())
    if host is None or host.lower() == "localhost":
        return None
    name = _split_port(host).lower()
    allowed = "only public registries are allowed"
    try:
        ipaddress.ip_address(name.split("%", 1)[0])
        literal = True
    except ValueError:
        literal = False
    found = [name] if literal else (resolve(name) or [])
    reason = addresses.refusal(name, found, allowed)
    return f"the registry {host} of {reference}: {reason}" if reason else None


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
        shown = self.text if len(self.text) <= MAX_LINE_SHOWN else self.text[:MAX_LINE_SHOWN] + "..."
        return f"line {self.line} ({shown})"


def _expand(value: str, variables: dict, escape: str, *, strict: bool, where: str, unknown=None) -> str:
    """``$VAR``, ``${VAR}``, ``${VAR:-x}``, ``${VAR-x}``, ``${VAR:+x}``, ``${VAR+x}``
    with ``variables`` (a value None: one the file does not know, the base image's ENV
    may give it). A missing or unknown variable is empty (its name added to
    ``unknown``) unless ``strict``: then refused."""

    def lookup(name):
        current = variables.get(name)
        if current is None:
            if strict:
                raise ContainerfileError(f"{where}: the file gives no value of ${name}")
            if unknown is not None:
                unknown.append(name)
        return current

    again = {"strict": strict, "where": where, "unknown": unknown}
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
            depth, j = 1, i + 2
            while j < len(value) and depth:
                depth += {"{": 1, "}": -1}.get(value[j], 0)
                j += 1
            if depth:
                raise ContainerfileError(f"{where}: an unterminated ${{")
            inner = value[i + 2:j - 1]
            match = _NAME.match(inner)
            if not match:
                raise ContainerfileError(f"{where}: cannot read the variable ${{{inner}}}")
            name, rest = match.group(0), inner[match.end():]
            if rest == "":
                out.append(lookup(name) or "")
            elif rest[:2] in (":-", ":+") or rest[:1] in ("-", "+"):
                colon = rest.startswith(":")
                op, word = rest[1 if colon else 0], rest[2 if colon else 1:]
                current = lookup(name)  # unknown: whether it is set is not known either
                isset = current is not None and (current != "" if colon else True)
                if op == "-":
                    out.append(current if isset else _expand(word, variables, escape, **again))
                else:
                    out.append(_expand(word, variables, escape, **again) if isset else "")
            else:
                raise ContainerfileError(f"{where}: cannot read the variable form ${{{inner}}}")
            i = j
            continue
        match = _NAME.match(value, i + 1)
        if not match:
            out.append("$")
            i += 1
            continue
        out.append(lookup(match.group(0)) or "")
        i = match.end()
    return "".join(out)


def _words(text: str, escape: str) -> list[str]:
    """Whitespace-separated words, quotes taken off (quoted parts keep their spaces)."""
    words, current, quote, any_ = [], [], None, False
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
        elif ch.isspace():
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


def _flags(text: str, escape: str) -> tuple[list[tuple[str, str | None]], str]:
    """(the leading ``--name=value`` flags of an instruction's arguments, the text after
    them). Only the flags are read as words: the rest may be any shell text."""
    flags, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if not text.startswith("--", i):
            return flags, text[i:]
        end, quote = i, None
        while end < len(text) and (quote or not text[end].isspace()):
            if quote and text[end] == quote:
                quote = None
            elif not quote and text[end] in "\"'":
                quote = text[end]
            end += 1
        if quote:
            raise ContainerfileError("an unterminated quote in a flag")
        [word] = _words(text[i:end], escape) or [""]
        name, eq, value = word[2:].partition("=")
        flags.append((name.lower(), value if eq else None))
        i = end


def _mount_from(value: str) -> str | None:
    """The ``from=`` of a ``--mount`` value (comma-separated ``key=value``), or None."""
    found = None
    for part in value.split(","):
        key, _, item = part.strip().partition("=")
        if key.strip().lower() == "from":
            found = item.strip().strip("\"'")
    return found


def _logical_lines(text: str, heredocs: bool):
    """(first line number, escape character, instruction text) of every instruction,
    and the ``syntax`` directive (line, value) first when there is one."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").split("\n")
    escape, syntax, index = "\\", None, 0
    seen = set()
    while index < len(lines):  # parser directives: only at the very top
        match = _DIRECTIVE.match(lines[index].strip()) if lines[index].strip().startswith("#") else None
        if not match:
            break
        key, value = match.group(1).lower(), match.group(2)
        if key not in ("escape", "syntax", "check"):
            break
        if key in seen:
            raise ContainerfileError(f"line {index + 1}: the {key} directive is given twice")
        seen.add(key)
        if key == "escape":
            if value not in ("\\", "`"):
                raise ContainerfileError(f"line {index + 1}: an unknown escape character {value!r}")
            escape = value
        elif key == "syntax":
            syntax = (index + 1, lines[index].strip(), value)
        index += 1
    yield syntax, escape
    while index < len(lines):
        raw = lines[index]
        index += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        start, parts = index, []
        line = raw.rstrip()
        while line.endswith(escape):
            parts.append(line[:-1])
            line = None
            while index < len(lines):  # comments and empty lines inside a continuation are skipped
                candidate = lines[index]
                index += 1
                if candidate.strip() and not candidate.strip().startswith("#"):
                    line = candidate.rstrip()
                    break
            if line is None:
                break
        if line is not None:
            parts.append(line)
        instruction = "".join(parts).strip()
        yield start, instruction
        if heredocs:
            keyword = instruction.split(None, 1)[0].upper() if instruction else ""
            if keyword == "ONBUILD" and len(instruction.split(None, 2)) > 1:
                keyword = instruction.split(None, 2)[1].upper()
            if keyword in ("RUN", "COPY", "ADD"):
                for dash, _, word in _HEREDOC.findall(instruction):
                    while index < len(lines):  # the body, up to its terminator
                        body = lines[index]
                        index += 1
                        if (body.lstrip("\t") if dash else body) == word:
                            break


def _assignments(rest: str, escape: str, keyword: str) -> list[tuple[str, str | None]]:
    """``ARG name[=default] ...`` or ``ENV key=value ...`` / ``ENV key value``."""
    first = rest.split(None, 1)
    if keyword == "ENV" and first and "=" not in first[0]:  # the old form: ENV key the value
        return [(first[0], first[1].strip() if len(first) > 1 else None)]
    words = _words(rest, escape)
    pairs = []
    for word in words:
        name, eq, value = word.partition("=")
        pairs.append((name, value if eq else None))
    return pairs


def _read(text: str, heredocs: bool) -> list[Reference]:
    found: list[Reference] = []
    reader = _logical_lines(text, heredocs)
    syntax, escape = next(reader)
    if syntax is not None:
        line, shown, value = syntax
        found.append(Reference(line, shown, "syntax", value.strip()))
    globals_: dict = {}
    stages: list[str] = []  # stage names, "" for an unnamed stage
    scope: dict | None = None  # the current stage's ARG and ENV values; None before the first FROM
    for number, instruction in reader:
        where = f"line {number}"
        keyword, _, rest = instruction.replace("\t", " ").partition(" ")
        keyword = keyword.upper()
        try:
            scope = _instruction(found, number, instruction, keyword, rest, escape, globals_, stages, scope)
        except ContainerfileError as exc:
            raise (exc if str(exc).startswith("line ") else ContainerfileError(f"{where}: {exc}")) from None
    return found


def _instruction(found, number, instruction, keyword, rest, escape, globals_, stages, scope):
    """Read one instruction into ``found`` (and the variables and stages); answers the
    stage's variables after it."""
    where = f"line {number}"
    if keyword == "ONBUILD":  # runs in a later build on this image: its --from is an image there
        inner, _, inner_rest = rest.strip().partition(" ")
        if inner.upper() in ("COPY", "RUN"):
            for kind, value in _from_flags(inner_rest, escape, where):
                image = _expand(value, scope or globals_, escape, strict=True, where=where)
                found.append(Reference(number, instruction, kind, image))
        return scope
    if keyword == "ARG":
        for name, value in _assignments(rest, escape, keyword):
            if scope is None:
                if value is not None:
                    globals_[name] = _expand(value, globals_, escape, strict=False, where=where)
                else:
                    globals_.setdefault(name, None)
            elif value is not None:
                scope[name] = _known(value, scope, escape, where)
            else:  # the global default, else whatever the base image's ENV says
                scope[name] = globals_.get(name)
        return scope
    if keyword == "ENV" and scope is not None:
        for name, value in _assignments(rest, escape, keyword):
            if value is None:
                raise ContainerfileError(f"{where}: ENV {name} without a value")
            scope[name] = _known(value, scope, escape, where)
        return scope
    if keyword == "FROM":
        _, after = _flags(rest, escape)
        words = _words(after, escape)
        if not words:
            raise ContainerfileError(f"{where}: FROM names no image")
        image = _expand(words[0], globals_, escape, strict=False, where=where)
        name = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else ""
        if image.lower() not in [s for s in stages if s]:
            found.append(Reference(number, instruction, "FROM", image))
        stages.append(name)
        scope = {}
        return scope
    if keyword in ("COPY", "RUN"):
        for kind, value in _from_flags(rest, escape, where):
            image = _expand(value, scope if scope is not None else globals_, escape, strict=True, where=where)
            key = image.lower()
            earlier = stages[:-1]  # a stage refers to earlier stages only, by name or number
            if key in [s for s in earlier if s] or (key.isdigit() and int(key) < len(earlier)):
                continue
            found.append(Reference(number, instruction, kind, image))
    return scope


def _known(value: str, scope: dict, escape: str, where: str) -> str | None:
    """``value`` expanded, or None when it uses a variable the file does not know."""
    unknown: list = []
    expanded = _expand(value, scope, escape, strict=False, where=where, unknown=unknown)
    return None if unknown else expanded


def _from_flags(rest: str, escape: str, where: str):
    flags, _ = _flags(rest, escape)
    for name, value in flags:
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


def references(text: str) -> list[Reference]:
    """Every image reference of the Containerfile ``text`` that is not a stage of the
    same file, in order (read with and without heredocs; each read once). A
    :class:`ContainerfileError` when the text cannot be read for them."""
    try:
        plain, heredoc = _read(text, heredocs=False), _read(text, heredocs=True)
    except ContainerfileError:
        raise
    except (ValueError, IndexError) as exc:  # a text this reader does not follow: refused, never built
        raise ContainerfileError(f"cannot be read: {exc}") from None
    seen, out = set(), []
    for ref in plain + heredoc:
        key = (ref.line, ref.kind, ref.image)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return sorted(out, key=lambda r: r.line)


def refusal(text: str, service_id: str, *, allow_private_registries: bool, resolve=addresses.resolve) -> str | None:
    """Why the service ``service_id`` may not build from the Containerfile ``text`` (the
    line and what it names), or None."""
    try:
        found = references(text)
    except ContainerfileError as exc:
        return f"cannot be read for the images it starts from: {exc}"
    for ref in found:
        reason = image_refusal(ref.image, service_id)
        if reason is None and not allow_private_registries:
            reason = registry_refusal(ref.image, resolve=resolve)
        if reason:
            return f"{ref.where()}: {reason}"
    return None


ALLOW_PRIVATE = "SLIPWAY_REGISTRY_ALLOW_PRIVATE"


def allow_private(settings) -> bool:
    """``SLIPWAY_REGISTRY_ALLOW_PRIVATE``: ``0`` (the default) or ``1`` (a ``ValueError``
    names the variable otherwise)."""
    raw = (settings.get(ALLOW_PRIVATE) or "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{ALLOW_PRIVATE} must be 0 or 1, got {raw!r}")
    return raw == "1"
