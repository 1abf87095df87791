"""Reading and writing compose text the way ``docker compose`` does, within limits.

Every compose text Slipway reads (the ``compose`` field, a repository's compose file, an
analyzer's answer, a template) goes through :func:`load_compose`:

- YAML 1.2 (ruamel.yaml): ``- 20022:22`` and ``- 22:22`` are the strings ``"20022:22"``
  and ``"22:22"`` (never the sexagesimal 1342), ``yes``/``no``/``on``/``off`` stay
  strings, timestamps stay strings (as compose reads them); a ``%YAML 1.1`` directive
  changes nothing. Tags other than the core schema's (``!!python/object``, ``!!binary``,
  ``!custom`` ...), complex keys, duplicate keys and recursive aliases are refused;
  merge keys (``<<: *anchor``) work as compose has them.
- Limits, checked before any Python object is built: at most ``MAX_BYTES`` (128 KiB) of
  UTF-8 text; at most ``MAX_NODES`` (10,000) YAML nodes counted on the composed node graph
  with every alias expanded (memoised, so a "billion laughs" costs what its text costs,
  and the count stops as soon as it passes the limit) and at most ``MAX_DEPTH`` levels;
  then, while the objects are built, at most ``MAX_EXPANDED_TEXT`` (1 MiB) of scalar text
  with aliases expanded and variables substituted.
- Interpolation (the compose specification: ``$VAR``, ``${VAR}``, ``$$``, ``${VAR:-d}``,
  ``${VAR-d}``, ``${VAR:+a}``, ``${VAR+a}``, ``${VAR:?msg}``, ``${VAR?msg}``, nested in
  the defaults) applies to the string values of the parsed tree, never to keys and never
  to the raw text, so a variable's value cannot add YAML structure.

Every refusal is :class:`core.errors.Invalid` on ``compose`` (or ``variables.NAME`` for
a ``?`` form whose variable is missing).
"""
from __future__ import annotations

import io
import math
import re

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer, MaxDepthExceededError
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, ScalarNode, SequenceNode
from ruamel.yaml.representer import SafeRepresenter
from ruamel.yaml.resolver import VersionedResolver
from ruamel.yaml.scanner import Scanner, ScannerError

from core.errors import Invalid

MAX_BYTES = 131072  # 128 KiB of UTF-8 text
MAX_NODES = 10_000  # YAML nodes after expanding anchors and aliases
MAX_DEPTH = 64  # nesting levels after expanding aliases (compose files use about ten)
MAX_EXPANDED_TEXT = 1024 * 1024  # characters of scalar text after expanding aliases and interpolation

_CORE = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (_CORE + t for t in ("str", "int", "float", "bool", "null"))
MAP, SEQ, MERGE = _CORE + "map", _CORE + "seq", _CORE + "merge"
_AS_TEXT = {STR, _CORE + "timestamp", _CORE + "value", MERGE}  # plain scalars compose keeps as text
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = (":-", ":+", ":?", "-", "+", "?")
_MAX_NESTING = 16  # ${A:-${B:-...}} levels


def _bad(message: str, field: str = "compose") -> Invalid:
    return Invalid("invalid compose definition", fields={field: message})


def _tag(node) -> str:
    tag = node.tag
    return str(getattr(tag, "value", tag) or "")


# --- interpolation ----------------------------------------------------------------------


class _Budget:
    """Characters of text produced so far; refuses past ``MAX_EXPANDED_TEXT``."""

    def __init__(self, limit: int = MAX_EXPANDED_TEXT):
        self.limit, self.spent = limit, 0

    def spend(self, amount: int) -> None:
        self.spent += amount
        if self.spent > self.limit:
            raise _bad(f"more than {self.limit // 1024} KiB of text once anchors, aliases and variables are "
                       "expanded")


