"""The rate store ``SLIPWAY_RATE_STORE`` names (ports/ratestore.py): ``memory``, the
default, keeps each process's buckets in its own memory; a URL goes to the plugin that
serves its scheme (``redis://``: plugins/ratestore_redis)."""
from __future__ import annotations


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
