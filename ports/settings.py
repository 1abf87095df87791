"""Reading plugin settings: each plugin reads its own ``SLIPWAY_*`` variables from the
mapping the app hands every registry factory's ``create(settings)``."""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping


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


class Settings(Mapping):
    """What every registry factory's ``create(settings)`` gets: the ``SLIPWAY_*`` variables
    (a read-only mapping, with the values Slipway resolved: e.g. ``SLIPWAY_DATABASE_URL``,
    ``SLIPWAY_RUNTIME_URL`` and ``SLIPWAY_RUNTIME`` as the server uses them, the engine
    found when the operator named none, ``SLIPWAY_HOST_PORTS`` as the app read it) and
    ``database``, the panel's relational database (a ``peewee.Database``) for factories
    that keep tables in it (the embedded license service); None where there is none (a
    plain check of the settings).

    :meth:`part` hands a factory what another registry made for the same app (the ``ai``
    deploy method's analyzer), so a factory gets everything its object needs before the
    object is built, and nothing is set on it afterwards."""

    def __init__(self, values: Mapping[str, str] | None = None, *, database=None,
                 parts: Callable[[str], object] | None = None):
        self._values = {k: v for k, v in (values or {}).items() if v is not None}
        self.database = database
        self._parts = parts

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
