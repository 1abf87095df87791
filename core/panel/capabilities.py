"""What the loaded deploy methods say they are, read by core's rules.

A deploy method (``ports.deploy.DeployMethod``) declares as data the fields it keeps per
service (``source_fields``, kept in the service's ``source``), whether it fetches its
source (``fetches_source``), deploys on push (``deploys_on_push``) and has previews
(``previews``). Core asks a method what it is, never who it is: the rules of create,
PATCH, pushes and previews read these through the functions here, given the app's
methods (``{name: method}``); no method's name is compared outside its own plugin
(``tests/unit/test_method_names.py`` holds that).
"""
from __future__ import annotations


def _schema(method) -> dict:
    return getattr(method, "request_schema", None) or {}


def source_fields(method) -> tuple:
    """The fields ``method`` keeps per service (none for None)."""
    return tuple(getattr(method, "source_fields", ()) or ())


def created_fields(method) -> tuple:
    """The source fields a create takes: those of :func:`source_fields` its
    ``request_schema`` allows."""
    allowed = _schema(method).get("properties") or {}
    return tuple(name for name in source_fields(method) if name in allowed)


def patched_fields(method) -> tuple:
    """The source fields a PATCH takes: those a create takes and does not require (a field
    a create requires names the source, which stays: a service's repository never
    changes, ``core.panel.host_keys``)."""
    required = set(_schema(method).get("required") or ())
    return tuple(name for name in created_fields(method) if name not in required)


def repository_field(method) -> str | None:
    """The source field that names where ``method``'s source comes from (the first a
    create requires: a repository's URL), or None. A preview of a fork's pull request
    puts the fork's repository there (``core.panel.previews``)."""
    required = set(_schema(method).get("required") or ())
    return next((name for name in created_fields(method) if name in required), None)


def source_of(method, request: dict, planned: dict | None = None) -> dict:
    """The service's ``source``: each field a create takes (:func:`created_fields`) as the
    plan answered it (``planned``: ``DeployPlan.source``), else as ``request`` gave it;
    fields without a value are left out."""
    planned = planned or {}
    values = {name: planned.get(name, request.get(name)) for name in created_fields(method)}
    return {name: value for name, value in values.items() if value is not None}


def fetches_source(method) -> bool:
    return bool(getattr(method, "fetches_source", False))


def deploys_on_push(method) -> bool:
    return bool(getattr(method, "deploys_on_push", False))


def has_previews(method) -> bool:
    return bool(getattr(method, "previews", False))


def pushed(methods: dict | None, deploy_method: str) -> bool:
    """Whether services of ``deploy_method`` (a name among ``methods``) deploy on push."""
    return deploys_on_push((methods or {}).get(deploy_method))


def those_that(methods: dict | None, capability) -> str:
    """The names of ``methods`` that have ``capability`` (one of the predicates here),
    for a message (``git and ai``); ``none`` when no method has it."""
    names = sorted(name for name, method in (methods or {}).items() if capability(method))
    if not names:
        return "none"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def all_source_fields(methods: dict | None) -> tuple:
    """Every source field of ``methods``, each once (the detail answers each of them, null
    for a service that does not keep it)."""
    return tuple(dict.fromkeys(name for _, method in sorted((methods or {}).items())
                               for name in source_fields(method)))


def runs_compose(methods: dict | None) -> str | None:
    """The name of the method that runs a compose definition as it is given (its create
    requires ``compose``): what a restore into a new service deploys the backup's
    service's compose with (``core.panel.backups``). None when no loaded method does."""
    return next((name for name, method in sorted((methods or {}).items())
                 if "compose" in (_schema(method).get("required") or ())), None)
