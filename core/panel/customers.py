"""The panel's customers (``cust_<id>``): whose services a hosting panel runs, and the
limits on what they may run.

Limits (docs/decisions.md "Tenant safety"): a customer's ``limits`` are ``{services,
memory_mb, cpus, containers}``, each ``None`` (the operator's default, :class:`Quota`) or a number.
A create or redeploy that would take the customer past a limit is a ``Conflict`` naming
it, decided in the transaction that stores the service (:func:`reserve`).
"""
from __future__ import annotations

import math
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from core.errors import Conflict, Invalid, NotFound

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")

#: the largest value each limit takes: beyond it a value is a mistake, not a plan
LIMIT_MAX = {"services": 100_000, "memory_mb": 64 * 1024 * 1024, "cpus": 65_536, "containers": 100_000}


@dataclass(frozen=True)
class Limits:
    """A customer's own limits; ``None`` is the operator's default. CPUs are kept in
    thousandths (``millicpus``) so that sums of fractions compare exactly."""

    services: int | None = None
    memory_mb: int | None = None
    millicpus: int | None = None
    containers: int | None = None

    @property
    def cpus(self) -> float | int | None:
        return None if self.millicpus is None else _cpus_number(self.millicpus)


@dataclass(frozen=True)
class PanelCustomer:
    id: str
    name: str
    email: str
    created_at: datetime
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Footprint:
    """What a service counts against its customer's limits: the container memory and CPU
    limits of its components summed (a component without ``mem_limit`` / ``cpus``
    counts what the runtime gives it), and its containers (one per component)."""

    memory_mb: int = 0
    millicpus: int = 0
    containers: int = 0


@dataclass(frozen=True)
class Quota:
    """The operator's defaults: ``SLIPWAY_CUSTOMER_MAX_*`` for a customer without its own
    limit, ``SLIPWAY_DEFAULT_MEMORY_MB`` / ``SLIPWAY_DEFAULT_CPUS`` for a container whose
    compose sets none (as the runtime applies them)."""

    services: int = 20
    memory_mb: int = 4096
    cpus: float = 4
    containers: int = 50
    container_memory_mb: int = 512
    container_cpus: float = 1
    #: ``read_compose(compose, variables)`` -> the components of a kept compose text (the
    #: app passes the compose parser); ``None``: a redeploy keeps the stored footprint
    read_compose: Callable | None = None

    def footprint(self, components) -> Footprint:
        """Of a plan's components; none known yet (a git or ai service before its first
        build) counts one component with the defaults."""
        components = tuple(components) or (None,)
        memory = sum(getattr(c, "memory_mb", None) or self.container_memory_mb for c in components)
        milli = sum(to_millicpus(getattr(c, "cpus", None) or self.container_cpus) for c in components)
        return Footprint(memory_mb=int(memory), millicpus=milli, containers=len(components))

    def footprint_of_compose(self, compose: str, variables: dict | None) -> Footprint | None:
        """Of a service's kept compose text; ``None`` when it cannot be read."""
        if not compose or self.read_compose is None:
            return None
        try:
            return self.footprint(self.read_compose(compose, variables or {}).components)
        except (Invalid, ValueError, TypeError, AttributeError, OverflowError, RecursionError):
            return None

    def effective(self, limits: Limits) -> dict:
        """``{services, memory_mb, millicpus, containers}`` in force for a customer with ``limits``."""
        return {"services": self.services if limits.services is None else limits.services,
                "memory_mb": self.memory_mb if limits.memory_mb is None else limits.memory_mb,
                "millicpus": to_millicpus(self.cpus) if limits.millicpus is None else limits.millicpus,
                "containers": self.containers if limits.containers is None else limits.containers}


DEFAULT_QUOTA = Quota()


def to_millicpus(cpus) -> int:
    return int(round(float(cpus) * 1000))


def _cpus_number(millicpus: int):
    return millicpus // 1000 if millicpus % 1000 == 0 else millicpus / 1000


def _check(values: dict) -> None:
    problems = {}
    if "name" in values and not str(values["name"]).strip():
        problems["name"] = "must not be empty"
    if "email" in values and values["email"] and not _EMAIL.match(values["email"]):
        problems["email"] = "must be an email address"
    if problems:
        raise Invalid("invalid customer", fields=problems)


def parse_limits(raw, current: Limits | None = None) -> Limits:
    """``limits`` of a request: a map with any of ``services``, ``memory_mb``, ``cpus``,
    ``containers``, each ``null`` (the default) or a number from 0 up to
    :data:`LIMIT_MAX`; keys not given keep ``current``. ``services``, ``memory_mb`` and
    ``containers`` are whole numbers, ``cpus`` has at most three decimals."""
    current = current or Limits()
    if raw is None:
        return current
    if not isinstance(raw, dict):
        raise Invalid("invalid customer", fields={"limits": "must be an object with services, memory_mb, cpus, containers"})
    problems = {}
    unknown = sorted(set(raw) - set(LIMIT_MAX))
    if unknown:
        problems[f"limits.{unknown[0]}"] = "is not a limit (services, memory_mb, cpus, containers)"
    values: dict[str, int | None] = {}
    for key in LIMIT_MAX:
        if key not in raw:
            continue
        value = raw[key]
        if value is None:
            values[key] = None
            continue
        where = f"limits.{key}"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            problems[where] = "must be a number or null"
        elif not 0 <= value <= LIMIT_MAX[key]:
            problems[where] = f"must be from 0 to {LIMIT_MAX[key]}, or null for the default"
        elif key != "cpus" and value != int(value):
            problems[where] = "must be a whole number"
        elif key == "cpus" and abs(value * 1000 - round(value * 1000)) > 1e-6:
            problems[where] = "at most three decimals, e.g. 0.5"
        else:
            values[key] = int(value) if key != "cpus" else to_millicpus(value)
    if problems:
        raise Invalid("invalid customer limits", fields=problems)
    if "cpus" in values:
        values["millicpus"] = values.pop("cpus")
    return replace(current, **values)


