"""Reading plugin settings: each plugin reads its own ``SLIPWAY_*`` variables from the
mapping the app hands it (``DeployMethod.configure``, license-service factories, analyzers)."""
from __future__ import annotations

import math
from collections.abc import Mapping


def seconds(settings: Mapping[str, str], name: str, default: float) -> float:
    """``settings[name]`` as a positive, finite number of seconds; ``default`` when unset
    or empty. ``ValueError`` naming the variable otherwise (start-up stops with it)."""
    raw = (settings.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a number of seconds greater than 0, got {raw!r}")
    return value