def _template(text: str, i: int, nested: int) -> tuple[list, int]:
    """Parse ``text`` from ``i`` into literal strings and ``(name, operator, argument)``
    parts; inside ``${NAME<op>...}`` (``nested`` > 0) it stops after the closing brace."""
    parts: list = []
    literal: list[str] = []
    braces, n = 0, len(text)
    while i < n:
        ch = text[i]
        if nested and ch == "}":
            if not braces:
                if literal:
                    parts.append("".join(literal))
                return parts, i + 1
            braces -= 1
        elif nested and ch == "{":
            braces += 1
        elif ch == "$":
            nxt = text[i + 1] if i + 1 < n else ""
            if nxt == "$":
                literal.append("$")
                i += 2
                continue
            if nxt == "{":
                match = _NAME.match(text, i + 2)
                end = match.end() if match else i + 2
                operator = next((op for op in _OPERATORS if text.startswith(op, end)), None)
                if match is None or (operator is None and not text.startswith("}", end)):
                    raise _bad(f"invalid interpolation format: {_excerpt(text, i)!r} (use ${{NAME}}, "
                               "${NAME:-default}, ${NAME:?message} ...; write $$ for a literal $)")
                if literal:
                    parts.append("".join(literal))
                    literal = []
                if operator is None:
                    parts.append((match.group(), None, None))
                    i = end + 1
                    continue
                if nested >= _MAX_NESTING:
                    raise _bad(f"interpolation nested more than {_MAX_NESTING} levels deep")
                argument, i = _template(text, end + len(operator), nested + 1)
                parts.append((match.group(), operator, argument))
                continue
            match = _NAME.match(text, i + 1)
            if match:
                if literal:
                    parts.append("".join(literal))
                    literal = []
                parts.append((match.group(), None, None))
                i = match.end()
                continue
        literal.append(ch)
        i += 1
    if nested:
        raise _bad("invalid interpolation format: a ${ without its closing }")
    if literal:
        parts.append("".join(literal))
    return parts, i


def _excerpt(text: str, i: int) -> str:
    return text[i:i + 40] + ("..." if len(text) > i + 40 else "")


def _evaluate(parts: list, variables, budget: _Budget) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            budget.spend(len(part))
            out.append(part)
            continue
        name, operator, argument = part
        value = variables.get(name)
        if value is not None and not isinstance(value, str):
            value = str(value)
        if operator is None:
            text = value or ""
        elif operator == ":-":
            text = value if value else None
        elif operator == "-":
            text = value if value is not None else None
        elif operator == ":+":
            text = None if value else ""
        elif operator == "+":
            text = None if value is not None else ""
        else:  # ":?" and "?": a missing value is the request's fault, with the author's message
            if (operator == ":?" and not value) or (operator == "?" and value is None):
                message = _evaluate(argument, variables, budget).strip()
                raise Invalid("missing variable", fields={
                    f"variables.{name}": message or f"required variable {name} is missing a value"})
            text = value
        if text is None:  # the default or the alternative: itself interpolated, only when used
            out.append(_evaluate(argument, variables, budget))
        else:
            budget.spend(len(text))
            out.append(text)
    return "".join(out)


def interpolate(text: str, variables, budget: _Budget | None = None) -> str:
    """``text`` with the compose specification's interpolation applied from ``variables``
    (an unset ``$VAR`` is empty). Raises ``Invalid`` for a malformed ``${...}`` and for a
    ``?`` form whose variable is missing (on ``variables.NAME``)."""
    if "$" not in text:
        if budget is not None:
            budget.spend(len(text))
        return text
    parts, _ = _template(text, 0, 0)
    return _evaluate(parts, variables or {}, budget or _Budget())


# --- reading ----------------------------------------------------------------------------


class _Scanner(Scanner):
    """ruamel's scanner, refusing flow collections (``[`` ``{``) nested more than
    ``MAX_DEPTH`` deep while it reads them: it checks every open level on each token, so
    128 KiB of ``[`` would otherwise cost it seconds of CPU."""

    def fetch_flow_collection_start(self, TokenClass, to_push) -> None:  # ruamel's name
        if self.flow_level >= MAX_DEPTH:
            raise ScannerError(None, None, f"flow collections nested more than {MAX_DEPTH} levels deep",
                               self.reader.get_mark())
        super().fetch_flow_collection_start(TokenClass, to_push)


class _Composer(Composer):
    """ruamel's composer, stopping once it has made more than ``MAX_NODES`` nodes and
    aliases (the expanded count can only be larger), so an over-long document is not
    read to its end."""

    def compose_node(self, parent, index):
        self.made = getattr(self, "made", 0) + 1
        if self.made > MAX_NODES:
            raise _bad(f"more than {MAX_NODES} YAML nodes once anchors and aliases are expanded")
        return super().compose_node(parent, index)