def create_customer(uow, clock, *, name: str, email: str = "", limits: dict | None = None) -> PanelCustomer:
    _check({"name": name, "email": email})
    customer = PanelCustomer(id=f"cust_{secrets.token_hex(8)}", name=name.strip(), email=email,
                             created_at=clock.now(), limits=parse_limits(limits))
    with uow:
        uow.panel_customers.add(customer)
        uow.commit()
    return customer


def get_customer(uow, customer_id: str) -> PanelCustomer:
    with uow:
        found = uow.panel_customers.get(customer_id)
    if found is None:
        raise NotFound(f"customer {customer_id} not found")
    return found


def list_customers(uow, *, page: int, per_page: int, sort: str = "created_at", order: str = "asc",
                   search: str | None = None):
    with uow:
        return uow.panel_customers.page(page=page, per_page=per_page, sort=sort, order=order, search=search)


def update_customer(uow, customer_id: str, values: dict) -> PanelCustomer:
    """``name``, ``email`` and ``limits`` (merged key by key; ``null`` restores the
    default). A limit may be lowered below what the customer uses now: its services stay,
    and only what would add to the usage (a create, a redeploy that grows) is refused."""
    limits = values.get("limits")
    values = {k: v for k, v in values.items() if k in ("name", "email")}
    _check(values)
    if limits is not None:
        parse_limits(limits)  # 422 before the database is touched
    with uow:
        found = uow.panel_customers.get(customer_id, for_update=True)
        if found is None:
            raise NotFound(f"customer {customer_id} not found")
        changed = {k: (v.strip() if k == "name" else v) for k, v in values.items()}
        if limits is not None:
            changed["limits"] = parse_limits(limits, found.limits)
        if changed:
            found = replace(found, **changed)
            uow.panel_customers.update(found)
            uow.commit()
    return found


def delete_customer(uow, customer_id: str) -> None:
    with uow:
        if uow.panel_customers.get(customer_id) is None:
            raise NotFound(f"customer {customer_id} not found")
        if uow.services.count_for_customer(customer_id):
            raise Conflict("the customer still has services; delete them first")
        if uow.api_keys.count_for_customer(customer_id):
            raise Conflict("API keys of role customer still belong to this customer; revoke them first")
        uow.panel_customers.delete(customer_id)
        uow.commit()


def reserve(uow, quota: Quota, customer: PanelCustomer, adding: Footprint, *, new_service: bool,
            replacing: Footprint | None = None) -> None:
    """In the caller's transaction, with ``customer``'s row locked (``get(...,
    for_update=True)``; SQLite's write lock does the same): refuse with ``Conflict``
    naming the limit when ``adding`` (a new service, or one whose footprint was
    ``replacing``) takes the customer past one of its limits. A redeploy that does not
    grow a total is never refused, even over a limit lowered since."""
    limit = quota.effective(customer.limits)
    count, memory, milli, containers = uow.panel_customers.usage(customer.id)
    old = replacing or Footprint()
    if new_service and count + 1 > limit["services"]:
        raise Conflict(f"customer {customer.id} has {count} of its {limit['services']} services "
                       "(limits.services); delete one or ask for a higher limit")
    new_memory = memory - old.memory_mb + adding.memory_mb
    if adding.memory_mb > old.memory_mb and new_memory > limit["memory_mb"]:
        raise Conflict(f"this would take customer {customer.id} to {new_memory} MB of container memory, past its "
                       f"limit of {limit['memory_mb']} MB (limits.memory_mb; a component without mem_limit "
                       f"counts {quota.container_memory_mb} MB)")
    new_milli = milli - old.millicpus + adding.millicpus
    if adding.millicpus > old.millicpus and new_milli > limit["millicpus"]:
        raise Conflict(f"this would take customer {customer.id} to {_cpus_number(new_milli)} CPUs, past its limit "
                       f"of {_cpus_number(limit['millicpus'])} (limits.cpus; a component without cpus counts "
                       f"{_cpus_number(to_millicpus(quota.container_cpus))})")
    new_containers = containers - old.containers + adding.containers
    if adding.containers > old.containers and new_containers > limit["containers"]:
        raise Conflict(f"this would take customer {customer.id} to {new_containers} containers, past its limit "
                       f"of {limit['containers']} (limits.containers; one container per compose service)")
