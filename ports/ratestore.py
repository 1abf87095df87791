"""The rate-store port: where the token buckets of both APIs live (the partner API's
per-token limit and failed-auth brake, the panel's per-address, per-key and deploy tiers).

``SLIPWAY_RATE_STORE`` picks the store: ``memory`` (the default: each process keeps its
own buckets, ``app.http.ratestore.MemoryRateStore``) or a URL whose scheme a plugin
registers through ``register_rate_stores`` (``redis://``/``rediss://``:
``plugins.ratestore_redis``, one set of buckets shared by every process). A gate asks a
store for a :class:`RateTable` per bucket family and takes one token per request."""
from __future__ import annotations

from abc import ABC, abstractmethod

from core.ratelimit import Decision  # part of the port


class RateTable(ABC):
    """One family of token buckets (one per key), all of ``rate`` tokens a second up to
    ``burst``."""

    name: str
    rate: float
    burst: float

    @abstractmethod
    async def take(self, key: str, now: float, *, rate: float | None = None,
                   burst: float | None = None) -> "Decision":
        """Take one token from ``key``'s bucket. ``now`` is the caller's monotonic clock
        in seconds (a store shared between processes may keep its own clock instead);
        ``rate`` and ``burst`` override the table's for this key (per-key limits). Never
        raises for a store that cannot be reached: a store degrades to buckets of this
        process rather than refuse or fail requests."""


class RateStore(ABC):
    """Makes tables; ``start``/``stop`` run in the server's lifespan (connections)."""

    @abstractmethod
    def table(self, name: str, rate: float, burst: float) -> RateTable:
        """The table ``name`` (unique per bucket family: processes that share a store
        share the buckets of a name)."""

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


class RateStoreFactory(ABC):
    """What a plugin registers: ``name`` (the URL scheme it serves, e.g. ``redis``; a
    plugin serving two schemes registers a factory for each) and ``create(settings) ->
    RateStore`` for the URL of ``settings["SLIPWAY_RATE_STORE"]`` (``ValueError`` for a bad
    URL)."""

    name: str

    @abstractmethod
    def create(self, settings) -> RateStore:
        ...
