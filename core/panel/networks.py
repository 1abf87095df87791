"""The customer network: a network of each customer's own that its services join when
they opt in (``customer_network: true``), so a customer's app reaches its database by
the database service's name. Networks of different customers are isolated from each
other (and from every service's own network), as every network Slipway makes is.

On it a service's first component (compose order, the component the service's URL
points at when it publishes a port) answers as ``<service name>``, and every component
as ``<service name>-<component>``. The network is made by the first deploy that needs
it and removed once no service of the customer uses it any more (a delete, or a
redeploy after ``customer_network`` was turned off): :func:`drop_if_unused`."""
from __future__ import annotations

CUSTOMER_LABEL = "slipway.customer"  # on a customer network: the customer it belongs to


def network_name(customer_id: str) -> str:
    """The engine's name of the customer's network: ``slw-net-<customer id>``."""
    return f"slw-net-{customer_id}"


def primary(plan):
    """The component that answers as the service's name: the first one that publishes a
    port, else the first one (``None`` for a plan without components)."""
    for component in plan.components:
        if component.ports:
            return component
    return plan.components[0] if plan.components else None


def aliases(service, plan, component) -> tuple:
    """The names ``component`` of ``service`` answers to on the customer network."""
    own = f"{service.name}-{component.name}"
    first = primary(plan)
    return (service.name, own) if first is not None and first.name == component.name else (own,)


def attachments(service, plan, component) -> tuple:
    """The further networks (``ContainerSpec.networks``) a container of ``component``
    joins: its customer's network with its aliases, when the service opted in."""
    if not service.customer_network:
        return ()
    return ((network_name(service.customer_id), aliases(service, plan, component)),)


def connections(service, plan) -> list[dict]:
    """``[{component, host, port}]``: where the service's components answer on its
    customer's network (every container port they declare); empty when it did not opt
    in or has no plan."""
    if not service.customer_network or plan is None:
        return []
    out = []
    for component in plan.components:
        host = aliases(service, plan, component)[0]
        for port in component.ports:
            out.append({"component": component.name, "host": host, "port": port.container_port})
    return out


def ensure(runtime, service) -> None:
    """Make the customer's network (isolated, labelled with the customer) when ``service``
    joins it; an existing one is kept."""
    if service.customer_network:
        runtime.create_network(network_name(service.customer_id), {CUSTOMER_LABEL: service.customer_id})


def drop_if_unused(uow, runtime, customer_id: str) -> bool:
    """Remove the customer's network when none of its services uses it any more; best
    effort (a container still attached keeps it: the next call removes it). Whether it
    was removed."""
    with uow.reading():
        if uow.services.on_customer_network(customer_id):
            return False
    try:
        runtime.remove_network(network_name(customer_id))
    except Exception:  # noqa: BLE001 (still in use, or the engine is away: it stays until the next try)
        return False
    return True
