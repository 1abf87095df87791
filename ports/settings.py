"""Settings, declared once each: :class:`Setting` (the variable, its parser, its default and
one line of documentation) and the parsers they share. The app's own settings are in
``app.config_table``; a plugin module declares the ``SLIPWAY_*`` variables only it reads in
a module attribute ``SETTINGS`` (a tuple of :class:`Setting`), which the app collects for
``slipway settings`` and docs/configuration.md. Each plugin reads its settings from the
mapping the app hands every registry factory's ``create(settings)`` (:class:`Settings`),
with :meth:`Setting.read`, so the default lives in the declaration alone."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


def number(settings: Mapping[str, str], name: str, default: float, *, ok, must: str) -> float:
    """``settings[name]`` as a finite number for which ``ok(value)`` holds; ``default`` when
    unset or empty. ``ValueError`` "NAME must be <must>, got '...'" otherwise."""
    raw = (settings.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and ok(value)):
        raise ValueError(f"{name} must be {must}, got {raw!r}")
    return value


def seconds(settings: Mapping[str, str], name: str, default: float) -> float:
    """``settings[name]`` as a positive, finite number of seconds; ``default`` when unset
    or empty. ``ValueError`` naming the variable otherwise (start-up stops with it)."""
    return number(settings, name, default, ok=lambda value: value > 0, must="a number of seconds greater than 0")


@dataclass(frozen=True, eq=False)  # one declaration is one setting: compared by identity
class Setting:
    """One setting. ``parse(name, raw)`` turns a given value into the setting's value, or
    raises a ``ValueError`` whose message names the variable (start-up stops with it);
    ``default`` is the value when the variable is unset or blank (``None`` and ``shown``
    for a default that is worked out when read, such as a found engine). ``doc`` is its
    line in docs/configuration.md; ``shown`` the default as that table gives it (the
    default itself, in backquotes, when None); ``secret``: ``slipway settings`` shows
    ``***``; ``blank_is_value``: set but empty is a value, not the default (e.g.
    ``SLIPWAY_RUNTIME_URL=`` is "no engine")."""

    env: str
    parse: Callable[[str, str], Any]
    default: Any
    doc: str
    secret: bool = False
    shown: str | None = None
    blank_is_value: bool = False

    def given(self, settings: Mapping[str, str]) -> bool:
        """Whether ``settings`` gives this setting a value (else it is its default)."""
        raw = settings.get(self.env)
        return raw is not None and (self.blank_is_value or raw.strip() != "")

    def read(self, settings: Mapping[str, str]) -> Any:
        """Its value in ``settings``: the parsed variable when given, else the default."""
        return self.parse(self.env, settings[self.env]) if self.given(settings) else self.default

    def shown_default(self) -> str:
        if self.shown is not None:
            return self.shown
        if self.default is None or self.default == "":
            return "unset"
        if isinstance(self.default, bool):
            return f"`{int(self.default)}`"
        if isinstance(self.default, float) and self.default.is_integer():
            return f"`{int(self.default)}`"
        return f"`{self.default}`"


# --- parsers: (name, raw) -> value, a ValueError naming the variable otherwise ----------


def text(name: str, raw: str) -> str:
    """The value as given."""
    return raw


def stripped(name: str, raw: str) -> str:
    return raw.strip()


def lowered(name: str, raw: str) -> str:
    return raw.strip().lower()


def flag(name: str, raw: str) -> bool:
    """``0`` or ``1``."""
    value = raw.strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{name} must be 0 or 1, got {raw!r}")
    return value == "1"


def positive(name: str, raw: str) -> float:
    """A finite number greater than 0."""
    return number({name: raw}, name, 0.0, ok=lambda value: value > 0, must="a number greater than 0")


def positive_seconds(name: str, raw: str) -> float:
    """A finite number of seconds greater than 0 (plugins' time-outs)."""
    return number({name: raw}, name, 0.0, ok=lambda value: value > 0, must="a number of seconds greater than 0")


def interval(name: str, raw: str) -> float:
    """``0`` (off, or none) or a number greater than 0."""
    return 0.0 if raw.strip() == "0" else positive(name, raw)


def whole(minimum: int = 1, maximum: int | None = None, must: str | None = None) -> Callable[[str, str], int]:
    """A parser of whole numbers from ``minimum`` (to ``maximum``)."""
    if must is None:
        must = (f"a whole number from {minimum} to {maximum}" if maximum is not None else
                "a whole number greater than 0" if minimum == 1 else f"a whole number of at least {minimum}")

    def parse(name: str, raw: str) -> int:
        value = raw.strip()
        if not value.isdigit() or int(value) < minimum or (maximum is not None and int(value) > maximum):
            raise ValueError(f"{name} must be {must}, got {raw!r}")
        return int(value)
    return parse


def cpus(minimum: float, maximum: float = 65536) -> Callable[[str, str], float]:
    """A parser of numbers of CPUs from ``minimum`` to ``maximum``, at most three decimals."""
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not minimum <= value <= maximum or \
                abs(value * 1000 - round(value * 1000)) > 1e-6:
            raise ValueError(f"{name} must be a number of CPUs from {minimum:g} to {maximum:g} with at most three "
                             f"decimals, got {raw!r}")
        return value
    return parse


class Settings(Mapping):
    """What every registry factory's ``create(settings)`` gets: the ``SLIPWAY_*`` variables
    (a read-only mapping, with the values Slipway resolved: e.g. ``SLIPWAY_DATABASE_URL``,
    ``SLIPWAY_RUNTIME_URL`` and ``SLIPWAY_RUNTIME`` as the server uses them, the engine
    found when the operator named none, ``SLIPWAY_HOST_PORTS`` as the app read it) and
    ``database``, the panel's relational database (a ``peewee.Database``) for factories
    that keep tables in it (the embedded license service); None where there is none (a
    plain check of the settings). ``resolver`` is the app's name lookups
    (``ports.resolver.Resolver``, the system's when none is given) for a factory whose
    object looks host names up (the ``compose`` method: a registry's host), so core does
    no lookup of its own and a test hands a fake one.

    :meth:`part` hands a factory what another registry made for the same app (the ``ai``
    deploy method's analyzer), so a factory gets everything its object needs before the
    object is built, and nothing is set on it afterwards."""

    def __init__(self, values: Mapping[str, str] | None = None, *, database=None,
                 parts: Callable[[str], object] | None = None, resolver=None):
        self._values = {k: v for k, v in (values or {}).items() if v is not None}
        self.database = database
        self._parts = parts
        if resolver is None and isinstance(values, Settings):  # settings on top of settings: the same lookups
            resolver = values._resolver
        self._resolver: Any = resolver

    @property
    def resolver(self):
        """The app's ``ports.resolver.Resolver`` (the system's when none was given)."""
        if self._resolver is None:
            from ports.resolver import SystemResolver

            self._resolver = SystemResolver()
        return self._resolver

    def part(self, kind: str):
        """What the registry ``kind`` (a kind of ``app.registries.REGISTRIES``, e.g.
        ``"analyzers"``: the analyzer ``SLIPWAY_AI_ANALYZER`` names) made for this app,
        made on the first ask. A bad setting of that registry is a ``ValueError`` naming
        it; ``LookupError`` when these settings offer no parts (a plain check)."""
        if self._parts is None:
            raise LookupError(f"these settings offer no {kind}")
        return self._parts(kind)

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:  # values may be secrets: names only
        return f"Settings({sorted(self._values)})"
