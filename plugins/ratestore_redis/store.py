"""The Redis rate store itself (redis-py, imported only when ``SLIPWAY_RATE_STORE`` names
Redis: see :mod:`plugins.ratestore_redis`)."""
from __future__ import annotations

import asyncio
import time

import redis.asyncio as redis
from redis.exceptions import RedisError

from core.ratelimit import BucketTable, decide
from plugins.ratestore_redis import CONNECTIONS, PREFIX, RETRY_AFTER, TAKE, TIMEOUT, WARN_EVERY, log
from ports.ratestore import RateStore, RateTable


class RedisTable(RateTable):
    def __init__(self, store: "RedisRateStore", name: str, rate: float, burst: float):
        self.store, self.name, self.rate, self.burst = store, name, rate, burst
        self.local = BucketTable(rate, burst)  # while Redis cannot be reached

    async def take(self, key, now, *, rate=None, burst=None):
        rate, burst = rate or self.rate, burst or self.burst
        if self.store.admit():
            try:
                async with asyncio.timeout(self.store.timeout):
                    allowed, tokens = await self.store.script(keys=[f"{PREFIX}{self.name}:{key}"],
                                                              args=[rate, burst])
                decision = decide(bool(int(allowed)), float(tokens), rate, burst)
            except (RedisError, OSError, TimeoutError, ValueError, TypeError) as exc:
                self.store.failed(exc)
            else:
                self.store.answered()
                return decision
        return self.local.take(key, now, rate=rate, burst=burst)


class RedisRateStore(RateStore):
    def __init__(self, url: str, timeout: float = TIMEOUT):
        self.url, self.timeout = url, timeout  # seconds a take may spend on Redis, all in
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=CONNECTIONS, timeout=timeout,
                                                     socket_timeout=timeout, socket_connect_timeout=timeout,
                                                     health_check_interval=30)
        self.client = redis.Redis(connection_pool=pool)
        self.script = self.client.register_script(TAKE)
        self._down_until = 0.0  # monotonic time before which Redis is left alone
        self._probing = False  # one take is trying Redis again after it failed
        self._warned = 0.0

    def table(self, name, rate, burst):
        return RedisTable(self, name, rate, burst)

    def admit(self) -> bool:
        """Whether this take may ask Redis: always while it answers; after a failure, none
        for a second, then one at a time until one gets an answer."""
        if not self._down_until:
            return True
        if self._probing or time.monotonic() < self._down_until:
            return False
        self._probing = True
        return True

    def answered(self) -> None:
        self._down_until, self._probing = 0.0, False

    def failed(self, exc) -> None:
        now = time.monotonic()
        self._down_until, self._probing = now + RETRY_AFTER, False
        if now - self._warned >= WARN_EVERY:
            self._warned = now
            log.warning("rate store unreachable (%s): limits hold per process until it answers",
                        type(exc).__name__)

    async def start(self):
        try:
            async with asyncio.timeout(2 * self.timeout):
                await self.client.ping()
        except (RedisError, OSError, TimeoutError) as exc:
            log.error("SLIPWAY_RATE_STORE: Redis does not answer (%s: %s); rate limits hold per process "
                      "until it does", type(exc).__name__, exc)

    async def stop(self):
        await self.client.aclose()
