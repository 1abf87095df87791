"""The app's own registry entries, registered in every plugin manager like a plugin
(``app.pluginmanager.make_plugin_manager``): the ``memory`` rate store and the
``memory`` and ``postgres`` event buses. A plugin may add others beside them."""
from __future__ import annotations

from ports import hookimpl


class MemoryRateStoreFactory:
    """``SLIPWAY_RATE_STORE=memory`` (the default): each process keeps its own buckets."""

    name = "memory"

    def create(self, settings):
        from app.http.ratestore import MemoryRateStore

        return MemoryRateStore()


class MemoryBusFactory:
    """``SLIPWAY_EVENT_BUS=memory`` (the default): each process hears its own events."""

    name = "memory"

    def create(self, settings):
        from app.panel.event_bus import InProcessBus

        return InProcessBus()


class PostgresBusFactory:
    """``SLIPWAY_EVENT_BUS=postgres``: ``LISTEN/NOTIFY`` through the database of
    ``SLIPWAY_DATABASE_URL`` (which must be PostgreSQL), so every process hears every event."""

    name = "postgres"

    def create(self, settings):
        from app.panel.event_bus import PostgresBus

        url = settings.get("SLIPWAY_DATABASE_URL") or ""
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("SLIPWAY_EVENT_BUS=postgres needs a PostgreSQL database (SLIPWAY_DATABASE_URL="
                             f"postgresql://...), not {url.split(':', 1)[0] or 'none'}")
        return PostgresBus(url)


@hookimpl(trylast=True)
def register_rate_stores():
    return [MemoryRateStoreFactory()]


@hookimpl(trylast=True)
def register_event_buses():
    return [MemoryBusFactory(), PostgresBusFactory()]
