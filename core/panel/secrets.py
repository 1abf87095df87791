"""Secret variables: the template variables marked ``secret`` (a database's password).

A service keeps the names of its secret variables (``Service.secrets``); their values
are in ``Service.variables`` in the clear while the panel works with them (a deploy runs
them), stored encrypted (AES-GCM, ``SLIPWAY_SECRET_KEY``: the storage adapter does it)
and shown as :data:`MASK` in every answer but ``GET /api/services/{id}/secrets``
(permission ``services:secrets``). A PATCH that sends :data:`MASK` back for one, or
leaves one out, keeps its stored value; another value replaces it."""
from __future__ import annotations

from core.errors import Invalid

MASK = "***"


def masked(variables: dict | None, secrets) -> dict:
    """``variables`` as answers show them: each secret one's value :data:`MASK`."""
    names = set(secrets or ())
    return {name: MASK if name in names else value for name, value in (variables or {}).items()}


def kept(given, stored: dict | None, secrets) -> dict:
    """The variables a PATCH asks for (``given``, the whole map), with each secret
    variable it sends back as :data:`MASK` or leaves out keeping its ``stored`` value."""
    if not isinstance(given, dict):
        raise Invalid("invalid change", fields={"variables": "must be an object of strings"})
    stored = stored or {}
    out = dict(given)
    for name in secrets or ():
        if name in stored and out.get(name, MASK) == MASK:
            out[name] = stored[name]
    return out


def clear(service, principal) -> dict:
    """The clear values of ``service``'s secret variables, for a caller holding
    ``services:secrets``."""
    principal.require("services:secrets")
    variables = service.variables or {}
    return {name: variables[name] for name in sorted(service.secrets or ()) if name in variables}