def _compose_node(text: str):
    if not isinstance(text, str):
        raise _bad("must be text")
    if len(text) > MAX_BYTES or len(text.encode("utf-8", errors="surrogatepass")) > MAX_BYTES:
        raise _bad(f"the compose definition is larger than {MAX_BYTES // 1024} KiB ({MAX_BYTES} bytes)")
    try:
        reader = YAML(typ="safe", pure=True)
        reader.Scanner, reader.Composer, reader.max_depth = _Scanner, _Composer, MAX_DEPTH
        return reader.compose(text)
    except MaxDepthExceededError:
        raise _bad(f"nested more than {MAX_DEPTH} levels deep") from None
    except YAMLError as exc:
        raise _bad(f"not valid YAML: {_short(exc)}") from None
    except RecursionError:
        raise _bad(f"nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, TypeError, AttributeError, IndexError, KeyError) as exc:  # odd input ruamel did not foresee
        raise _bad(f"not valid YAML: {_short(exc)}") from None


def _short(exc: Exception) -> str:
    text = str(exc).strip()
    return text if len(text) <= 600 else text[:600] + "..."


def _children(node):
    if isinstance(node, MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, SequenceNode):
        yield from node.value


def check_size(root) -> int:
    """The number of nodes of the graph under ``root`` with every alias expanded (an alias
    is the very node object its anchor names, so each distinct node is measured once);
    refuses, as soon as it knows, a count over ``MAX_NODES``, a depth over ``MAX_DEPTH``
    and an alias inside its own anchor."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set = set()
    stack = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            on_path.discard(key)
            total, depth = 1, 1
            for child in _children(node):
                total += sizes[id(child)]
                depth = max(depth, depths[id(child)] + 1)
                if total > MAX_NODES:
                    raise _bad(f"more than {MAX_NODES} YAML nodes once anchors and aliases are expanded")
                if depth > MAX_DEPTH:
                    raise _bad(f"nested more than {MAX_DEPTH} levels deep")
            sizes[key], depths[key] = total, depth
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise _bad("an alias refers to a node that contains it (a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


_INT = re.compile(r"^[-+]?(?:[0-9][0-9_]*|0x[0-9a-fA-F_]+|0o[0-7_]+|0b[01_]+)$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?$")


def _number(text: str, tag: str):
    """A YAML 1.2 core-schema number, or None when ``text`` is not one (a YAML 1.1 form)."""
    if tag == INT and _INT.match(text):
        clean = text.replace("_", "")
        sign = -1 if clean.startswith("-") else 1
        digits = clean.lstrip("+-")
        base = {"0x": 16, "0o": 8, "0b": 2}.get(digits[:2].lower(), 10)
        return sign * int(digits[2:] if base != 10 else digits, base)
    if tag == FLOAT:
        lowered = text.lower().lstrip("+-")
        if lowered in (".inf", ".nan"):
            return (-math.inf if text.startswith("-") else math.inf) if lowered == ".inf" else math.nan
        if _FLOAT.match(text) and any(c.isdigit() for c in text):
            return float(text.replace("_", ""))
    return None


class _Builder:
    """Python objects from a checked node graph; a node reached again through an alias
    gives the same object (and its text counts again toward the budget)."""

    def __init__(self, variables, interpolating: bool):
        self.variables, self.interpolating = variables, interpolating
        self.budget = _Budget()
        self.done: dict = {}  # id(node) -> (object, characters it holds)

    def build(self, node, where: str):
        key = id(node)
        if key in self.done:
            value, cost = self.done[key]
            self.budget.spend(cost)
            return value
        before = self.budget.spent
        if isinstance(node, ScalarNode):
            value = self._scalar(node, where)
        elif isinstance(node, SequenceNode):
            if _tag(node) != SEQ:
                raise _bad(f"{where}: unsupported YAML tag {_tag(node)!r}")
            value = [self.build(item, f"{where}[{i}]") for i, item in enumerate(node.value)]
        elif isinstance(node, MappingNode):
            value = self._mapping(node, where)
        else:
            raise _bad(f"{where}: unsupported YAML node")
        self.done[key] = (value, self.budget.spent - before)
        return value

    def _scalar(self, node, where: str):
        tag, text = _tag(node), node.value
        if tag in _AS_TEXT or (tag == BOOL and text.lower() not in ("true", "false")) or (
                tag in (INT, FLOAT) and _number(text, tag) is None):
            if self.interpolating:
                return interpolate(text, self.variables, self.budget)
            self.budget.spend(len(text))
            return text
        self.budget.spend(len(text))
        if tag == NULL:
            return None
        if tag == BOOL:
            return text.lower() == "true"
        if tag in (INT, FLOAT):
            return _number(text, tag)
        raise _bad(f"{where}: unsupported YAML tag {tag!r}")

    def _key(self, node, where: str) -> str:
        if not isinstance(node, ScalarNode) or _tag(node) not in _AS_TEXT | {INT, FLOAT, BOOL, NULL}:
            raise _bad(f"{where}: keys must be plain text")
        self.budget.spend(len(node.value))
        return node.value

    def _mapping(self, node, where: str) -> dict:
        if _tag(node) != MAP:
            raise _bad(f"{where}: unsupported YAML tag {_tag(node)!r}")
        result, merges = {}, []
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and _tag(key_node) == MERGE and key_node.style is None:
                merges.append(value_node)
                continue
            key = self._key(key_node, where)
            inner = f"{where}.{key}" if where else key
            if key in result:
                raise _bad(f"{inner}: the key appears twice")
            result[key] = self.build(value_node, inner)
        for merge in merges:  # explicit keys win; of several merged maps, the first wins
            sources = merge.value if isinstance(merge, SequenceNode) else [merge]
            for source in sources:
                merged = self.build(source, f"{where}.<<" if where else "<<")
                if not isinstance(merged, dict):
                    raise _bad(f"{where or 'top level'}: a merge key (<<) takes a map or a list of maps")
                for key, value in merged.items():
                    result.setdefault(key, value)
        return result


def load_compose(text: str, variables=None, *, interpolating: bool = True):
    """The document of compose ``text`` as Python objects (None for an empty text), read
    as YAML 1.2 within the limits above; with ``interpolating`` its string values are
    interpolated from ``variables``. Raises ``Invalid``."""
    root = _compose_node(text)
    if root is None:
        return None
    check_size(root)
    try:
        return _Builder(variables or {}, interpolating).build(root, "")
    except RecursionError:  # not reached within MAX_DEPTH; kept as a last guard
        raise _bad(f"nested more than {MAX_DEPTH} levels deep") from None


# --- writing ----------------------------------------------------------------------------


_YAML11 = VersionedResolver(version=(1, 1))
_YAML12 = VersionedResolver(version=(1, 2))


class _Representer(SafeRepresenter):
    """Strings that a YAML 1.1 reader would take for something else (``22:22``, ``yes``,
    ``010``, ``2001-01-01``) are quoted, so any reader gets the text back."""

    def represent_str(self, data):
        node = super().represent_str(data)
        if node.style is None and (_YAML11.resolve(ScalarNode, data, (True, False)) != STR
                                   or _YAML12.resolve(ScalarNode, data, (True, False)) != STR):
            node.style = "'"
        return node

    def ignore_aliases(self, data) -> bool:
        return data is None or isinstance(data, (str, bytes, bool, int, float))


_Representer.add_representer(str, _Representer.represent_str)


def dump_compose(document) -> str:
    """YAML text of ``document`` (dicts, lists, strings, numbers, booleans, None) that
    reads back the same under YAML 1.2 and 1.1; a map or list used twice gets an anchor."""
    writer = YAML(typ="safe", pure=True)
    writer.Representer = _Representer
    writer.default_flow_style = False
    writer.sort_base_mapping_type_on_output = False  # type: ignore[assignment]  # ruamel declares it None
    writer.width = 4096
    out = io.StringIO()
    writer.dump(document, out)
    return out.getvalue()


__all__ = ["MAX_BYTES", "MAX_NODES", "MAX_DEPTH", "MAX_EXPANDED_TEXT", "check_size", "dump_compose",
           "interpolate", "load_compose"]
