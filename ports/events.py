"""The event-bus port: real-time events for the panel's WebSocket channel.

Use cases put events on their unit of work (``uow.emit(event)``); the unit of work hands
them to the bus only after its transaction commits, so a client never hears of a change
that was rolled back. Events that are not tied to a transaction (deploy progress, log
lines) are published straight to the bus. ``publish`` is synchronous and thread-safe:
it is called from worker threads. Subscribers receive events on the event loop.

The message on the wire is docs/decisions.md's envelope
``{"type": <kind>, "data": {...}, "timestamp": <ISO 8601>}``; ``service_id`` and
``customer_id`` travel beside it so the channel can filter by subscription and role
without reading the database.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

from core.panel.events import KINDS, Event  # noqa: F401 (re-exported: the port's message type)


class EventBus(ABC):
    @abstractmethod
    def publish(self, event: Event) -> None:
        """Deliver ``event`` to every subscriber (of every process sharing the bus).
        Never raises for a subscriber's sake; thread-safe."""

    @abstractmethod
    def subscribe(self, callback) -> object:
        """Call ``callback(event)`` on the subscribing event loop for every event;
        returns a handle for ``unsubscribe``. Must be called from the event loop."""

    @abstractmethod
    def unsubscribe(self, handle) -> None: ...

    def start(self):
        """Begin delivering (e.g. start listening); called at server start-up. May be a
        coroutine function, which the server then awaits."""

    async def stop(self) -> None:
        """Stop delivering and release connections; called at shutdown."""


class NullBus(EventBus):
    """Drops every event: for the CLI and for use cases run without a server."""

    def publish(self, event: Event) -> None:
        pass

    def subscribe(self, callback) -> object:
        return None

    def unsubscribe(self, handle) -> None:
        pass
