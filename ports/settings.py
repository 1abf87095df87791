"""Reading plugin settings: each plugin reads its own ``SLIPWAY_*`` variables from the
mapping the app hands it (``DeployMethod.configure``, license-service factories, analyzers)."""
from __future__ import annotations

import math
from collections.abc import Mapping


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
