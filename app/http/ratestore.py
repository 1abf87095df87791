"""The rate store ``SLIPWAY_RATE_STORE`` names (ports/ratestore.py): ``memory``, the
default, keeps each process's buckets in its own memory; a URL goes to the plugin that
serves its scheme (``redis://``: plugins/ratestore_redis)."""
from __future__ import annotations

from urllib.parse import urlsplit

from app.config import ConfigError
from app.pluginmanager import rate_stores
from core.ratelimit import BucketTable
from ports.ratestore import RateStore, RateTable


class MemoryTable(RateTable):
    """A :class:`core.ratelimit.BucketTable` of this process."""

    def __init__(self, name: str, rate: float, burst: float):
        self.name, self.rate, self.burst = name, rate, burst
        self.buckets = BucketTable(rate, burst)

    async def take(self, key, now, *, rate=None, burst=None):
        return self.buckets.take(key, now, rate=rate, burst=burst)


class MemoryRateStore(RateStore):
    def table(self, name, rate, burst):
        return MemoryTable(name, rate, burst)


def make_rate_store(pm, config) -> RateStore:
    """``memory``, or the store of the plugin serving the URL's scheme (ConfigError
    naming ``SLIPWAY_RATE_STORE`` otherwise)."""
    value = config.rate_store
    if value.lower() == "memory":
        return MemoryRateStore()
    try:
        scheme = urlsplit(value).scheme
    except ValueError as exc:  # e.g. an unclosed [IPv6 address
        raise ConfigError(f"SLIPWAY_RATE_STORE: not a URL ({exc}); redis://[user:password@]host[:port][/db]") from None
    factories = rate_stores(pm)
    if scheme not in factories:
        raise ConfigError(f"SLIPWAY_RATE_STORE: memory, or a URL of a scheme a loaded plugin serves "
                          f"({', '.join(sorted(factories)) or 'none loaded'}); got scheme {scheme!r}")
    try:
        return factories[scheme].create(value)
    except ValueError as exc:
        raise ConfigError(f"SLIPWAY_RATE_STORE: {exc}") from exc
