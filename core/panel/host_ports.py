"""Stable host ports: a component keeps the host port it was given (for a published port
compose gave none) across redeploys, rollbacks and restarts while that port is free.

What a deploy was given is kept per service, component, container port and protocol
(``ServiceRepository.keep_host_ports``, with the switch); the next deploy's plan asks the
runtime for it again (:func:`prefer`: ``PortSpec.preferred``), which takes it when nothing
publishes or binds it and picks another free one of ``SLIPWAY_HOST_PORTS`` otherwise. A
port written in compose is the compose's, as ever (never kept here). A port that was
taken meanwhile by something else gives the service's timeline an event saying so
(:func:`moved`); one held by the service's own serving set (a health-gated redeploy
behind a proxy, whose new set starts beside the old one) is no news."""
from __future__ import annotations

from dataclasses import replace

from core.panel.containers import COMPONENT_LABEL


def _key(component: str, port) -> tuple:
    return (component, int(port.container_port), port.protocol or "tcp")


def prefer(plan, kept: dict):
    """``plan`` with each port without a host port asking for the one ``kept`` records."""
    if not kept:
        return plan
    components = []
    for component in plan.components:
        ports = tuple(replace(p, preferred=kept.get(_key(component.name, p))) if p.host_port is None else p
                      for p in component.ports)
        components.append(replace(component, ports=ports))
    return replace(plan, components=tuple(components))


def kept_in(plan) -> bool:
    """Whether a port of ``plan`` asks for a kept host port."""
    return any(getattr(p, "preferred", None) is not None for c in plan.components for p in c.ports)


def given(plan, states) -> dict:
    """What the running set was given: ``{(component, container port, protocol): host
    port}`` for the plan's ports without a host port in compose."""
    by_component = {s.labels.get(COMPONENT_LABEL): s for s in states}
    out = {}
    for component in plan.components:
        state = by_component.get(component.name)
        published = dict(getattr(state, "ports", None) or {}) if state is not None else {}
        for p in component.ports:
            if p.host_port is None and published.get(p.container_port):
                out[_key(component.name, p)] = int(published[p.container_port])
    return out


def moved(kept: dict, now: dict, held=()) -> list[tuple]:
    """``(component, container port, protocol, kept port, new port)`` for each port that
    had a kept host port and was given another, not counting those ``held`` (host ports
    the service's own serving set published when the new set started)."""
    held = set(held)
    return [(c, p, proto, kept[(c, p, proto)], port) for (c, p, proto), port in sorted(now.items())
            if (c, p, proto) in kept and kept[(c, p, proto)] != port and kept[(c, p, proto)] not in held]


def held_back(kept: dict, now: dict, held=()) -> dict:
    """The kept ports that ``now`` did not get because the service's own serving set
    held them (``held``): they stay the ones kept."""
    held = set(held)
    return {key: port for key, port in kept.items() if key in now and now[key] != port and port in held}


def message(component: str, container_port: int, protocol: str, old: int, new: int) -> str:
    return (f"{component}: host port {old} was taken by something else meanwhile; its port "
            f"{container_port}/{protocol} is now published on {new}")
