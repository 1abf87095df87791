"""Secret variables: the template variables marked ``secret`` (a database's password),
and the variables a create or PATCH names in ``secret_variables`` (any deploy method: a
git service's ``DATABASE_URL`` or API key).

A service keeps the names of its secret variables (``Service.secrets``); their values
are in ``Service.variables`` in the clear while the panel works with them (a deploy runs
them), stored encrypted (AES-GCM, ``SLIPWAY_SECRET_KEY``: the storage adapter does it)
and shown as :data:`MASK` in every answer but ``GET /api/services/{id}/secrets``
(permission ``services:secrets``). A PATCH that sends :data:`MASK` back for one, or
leaves one out, keeps its stored value; another value replaces it. A PATCH's
``secret_variables`` (the whole list) says which stay secret: a template's stay whatever
it says; one it leaves out and ``variables`` leaves out goes; one made plain (its value
shown from then on) needs ``services:secrets``."""
from __future__ import annotations

from core.errors import Invalid

MASK = "***"


def masked(variables: dict | None, secrets) -> dict:
    """``variables`` as answers show them: each secret one's value :data:`MASK`."""
    names = set(secrets or ())
    return {name: MASK if name in names else value for name, value in (variables or {}).items()}


def kept(given, stored: dict | None, secrets, missing_kept=None) -> dict:
    """The variables a PATCH asks for (``given``, the whole map), with each secret
    variable it sends back as :data:`MASK` keeping its ``stored`` value, and so each one
    it leaves out among ``missing_kept`` (default: every one of ``secrets``)."""
    if not isinstance(given, dict):
        raise Invalid("invalid change", fields={"variables": "must be an object of strings"})
    stored = stored or {}
    out = dict(given)
    for name in secrets or ():
        if name in stored and out.get(name) == MASK:
            out[name] = stored[name]
    for name in secrets if missing_kept is None else missing_kept:
        if name in stored and name not in out:
            out[name] = stored[name]
    return out


#: the request field naming which of ``variables`` are secret (create and PATCH)
FIELD = "secret_variables"


def named(given, variables: dict | None) -> tuple:
    """The names ``secret_variables`` gives (a list of names, each among ``variables``,
    the service's variables as its deploy method planned them); 422 on
    ``secret_variables`` otherwise."""
    if not isinstance(given, list) or not all(isinstance(name, str) for name in given):
        raise Invalid("invalid secret variables", fields={FIELD: "must be a list of variable names"})
    missing = [name for name in dict.fromkeys(given) if name not in (variables or {})]
    if missing:
        raise Invalid("invalid secret variables",
                      fields={FIELD: "not among variables: " + ", ".join(repr(n[:80]) for n in missing[:10])})
    return tuple(dict.fromkeys(given))


def template_secrets(catalog: dict | None, template_id: str | None) -> tuple:
    """The names template ``template_id`` of ``catalog`` marks ``secret`` (none without one)."""
    template = (catalog or {}).get(template_id) if template_id else None
    return tuple(v["name"] for v in (template or {}).get("variables", []) if v.get("secret"))


def still_secret(had, given, planned=()) -> tuple:
    """Of the secret names a service ``had``, those a PATCH keeps secret: all of them
    without ``secret_variables`` (``given`` None), else those it names and the template's
    (``planned``). A secret kept so and left out of the PATCH's ``variables`` keeps its
    value (:func:`kept`); one no longer secret and left out goes."""
    if not isinstance(given, list):
        return tuple(had or ())
    return tuple(n for n in had or () if n in given or n in planned)


def marked(planned, given=None, variables: dict | None = None, had=()) -> tuple:
    """The secret names of a service: those its deploy method's plan makes secret
    (``planned``: a template's ``secret`` variables, secret whatever a request says), with
    those ``secret_variables`` names (``given``; None: the ``had`` ones still among
    ``variables``)."""
    chosen = named(given, variables) if given is not None else tuple(n for n in had if n in (variables or {}))
    return tuple(sorted(set(planned or ()) | set(chosen)))


def clear(service, principal) -> dict:
    """The clear values of ``service``'s secret variables, for a caller holding
    ``services:secrets``."""
    principal.require("services:secrets")
    variables = service.variables or {}
    return {name: variables[name] for name in sorted(service.secrets or ()) if name in variables}
